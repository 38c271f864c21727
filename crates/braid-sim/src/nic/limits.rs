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

use crate::config::NicConfig;
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
        }
    }

    /// When a WQE that has just reached its QP's cursor may start, reserving its share of
    /// the pipeline: not before it was posted (a busy tenant CPU posts later than the event
    /// that made it post), after the NIC's previous WQE was processed, and no sooner than the
    /// NIC's and its QP's message rates allow. `qp_next_ps` is the QP's own earliest start.
    ///
    /// Out of line and cold: once per WQE, where the arbiter runs once per packet.
    #[cold]
    #[inline(never)]
    pub fn ready(
        &self,
        now: Time,
        post_ps: Time,
        nic: &mut WqePipeline,
        qp_next_ps: &mut Time,
    ) -> Time {
        let processed = now.max(nic.free_ps).max(post_ps) + self.wqe_ps;
        nic.free_ps = processed;
        let t = processed.max(nic.next_ps).max(*qp_next_ps);
        if self.nic_gap_ps > 0 {
            nic.next_ps = t + self.nic_gap_ps;
        }
        if self.qp_gap_ps > 0 {
            *qp_next_ps = t + self.qp_gap_ps;
        }
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

    #[test]
    fn back_to_back_wqes_of_one_qp_start_one_qp_gap_apart() {
        let l = limits(12.4e6, 0.0, 0);
        let (mut nic, mut qp) = (WqePipeline::default(), 0);
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
        let mut qps = [0; 4];
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
        let mut qps = [0; 2];
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
        let (mut a, mut b) = (0, 0);
        assert_eq!(l.ready(0, 0, &mut nic, &mut a), US);
        assert_eq!(l.ready(0, 0, &mut nic, &mut b), 2 * US);
        assert_eq!(l.ready(0, 10 * US, &mut nic, &mut a), 11 * US);
        // Unlimited: nothing waits.
        let free = limits(0.0, 0.0, 0);
        assert_eq!(free.ready(5, 0, &mut WqePipeline::default(), &mut a), 5);
    }
}
