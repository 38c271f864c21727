//! ECMP: every packet of a flow takes the port its 5-tuple hash picks (`net::ecmp_hash`, seeded
//! per switch), so a flow keeps one path and never reorders; flows spread over the group only
//! statistically.

use super::{LbKind, LbSite, LoadBalancer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `switch.lb = { kind = "ecmp" }` (no parameters; the hash's seed is `switch.ecmp_seed`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct EcmpLb {}

impl LbKind for EcmpLb {
    fn build(&self, _site: &LbSite<'_>) -> Result<Option<Box<dyn LoadBalancer>>, String> {
        // No state: the hop computes the hash upstream, on its fast path.
        Ok(None)
    }
}

/// The index among `n` ports that hash `h` picks: `h % n`, a mask when `n` is a power of two
/// (fat-trees' groups), which spares a 64-bit division per hop.
#[inline(always)]
pub fn index_of(h: u64, n: usize) -> usize {
    let n = n as u64;
    (if n.is_power_of_two() {
        h & (n - 1)
    } else {
        h % n
    }) as usize
}
