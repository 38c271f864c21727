//! The RNIC's WQE pipeline: how fast it takes work requests off the send queues.
//!
//! Every WR the NIC executes, whatever it carries (a data WR, a zero-byte one, WAIT,
//! SEND_ENABLE, RECV_ENABLE, NOP, PeRF's 0_WAITs), is one WQE: it is fetched, parsed and
//! scheduled by the same pipeline, so each takes
//! - `nic.wqe_time` of the NIC's serial WQE processing,
//! - one slot of the NIC's message rate (`nic.max_msg_rate`, messages per second per NIC),
//! - one slot of its QP's message rate (`nic.max_qp_msg_rate`, per QP).
//!
//! The defaults are ConnectX-6's published figures (docs/scenario.md, "RNIC message rate"):
//! 107.5 Mmsg/s per port (NVIDIA's 215 Mmsg/s for the dual-port device, halved) and 12.4
//! Mmsg/s per QP (the PeRF artifact's `PERF_NIC_MSG_RATE`, "the value cited in the paper").
//! No source gives a WAIT WQE its own cost; it is charged as any WQE (a slot of each rate).
//!
//! Per WQE, never per packet: the arbiter asks once per message, when the WQE reaches its
//! QP's cursor.
//!
//! Pipelined (`nic.wqe_pipelined`, the default): the WQE engine hands a WQE to the DMA engine
//! and goes on to the QP's next one while the first one's packets are fetched and sent, so a
//! WQE's slot is spaced from the previous WQE's *start*, not from the end of its data. The
//! sources (docs/perf.md, "Does WQE processing overlap transmission?"): AMD's ERNIC RNIC
//! (PG332) documents a WQE processor engine that builds headers and programs a separate DMA
//! engine, which moves the packets; and PeRF measured its chains of 0_WAITs between 16 KiB
//! sub-WRs on ConnectX-6 as work-conserving, which a serial engine (16 slots of 80.6 ns after
//! each 1.3 µs sub-WR) could not be. A WQE the cursor reaches after the QP was held (a WAIT that
//! blocked, a managed QP not yet enabled) is processed from then: the engine cannot run ahead
//! of a WAIT or past the enable count.

use crate::nic::config::NicConfig;
use braid_engine::time::{Time, S};

/// The limits, as spacings in picoseconds (0 = none), computed once from the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WqeLimits {
    /// Serial processing per WQE, NIC-wide.
    wqe_ps: Time,
    /// Spacing between two WQE starts of the NIC (1 / max_msg_rate).
    nic_gap_ps: Time,
    /// Spacing between two WQE starts of one QP (1 / max_qp_msg_rate).
    qp_gap_ps: Time,
    /// WQE processing overlaps the previous WQE's transmission (`nic.wqe_pipelined`).
    pipelined: bool,
}

/// One QP's standing in the WQE pipeline.
#[derive(Debug, Clone, Copy, Default)]
pub struct QpWqe {
    /// The earliest start of the QP's next WQE (its message-rate ceiling).
    next_ps: Time,
    /// When the QP's last WQE started, while the engine may run on from it: `None` once the
    /// QP was held (its next WQE is processed from when the cursor reaches it).
    chain_ps: Option<Time>,
}

impl QpWqe {
    /// The QP's cursor is held (a WAIT blocks, or a managed QP's next WQE is not enabled):
    /// the engine cannot have processed what follows ahead of time.
    #[inline]
    pub fn hold(&mut self) {
        self.chain_ps = None;
    }
}

/// The NIC-wide state of the pipeline.
#[derive(Debug, Clone, Copy, Default)]
pub struct WqePipeline {
    /// When the serial WQE processing is next free.
    free_ps: Time,
    /// The earliest start of the NIC's next WQE (message-rate ceiling).
    next_ps: Time,
}

fn gap(rate: f64) -> Time {
    if rate > 0.0 {
        (S as f64 / rate).round() as Time
    } else {
        0
    }
}

