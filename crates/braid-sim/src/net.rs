//! The network: ports (one end of a link: rate, delay, loss, up/down, PFC state, egress queues)
//! and switches (shared buffer with per-ingress accounting, PFC, RED/ECN at egress, ECMP on the
//! 5-tuple, strict priority or DWRR between queues).

pub mod config;
pub mod int;
pub mod lb;

use crate::packet::{PacketPool, PktId};
use braid_engine::{RngStream, Time};
use config::{EcnCurve, Scheduler, SwitchConfig};
use std::collections::VecDeque;

pub const MAX_PRIO: usize = 8;

/// One end of a link, owned by the node that transmits on it.
///
/// The layout is fixed (`repr(C)`, aligned to a cache line) so that what a packet's hop reads
/// comes in the first three lines: forwarding's fast path and `put_on_wire` (line 0), the queues
/// (line 1), RED and the wake-up (line 2); counters and state read rarely come after
/// (docs/performance.md, "Round 3").
#[repr(C, align(64))]
pub struct Port {
    // --- line 0
    pub busy_until: Time,
    pub bytes: u64,
    /// Picoseconds per byte when that is a whole number (every common rate), so serialization
    /// is a multiplication; 0 = use the exact division.
    ps_per_byte: u64,
    pub delay: Time,
    pub tx_bytes: u64,
    pub tx_pkts: u64,
    /// The peer asked us (PFC) to stop sending this priority.
    pub paused: [bool; MAX_PRIO],
    pub peer_node: u32,
    pub peer_port: u16,
    pub up: bool,
    /// Bit p set: egress queue p holds a packet. The strict scheduler takes the lowest set bit
    /// that is not paused instead of looking at every queue's header (two lines of `VecDeque`s).
    nonempty: u8,
    // --- line 1
    pub ctrl: VecDeque<PktId>,
    // Egress queues (switch ports only; a host's NIC keeps its own queues).
    pub queues: Vec<VecDeque<PktId>>,
    pub loss: f64,
    // --- line 2
    pub ecn: EcnCurve,
    /// A wake-up event is scheduled for this time.
    pub wake_at: Option<Time>,
    /// PFC frames sent (counted in tx_pkts too).
    pub tx_pfc: u64,
    pub rate: u64,
    /// The peer's switch index if it is a switch, else `world::NO_SWITCH` (the hop routes at
    /// the peer when it puts a packet on the wire: `World::put_on_wire`).
    pub peer_switch: u32,
    // --- the rest
    pub qbytes: [u64; MAX_PRIO],
    deficit: [i64; MAX_PRIO],
    rr: usize,
    /// The queue at `rr` has had its quantum for this visit.
    visited: bool,
    pub link: u32,
    pub loss_rng: RngStream,
    /// Packets this port's egress marked CE (RED/ECN), for per-port marking ratios.
    pub ecn_marks: u64,
    /// Time this port spent paused, for reporting.
    pub pause_started: [Option<Time>; MAX_PRIO],
    pub paused_ps: u64,
}

