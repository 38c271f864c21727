//! In-band network telemetry (INT), as HPCC (Li et al., SIGCOMM'19, §3.2 and Fig. 4) uses it:
//! each switch a data packet leaves appends one record for the egress port it leaves by
//! (queue length, bytes transmitted so far, the time, the link's rate), the receiver copies the
//! records into the ACK it answers with, and the sender's controller reads them
//! ([`crate::cc::CongestionControl::on_int`]).
//!
//! The records live beside the packets, not in them: a side arena indexed by packet id, kept only
//! when some QP of the run runs a controller that reads INT ([`crate::cc::CcFactory::needs_int`],
//! [`wanted`]). Other runs pay one predictable branch per packet allocated and per switch egress
//! (the packet record stays two cache lines; `packet.rs` asserts it).
//!
//! Wire size: HPCC ns-3 carries the records in an INT header of fixed size on every packet of an
//! HPCC run; braid does not add those bytes (see docs/congestion.md, "HPCC").

use crate::packet::PktId;
use crate::scenario::Scenario;
use braid_engine::Time;

/// Hops recorded at most. HPCC ns-3's INT header holds 5 (a three-tier fat-tree's longest path
/// crosses 5 switches); 8 leaves room for deeper test topologies. Switches past the last slot
/// add nothing (as a full INT header takes no more records).
pub const MAX_HOPS: usize = 8;

/// One switch egress port's record, stamped as the packet leaves it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntHop {
    /// Bytes queued at the port (every priority) once the packet has left the queue.
    pub qlen: u64,
    /// Bytes the port has transmitted, this packet included.
    pub tx_bytes: u64,
    /// When the packet left the queue (ps).
    pub ts: Time,
    /// The link's rate (bit/s).
    pub rate_bps: u64,
    /// Which egress port stamped it (the world's port index): two records of one hop compare
    /// only if the same port wrote both (a flowlet or a failover may move the flow).
    pub port: u32,
}

/// The records a packet carries, in path order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntStack {
    n: u8,
    hops: [IntHop; MAX_HOPS],
}

impl IntStack {
    /// The records, first hop first.
    pub fn hops(&self) -> &[IntHop] {
        &self.hops[..self.n as usize]
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Appends a record (nothing once [`MAX_HOPS`] are there).
    pub fn push(&mut self, h: IntHop) {
        if (self.n as usize) < MAX_HOPS {
            self.hops[self.n as usize] = h;
            self.n += 1;
        }
    }
    pub fn from_hops(hops: &[IntHop]) -> Self {
        let mut s = IntStack::default();
        for &h in hops {
            s.push(h);
        }
        s
    }
}

/// The records of the packets in flight, indexed by packet id (grown with the packet pool).
#[derive(Debug, Default)]
pub struct IntArena {
    /// Switches stamp and receivers echo: some QP of the run reads INT.
    pub on: bool,
    stacks: Vec<IntStack>,
    /// The records of the last data packet or ACK a NIC took in: its slot may be reused by the
    /// ACK that answers it (the packet is freed before its reply is allocated).
    latched: IntStack,
}

impl IntArena {
    /// A packet was allocated in slot `id`: it carries no records yet.
    #[inline]
    pub fn reset(&mut self, id: PktId) {
        let i = id as usize;
        if i >= self.stacks.len() {
            self.stacks.resize(i + 1, IntStack::default());
        }
        self.stacks[i].n = 0;
    }
    pub fn get(&self, id: PktId) -> &IntStack {
        &self.stacks[id as usize]
    }
    /// Keeps a copy of `id`'s records (a NIC takes the packet in; see `latched`).
    #[inline]
    pub fn latch(&mut self, id: PktId) {
        self.latched = self.stacks.get(id as usize).copied().unwrap_or_default();
    }
    pub fn latched(&self) -> &IntStack {
        &self.latched
    }
    /// Gives packet `id` (an ACK) the latched records: the receiver's echo.
    #[inline]
    pub fn echo_into(&mut self, id: PktId) {
        self.stacks[id as usize] = self.latched;
    }
}

/// The switch-side hook: data packet `id` leaves an egress port, which appends its record. Called
/// only when [`IntArena::on`].
#[inline(never)]
pub fn stamp(arena: &mut IntArena, id: PktId, hop: IntHop) {
    arena.stacks[id as usize].push(hop);
}

/// Whether any QP of the scenario may run a controller that reads INT: `[transport]`, a
/// `per_host` entry, or a `[[traffic]]`'s or `[[apps]]`'s own `transport`.
pub fn wanted(sc: &Scenario) -> bool {
    let reads =
        |c: &Option<crate::cc::CongestionConfig>| c.as_ref().is_some_and(|c| c.kind().needs_int());
    reads(&sc.transport.cc)
        || sc.transport.per_host.values().any(|o| reads(&o.cc))
        || sc
            .traffic
            .iter()
            .any(|t| t.transport.as_ref().is_some_and(|o| reads(&o.cc)))
        || sc
            .apps
            .iter()
            .any(|a| a.transport.as_ref().is_some_and(|o| reads(&o.cc)))
}

/// With INT read: the first switch policy that sends one flow's packets on different paths
/// (`switch.lb` or a `switch.lb_at` entry), as (key, kind). HPCC compares each hop's record with
/// the previous ACK's for the same hop; records of different paths do not compare.
pub fn per_packet_lb(sc: &Scenario) -> Option<(String, &'static str)> {
    let sw = &sc.switch;
    if let Some(k) = sw.lb.kind().per_packet() {
        return Some(("switch.lb.kind".into(), k));
    }
    sw.lb_at.iter().enumerate().find_map(|(i, a)| {
        a.lb.kind()
            .per_packet()
            .map(|k| (format!("switch.lb_at[{i}].lb.kind"), k))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_keeps_hops_in_order_and_stops_at_max_hops() {
        let mut s = IntStack::default();
        for i in 0..(MAX_HOPS as u64 + 2) {
            s.push(IntHop {
                qlen: i,
                ..Default::default()
            });
        }
        assert_eq!(s.hops().len(), MAX_HOPS);
        assert_eq!(s.hops()[0].qlen, 0);
        assert_eq!(s.hops()[MAX_HOPS - 1].qlen, MAX_HOPS as u64 - 1);
    }

    #[test]
    fn a_reused_slot_starts_empty_and_the_echo_survives_its_reuse() {
        let mut a = IntArena {
            on: true,
            ..Default::default()
        };
        a.reset(3);
        let h = IntHop {
            qlen: 1000,
            tx_bytes: 5000,
            ts: 7,
            rate_bps: 100_000_000_000,
            port: 9,
        };
        stamp(&mut a, 3, h);
        a.latch(3);
        // The data packet's slot is reused by its ACK.
        a.reset(3);
        assert!(a.get(3).is_empty());
        a.echo_into(3);
        assert_eq!(a.get(3).hops()[0].qlen, 1000);
        assert_eq!(a.get(3).hops()[0].tx_bytes, 5000);
    }
}