impl WqeLimits {
    pub fn new(nic: &NicConfig) -> Self {
        WqeLimits {
            wqe_ps: nic.wqe_time.0,
            nic_gap_ps: gap(nic.max_msg_rate),
            qp_gap_ps: gap(nic.max_qp_msg_rate),
            pipelined: nic.wqe_pipelined,
        }
    }

    /// When a WQE that has just reached its QP's cursor may start, reserving its share of
    /// the pipeline: not before it was posted (a busy tenant CPU posts later than the event
    /// that made it post), after the NIC's previous WQE was processed, and no sooner than the
    /// NIC's and its QP's message rates allow. Serial, its processing begins now, when the
    /// cursor reaches it (after the previous WQE's data); pipelined, as soon as the QP's
    /// previous WQE started, so it may already be done (a start in the past: ready now).
    ///
    /// Out of line and cold: once per WQE, where the arbiter runs once per packet.
    #[cold]
    #[inline(never)]
    pub fn ready(&self, now: Time, post_ps: Time, nic: &mut WqePipeline, qp: &mut QpWqe) -> Time {
        let from = match qp.chain_ps {
            Some(prev) if self.pipelined => prev.max(post_ps),
            _ => now.max(post_ps),
        };
        let processed = from.max(nic.free_ps) + self.wqe_ps;
        nic.free_ps = processed;
        // The NIC's slot is taken when the NIC gets to the WQE; the QP's own ceiling may delay
        // its start beyond that, but not the NIC's next WQE of another QP (a per-QP limit
        // stalls its QP, not the engine).
        let nic_slot = processed.max(nic.next_ps);
        let t = nic_slot.max(qp.next_ps);
        if self.nic_gap_ps > 0 {
            nic.next_ps = nic_slot + self.nic_gap_ps;
        }
        if self.qp_gap_ps > 0 {
            qp.next_ps = t + self.qp_gap_ps;
        }
        qp.chain_ps = Some(t);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_engine::time::US;

    fn limits(qp: f64, nic: f64, wqe_ps: Time) -> WqeLimits {
        WqeLimits::new(&NicConfig {
            max_qp_msg_rate: qp,
            max_msg_rate: nic,
            wqe_time: braid_topo::units::Duration(wqe_ps),
            ..NicConfig::default()
        })
    }

    /// A data WQE of `data_ps` on the wire, then `waits` control WQEs the cursor reaches when
    /// the data has gone, then the next data WQE: when does that one start?
    fn next_data_start(pipelined: bool, data_ps: Time, waits: u32) -> Time {
        let l = WqeLimits {
            pipelined,
            ..limits(12.4e6, 0.0, 0)
        };
        let (mut nic, mut qp) = (WqePipeline::default(), QpWqe::default());
        let start = l.ready(0, 0, &mut nic, &mut qp);
        let mut now = start + data_ps;
        for _ in 0..waits {
            now = now.max(l.ready(now, 0, &mut nic, &mut qp));
        }
        // It goes when it is ready and the data before it has gone.
        now.max(l.ready(now, 0, &mut nic, &mut qp))
    }

    #[test]
    fn a_pipelined_engine_spaces_wqes_from_the_previous_start() {
        let g = gap(12.4e6);
        // PeRF's sub-WR: 16 KiB at 100 Gbit/s is ~1.31 µs on the wire, then 16 0_WAITs.
        let data = 1_310_720;
        // Serial: the 16 WAITs' slots follow the data, and the next sub-WR one more slot later.
        assert_eq!(next_data_start(false, data, 16), data + 16 * g);
        // Pipelined: 17 slots from the first sub-WR's start, hidden behind its data (17 x 80.6
        // ns = 1.371 µs against 1.311 µs): the next sub-WR waits only the difference.
        assert_eq!(next_data_start(true, data, 16), (17 * g).max(data));
        // Without WAITs the next WQE was processed during the data: it goes when the data ends.
        assert_eq!(next_data_start(true, data, 0), data);
        assert_eq!(next_data_start(false, data, 0), data);
    }

    #[test]
    fn a_qps_own_ceiling_does_not_hold_back_the_other_qps() {
        // QP a's second WQE waits for a's 80.6 ns spacing; QP b's WQE, posted at the same time,
        // takes the NIC's next slot (9.3 ns later), not one after a's delayed start.
        let l = limits(12.4e6, 107.5e6, 0);
        let mut nic = WqePipeline::default();
        let (mut a, mut b) = (QpWqe::default(), QpWqe::default());
        assert_eq!(l.ready(0, 0, &mut nic, &mut a), 0);
        assert_eq!(l.ready(0, 0, &mut nic, &mut a), gap(12.4e6));
        assert_eq!(l.ready(0, 0, &mut nic, &mut b), 2 * gap(107.5e6));
    }

    #[test]
    fn a_held_qp_processes_its_next_wqe_from_the_release() {
        let l = limits(12.4e6, 0.0, 0);
        let (mut nic, mut qp) = (WqePipeline::default(), QpWqe::default());
        assert_eq!(l.ready(0, 0, &mut nic, &mut qp), 0);
        // A WAIT blocked until 10 µs: the next WQE cannot have been processed before.
        qp.hold();
        assert_eq!(l.ready(10 * US, 0, &mut nic, &mut qp), 10 * US);
        // Not held: processed while the previous one ran (its slot is one gap after it).
        assert_eq!(
            l.ready(20 * US, 0, &mut nic, &mut qp),
            10 * US + gap(12.4e6)
        );
    }

    #[test]
    fn back_to_back_wqes_of_one_qp_start_one_qp_gap_apart() {
        let l = limits(12.4e6, 0.0, 0);
        let (mut nic, mut qp) = (WqePipeline::default(), QpWqe::default());
        let starts: Vec<Time> = (0..1000)
            .map(|_| l.ready(0, 0, &mut nic, &mut qp))
            .collect();
        // 1000 WQEs in 999 gaps of 1 / 12.4 MHz.
        let rate = 999.0 / (starts[999] - starts[0]) as f64 * S as f64;
        assert!((rate - 12.4e6).abs() / 12.4e6 < 1e-3, "{rate}");
    }

    #[test]
    fn qps_share_the_nic_ceiling_and_keep_their_own() {
        // Four QPs at 10 M each under a 25 M NIC: the NIC's ceiling decides.
        let l = limits(10e6, 25e6, 0);
        let mut nic = WqePipeline::default();
        let mut qps = [QpWqe::default(); 4];
        let mut last = 0;
        for _ in 0..250 {
            for q in &mut qps {
                last = l.ready(0, 0, &mut nic, q);
            }
        }
        let rate = 999.0 / last as f64 * S as f64;
        assert!((rate - 25e6).abs() / 25e6 < 1e-2, "{rate}");
        // Two QPs under the same NIC: 2 x 10 M, below 25 M.
        let mut nic = WqePipeline::default();
        let mut qps = [QpWqe::default(); 2];
        for _ in 0..500 {
            for q in &mut qps {
                last = l.ready(0, 0, &mut nic, q);
            }
        }
        let rate = 999.0 / last as f64 * S as f64;
        assert!((rate - 20e6).abs() / 20e6 < 1e-2, "{rate}");
    }

    #[test]
    fn wqe_time_is_serial_and_a_wqe_never_starts_before_it_is_posted() {
        let l = limits(0.0, 0.0, US);
        let mut nic = WqePipeline::default();
        let (mut a, mut b) = (QpWqe::default(), QpWqe::default());
        assert_eq!(l.ready(0, 0, &mut nic, &mut a), US);
        assert_eq!(l.ready(0, 0, &mut nic, &mut b), 2 * US);
        assert_eq!(l.ready(0, 10 * US, &mut nic, &mut a), 11 * US);
        // Unlimited: nothing waits.
        let free = limits(0.0, 0.0, 0);
        let mut fresh = QpWqe::default();
        assert_eq!(free.ready(5, 0, &mut WqePipeline::default(), &mut fresh), 5);
    }
}