impl Port {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        peer_node: u32,
        peer_port: u16,
        link: u32,
        rate: u64,
        delay: Time,
        loss: f64,
        prios: usize,
        ecn: EcnCurve,
        loss_rng: RngStream,
    ) -> Self {
        Port {
            peer_node,
            peer_port,
            link,
            rate,
            peer_switch: u32::MAX,
            ps_per_byte: if (8 * braid_engine::time::S).is_multiple_of(rate) {
                8 * braid_engine::time::S / rate
            } else {
                0
            },
            delay,
            loss,
            up: true,
            busy_until: 0,
            wake_at: None,
            paused: [false; MAX_PRIO],
            queues: (0..prios).map(|_| VecDeque::new()).collect(),
            qbytes: [0; MAX_PRIO],
            bytes: 0,
            ctrl: VecDeque::new(),
            deficit: [0; MAX_PRIO],
            rr: 0,
            visited: false,
            nonempty: 0,
            ecn,
            loss_rng,
            tx_bytes: 0,
            tx_pkts: 0,
            tx_pfc: 0,
            ecn_marks: 0,
            pause_started: [None; MAX_PRIO],
            paused_ps: 0,
        }
    }

    /// Time to transmit `bytes` on this port (rounded up to the picosecond).
    #[inline]
    pub fn serialization(&self, bytes: u64) -> Time {
        if self.ps_per_byte != 0 {
            bytes * self.ps_per_byte
        } else {
            braid_engine::time::serialization(bytes, self.rate)
        }
    }

    pub fn set_paused(&mut self, prio: usize, on: bool, now: Time) {
        let prio = prio.min(MAX_PRIO - 1);
        if on && !self.paused[prio] {
            self.pause_started[prio] = Some(now);
        } else if !on && self.paused[prio] {
            if let Some(t) = self.pause_started[prio].take() {
                self.paused_ps += now - t;
            }
        }
        self.paused[prio] = on;
    }

    /// Next packet to transmit from the egress queues: PFC frames first, then by the scheduler,
    /// skipping paused priorities.
    pub fn dequeue(
        &mut self,
        sched: Scheduler,
        quantum: &[u32],
        pool: &PacketPool,
    ) -> Option<PktId> {
        if let Some(id) = self.ctrl.pop_front() {
            return Some(id);
        }
        let n = self.queues.len();
        match sched {
            Scheduler::Strict => {
                // The lowest non-empty queue that is not paused (`nonempty` mirrors the queues).
                let mut m = self.nonempty;
                while m != 0 {
                    let p = m.trailing_zeros() as usize;
                    if !self.paused[p] {
                        return self.take(p, pool);
                    }
                    m &= m - 1;
                }
                None
            }
            Scheduler::Dwrr => {
                // Deficit round robin (Shreedhar & Varghese): each visit to a backlogged queue adds
                // its quantum once; it sends while its deficit covers the head packet, then the
                // turn passes on. An emptied queue forfeits its deficit.
                let eligible = (0..n).any(|p| !self.paused[p] && !self.queues[p].is_empty());
                if !eligible {
                    return None;
                }
                loop {
                    let p = self.rr;
                    if !self.paused[p] {
                        if let Some(&head) = self.queues[p].front() {
                            if !self.visited {
                                self.deficit[p] += quantum.get(p).copied().unwrap_or(1500) as i64;
                                self.visited = true;
                            }
                            let sz = pool.get(head).size as i64;
                            if self.deficit[p] >= sz {
                                self.deficit[p] -= sz;
                                return self.take(p, pool);
                            }
                        } else {
                            self.deficit[p] = 0;
                        }
                    }
                    self.rr = (self.rr + 1) % n;
                    self.visited = false;
                }
            }
        }
    }

    /// The packet the strict scheduler would send next, ignoring pauses (a hint for prefetching;
    /// never panics).
    #[inline]
    pub fn head(&self) -> Option<PktId> {
        if let Some(&id) = self.ctrl.front() {
            return Some(id);
        }
        let q = self.queues.get(self.nonempty.trailing_zeros() as usize)?;
        q.front().copied()
    }

    fn take(&mut self, p: usize, pool: &PacketPool) -> Option<PktId> {
        let q = &mut self.queues[p];
        let id = q.pop_front()?;
        if q.is_empty() {
            self.nonempty &= !(1 << p);
        }
        let sz = pool.get(id).size as u64;
        self.qbytes[p] -= sz;
        self.bytes -= sz;
        Some(id)
    }

    pub fn enqueue(&mut self, id: PktId, prio: usize, size: u64) {
        let p = prio.min(self.queues.len() - 1);
        self.queues[p].push_back(id);
        self.nonempty |= 1 << p;
        self.qbytes[p] += size;
        self.bytes += size;
    }
}

/// Switch state beyond its ports.
///
/// Buffer model (that of switch ASICs and of HPCC ns-3): the buffer is a shared pool plus a
/// headroom reserved per ingress port for lossless traffic. A lossless packet goes into the shared
/// pool while it has room, else into its ingress port's headroom, else it is dropped (a
/// misconfiguration: the headroom was too small). Lossy packets use the shared pool only. Control
/// packets (ACK/NAK/CNP) are never dropped for lack of buffer.
pub struct Switch {
    pub node: u32,
    /// Size of the shared pool (buffer minus all headroom).
    pub shared: u64,
    pub shared_used: u64,
    /// Headroom reserved and in use per ingress port (lossless priorities share it).
    pub headroom: Vec<u64>,
    pub hdrm_used: Vec<u64>,
    /// Bytes buffered per (ingress port, priority).
    pub ingress: Vec<[u64; MAX_PRIO]>,
    /// Whether we have paused the upstream of (ingress port, priority).
    pub pause_sent: Vec<[bool; MAX_PRIO]>,
    /// The dynamic XOFF threshold last computed, and the `shared_used` it was computed for: the
    /// threshold itself for that `shared_used`, a floor of it below (`above_xoff`).
    pub xoff_memo: (u64, u64),
    pub ecmp_seed: u64,
    /// Its load balancer (`switch.lb`); None: ECMP's 5-tuple hash alone.
    pub lb: Option<Box<dyn lb::LoadBalancer>>,
    pub ecn_rng: RngStream,
    /// Static routes that match source addresses too (checked first, in order).
    pub src_routes: Vec<SrcRoute>,
}

/// A static route for packets from some source addresses to some destination hosts.
pub struct SrcRoute {
    /// Source addresses (exact, alias included).
    pub src: Vec<u32>,
    /// Per destination host index: whether the route applies.
    pub dst: Vec<bool>,
    /// ECMP group (index into the world's groups).
    pub gid: u32,
}

/// Where a buffered packet's bytes are accounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    Shared,
    Headroom,
}

