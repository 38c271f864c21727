//! Flowlet switching as LetFlow does it (Vanini et al., NSDI '17): a flow's packets keep the
//! port of their flowlet; a packet arriving more than `gap` after its flow's previous one at
//! this switch starts a new flowlet, which takes a port of the group uniformly at random.
//! Flowlets shrink on congested paths (their packets are spaced out) and grow on idle ones,
//! which is how LetFlow balances asymmetric fabrics without measuring them.
//!
//! The default gap, 500 µs, is the flowlet inactivity timeout of CONGA's switch implementation
//! (Alizadeh et al., SIGCOMM '14), the hardware LetFlow was built on.
//!
//! The flowlet table is a switch's fixed-size hashed array: `table_size` entries indexed by the
//! flow hash modulo the size, each holding one (last arrival, port). Flows whose hashes meet in
//! an entry share it, as in hardware: the entry is evicted by whichever flow arrives, and a flow
//! arriving within `gap` of another's packet rides the other's flowlet. The default, 64K
//! entries, is the size of CONGA's flowlet table (§4 of its paper), which LetFlow reuses.
//! Only the entries in use are stored (the behaviour is the array's).

use super::{LbKind, LbSite, LoadBalancer, Pick};
use braid_engine::{RngStream, Time};
use braid_topo::units::Duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// `switch.lb = { kind = "flowlet", gap = "500us" }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[schemars(inline)]
pub struct FlowletLb {
    /// Idle time after which a flow's next packet starts a new flowlet.
    pub gap: Duration,
    /// Entries of the flowlet table (flows hash into it; a collision shares an entry).
    pub table_size: u32,
}

impl Default for FlowletLb {
    fn default() -> Self {
        FlowletLb {
            gap: Duration(500 * braid_engine::time::US),
            table_size: 65_536,
        }
    }
}

impl LbKind for FlowletLb {
    fn build(&self, site: &LbSite<'_>) -> Result<Option<Box<dyn LoadBalancer>>, String> {
        if self.gap.0 == 0 {
            return Err("switch.lb.gap: expected a positive duration such as \"500us\"".into());
        }
        if self.table_size == 0 {
            return Err("switch.lb.table_size: expected a positive number of entries".into());
        }
        Ok(Some(Box::new(Flowlets {
            gap: self.gap.0,
            size: self.table_size as u64,
            rng: RngStream::new(site.seed, "lb-flowlet", &[site.switch as u64]),
            table: HashMap::new(),
        })))
    }
}

struct Flowlets {
    gap: Time,
    /// Entries of the table.
    size: u64,
    rng: RngStream,
    /// Per entry in use (the flow hash modulo `size`): its last packet's arrival and its
    /// flowlet's port.
    table: HashMap<u64, (Time, u16)>,
}

impl LoadBalancer for Flowlets {
    fn pick(&mut self, at: &Pick<'_>) -> usize {
        let e = self
            .table
            .entry(at.hash % self.size)
            .or_insert((Time::MAX, u16::MAX));
        let (last, port) = *e;
        let same = last != Time::MAX && at.now.saturating_sub(last) <= self.gap;
        // A port no longer in the group (a link failed over) ends the flowlet too.
        let i = match at.candidates.iter().position(|&p| p == port) {
            Some(i) if same => i,
            _ => self.rng.below(at.candidates.len() as u64) as usize,
        };
        *e = (at.now, at.candidates[i]);
        i
    }
}
