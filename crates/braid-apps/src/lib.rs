//! Applications, written against the verbs seam only (they run unchanged over any stack and over
//! any NIC, simulated or real): flow senders and sinks for traffic patterns, and perftest-like
//! benchmarks (`write_bw`, `write_lat`, `send_bw`, `read_bw`). What they measure goes to a
//! [`Meter`], which the simulator implements with its flow log and a real-NIC runner with its own.
//!
//! Each `[[apps]]` kind's config is its factory ([`kinds`]): declared and checked in the kind's
//! file, read from the entry's keys (the tagged [`AppSpec`]), it builds the kind's two ends; a runner (the simulator,
//! `braid-perftest`) provides their places and seeded random streams.
//!
//! Connection setup happens out of band, as with rdma_cm: each side creates its QPs when it
//! starts and publishes them on a board (`braid_verbs::rendezvous`); one timer tick later (after
//! every application has started) both sides connect.

use braid_verbs::rendezvous::{connect_all, Endpoint, SharedBoard, Side};
use braid_verbs::*;

pub mod attack;
pub mod kinds;
pub mod kv;
pub mod redis;
pub mod rpc;
pub mod spec;
pub use kinds::{
    AppEnds, AppFactory, AppKind, AppMode, AppPair, AppSpec, Draw, Draws, KeyError, SharedDraws,
    SplitMixDraws,
};
pub use kv::{KvClient, KvDraw};
pub use rpc::{Op, Req, ReqDraw, RpcClient, RpcServer, RpcSpec, RpcStats, Wire};
pub use spec::{AppCommon, KindConfig};

/// Connects `qps` (connections `conn0 + i`, client side) to their servers; returns the servers'
/// endpoints.
pub(crate) fn lookup_all(
    v: &mut dyn Verbs,
    rdv: &Rendezvous,
    conn0: u32,
    qps: &[QpNum],
) -> Vec<Endpoint> {
    connect_all(v, rdv, conn0 as u64, Side::Client, qps).expect("connect")
}

/// Where applications report what they measure, by flow (a traffic transfer, or one perftest
/// application's run).
pub trait Meter {
    /// The QP that sends a flow's data.
    fn sending_qp(&mut self, flow: u32, host: u32, qp: QpNum);
    /// A QP that receives a flow's data (for goodput series and conservation checks).
    fn receiving_qp(&mut self, flow: u32, host: u32, qp: QpNum);
    /// Where a flow's bytes land (for data checks).
    fn landing_at(&mut self, flow: u32, host: u32, addr: u64);
    /// The measurement starts (connections up).
    fn started(&mut self, flow: u32, at: u64);
    /// More bytes of the flow completed.
    fn progress(&mut self, flow: u32, bytes: u64);
    /// A round-trip sample, picoseconds.
    fn latency(&mut self, flow: u32, ps: u64);
    fn finished(&mut self, flow: u32, at: u64);
    /// One message of a bandwidth test completed: when it was posted and when its (possibly
    /// shared, `cq_mod`) completion arrived, picoseconds (perftest's peak bandwidth).
    fn message(&mut self, _flow: u32, _posted: u64, _completed: u64) {}
    /// An attacker's (`attack`) final count of what it tried and what was refused.
    fn attack(&mut self, _flow: u32, _tally: attack::Tally) {}
}

/// A meter shared by a run's applications.
pub type SharedMeter = std::rc::Rc<std::cell::RefCell<dyn Meter>>;

/// Decides which messages carry the synchronise flag (`SendWr::fence`); None: none.
pub type SyncDraw = Box<dyn FnMut() -> bool>;

/// The board a run's applications exchange endpoints on.
pub type Rendezvous = SharedBoard;

/// Timer token for "every application has started: connect now".
pub(crate) const CONNECT: u64 = (1 << 56) - 1;

fn lookup(rdv: &Rendezvous, conn: u32, side: Side) -> Endpoint {
    rdv.borrow()
        .lookup(conn as u64, side)
        .expect("both sides publish before connecting")
}

/// Fills a buffer with a pattern unique to (flow, offset), for data checking.
pub fn pattern(flow: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u32).wrapping_mul(31) ^ flow.wrapping_mul(0x9E37) ^ (i as u32 >> 8)) as u8)
        .collect()
}

pub(crate) fn sges(addr: u64, len: u64, lkey: u32) -> Vec<Sge> {
    // SGE lengths are 32-bit: split large buffers.
    let mut v = Vec::new();
    let mut off = 0;
    while off < len || v.is_empty() {
        let l = (len - off).min(1 << 30);
        v.push(Sge {
            addr: addr + off,
            length: l as u32,
            lkey,
        });
        off += l;
        if l == 0 {
            break;
        }
    }
    v
}

mod client;
mod flow;
mod perf;
pub(crate) use client::Client;
pub use flow::{FlowSender, FlowSink, QpPlan, SendFlow};
pub use perf::{peak_bandwidth, PerfApp, PerfClient, PerfKind, PerfServer, PerfSpec};

#[cfg(test)]
pub(crate) mod tests;