impl Switch {
    /// The dynamic XOFF threshold for the current `shared_used`.
    fn xoff_now(&self, cfg: &SwitchConfig) -> u64 {
        let free = self.shared.saturating_sub(self.shared_used);
        (cfg.pfc.alpha * free as f64) as u64
    }
    /// The dynamic XOFF threshold, computed once per value of `shared_used` (`xoff_memo`: the
    /// float product and its conversions cost ~28 instructions). Out of line: `above_xoff`'s
    /// floor settles nearly every hop without it (slice1ms: 45 K calls for 6 M tests).
    #[inline(never)]
    fn xoff_exact(&mut self, cfg: &SwitchConfig) -> u64 {
        if self.xoff_memo.0 != self.shared_used {
            self.xoff_memo = (self.shared_used, self.xoff_now(cfg));
        }
        self.xoff_memo.1
    }

    /// Whether an ingress queue of `bytes` is above the XOFF threshold (`bytes > xoff`).
    ///
    /// The dynamic threshold only falls as `shared_used` rises (the product and the conversion
    /// are monotonic), so the memo's value is a floor for any `shared_used` up to the one it was
    /// computed for: a queue at or below that floor is below the threshold without computing it.
    /// Queues are mostly far below it (a packet or two against megabytes), and `shared_used`
    /// moves with every buffered packet, so this spares most recomputations (slice1ms: 45 K
    /// instead of 1.6 M, -49 M instructions, -1.06%).
    #[inline(always)]
    pub fn above_xoff(&mut self, cfg: &SwitchConfig, bytes: u64) -> bool {
        if !cfg.pfc.dynamic {
            return bytes > cfg.pfc.xoff.0;
        }
        if self.shared_used <= self.xoff_memo.0 && bytes <= self.xoff_memo.1 {
            return false;
        }
        bytes > self.xoff_exact(cfg)
    }

    /// Whether an ingress queue of `bytes` is at or below the XON threshold (`bytes <= xon`),
    /// with the same floor as [`Switch::above_xoff`].
    #[inline(always)]
    pub fn below_xon(&mut self, cfg: &SwitchConfig, bytes: u64) -> bool {
        if !cfg.pfc.dynamic {
            return bytes <= cfg.pfc.xon.0;
        }
        let off = cfg.pfc.xon_offset.0;
        if self.shared_used <= self.xoff_memo.0 && bytes <= self.xoff_memo.1.saturating_sub(off) {
            return true;
        }
        bytes <= self.xoff_exact(cfg).saturating_sub(off)
    }

    /// Admission: where a packet of `size` arriving on `port` goes, or None (dropped).
    pub fn admit(&self, port: usize, size: u64, lossless: bool, control: bool) -> Option<Pool> {
        if control || self.shared_used + size <= self.shared {
            Some(Pool::Shared)
        } else if lossless && self.hdrm_used[port] + size <= self.headroom[port] {
            Some(Pool::Headroom)
        } else {
            None
        }
    }

    pub fn used(&self) -> u64 {
        self.shared_used + self.hdrm_used.iter().sum::<u64>()
    }
}

/// Headroom a lossless ingress port needs so that nothing is lost after it sends PAUSE: the
/// bytes in flight on the link both ways, plus a frame being sent at each end and the PAUSE.
pub fn auto_headroom(rate_bps: u64, delay: Time, mtu_frame: u64) -> u64 {
    let bdp = (rate_bps as u128 * delay as u128 / 8 / braid_engine::time::S as u128) as u64;
    2 * bdp + 3 * mtu_frame + 64
}

/// RED marking probability for an egress queue of `q` bytes (DCTCP-style step when kmin = kmax).
#[inline]
pub fn red_probability(q: u64, c: &EcnCurve) -> f64 {
    let (kmin, kmax) = (c.kmin.0, c.kmax.0);
    if q <= kmin {
        0.0
    } else if q > kmax || kmax == kmin {
        1.0
    } else {
        c.pmax * (q - kmin) as f64 / (kmax - kmin) as f64
    }
}

/// ECMP hash of the 5-tuple (addresses, ports, UDP), seeded per switch.
#[inline]
pub fn ecmp_hash(seed: u64, src: u32, dst: u32, sport: u16, dport: u16) -> u64 {
    use braid_engine::rng::mix64;
    let mut z = mix64(seed ^ ((src as u64) << 32 | dst as u64));
    z ^= (sport as u64) << 16 | dport as u64 | (17u64 << 40);
    mix64(z)
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_topo::units::Bytes;

    #[test]
    fn red_curve() {
        let c = EcnCurve {
            kmin: Bytes(100),
            kmax: Bytes(300),
            pmax: 0.5,
        };
        assert_eq!(red_probability(100, &c), 0.0);
        assert!((red_probability(200, &c) - 0.25).abs() < 1e-12);
        assert_eq!(red_probability(301, &c), 1.0);
        let step = EcnCurve {
            kmin: Bytes(65),
            kmax: Bytes(65),
            pmax: 1.0,
        };
        assert_eq!(red_probability(65, &step), 0.0);
        assert_eq!(red_probability(66, &step), 1.0);
    }

    #[test]
    fn ecmp_spreads_source_ports_evenly() {
        let mut counts = [0u32; 4];
        for sport in 49152..(49152 + 4000) {
            counts[(ecmp_hash(7, 1, 2, sport, 4791) % 4) as usize] += 1;
        }
        for c in counts {
            assert!((900..1100).contains(&c), "{counts:?}");
        }
    }
}
