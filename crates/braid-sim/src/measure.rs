//! Measurements: per-message records, the flow log the applications write, and sampled time
//! series of per-flow goodput and of queue lengths.

use crate::api::ConfigError;
use crate::nic::MsgRecord;
use crate::trace::ports::QueueSpec;
use braid_engine::Time;
use braid_topo::units::Duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// One flow (a traffic-pattern transfer, or one perftest application's whole run).
#[derive(Debug, Clone)]
pub struct FlowRecord {
    pub id: u32,
    pub kind: &'static str,
    /// Host indices.
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub start_ps: Time,
    pub finish_ps: Option<Time>,
    /// The sending QP (node id, qpn), filled in when the application creates it.
    pub src_qp: Option<(u32, u32)>,
    /// The destination port a traffic flow was given (`dport`, HPCC's flow-file field, read back
    /// by `braid export --format hpcc`); packets carry RoCEv2's 4791 regardless. 0 for an
    /// application, which has none.
    pub dport: u16,
    /// Where the flow's bytes land (node id, address), for data checking.
    pub dst_addr: Option<(u32, u64)>,
    /// Bytes completed so far (perftest apps grow this as they go).
    pub bytes_done: u64,
    /// Round-trip samples (write_lat, send_lat), picoseconds.
    pub latencies: Vec<Time>,
    /// Bytes per message (perftest applications; 0 for traffic flows).
    pub msg_bytes: u64,
    /// An attacker's count of what it tried and what was refused.
    pub attack: Option<braid_apps::attack::Tally>,
}

/// Shared between the applications (which write it) and the run (which reads it).
#[derive(Default)]
pub struct FlowLog {
    pub flows: Vec<FlowRecord>,
    pub unfinished: usize,
    /// (host index, qpn) of the data-receiving QP -> flow id, for goodput series.
    pub rx_qp_flow: HashMap<(u32, u32), u32>,
}

pub type SharedLog = Rc<RefCell<FlowLog>>;

/// The applications report to the flow log.
impl braid_apps::Meter for FlowLog {
    fn sending_qp(&mut self, flow: u32, host: u32, qp: u32) {
        self.flows[flow as usize].src_qp = Some((host, qp));
    }
    fn receiving_qp(&mut self, flow: u32, host: u32, qp: u32) {
        self.rx_qp_flow.insert((host, qp), flow);
    }
    fn landing_at(&mut self, flow: u32, host: u32, addr: u64) {
        self.flows[flow as usize].dst_addr = Some((host, addr));
    }
    fn started(&mut self, flow: u32, at: Time) {
        self.flows[flow as usize].start_ps = at;
    }
    fn progress(&mut self, flow: u32, bytes: u64) {
        self.flows[flow as usize].bytes_done += bytes;
    }
    fn latency(&mut self, flow: u32, ps: Time) {
        self.flows[flow as usize].latencies.push(ps);
    }
    fn finished(&mut self, flow: u32, at: Time) {
        self.finish(flow, at);
    }
    fn attack(&mut self, flow: u32, tally: braid_apps::attack::Tally) {
        self.flows[flow as usize].attack = Some(tally);
    }
}

/// The flow record a perftest application starts with.
pub fn perf_record(app: &crate::app_build::AppEntry, src: u32, dst: u32) -> FlowRecord {
    let kind = app.kind();
    let c = app.spec.common();
    FlowRecord {
        id: 0,
        kind: kind.name(),
        src,
        dst,
        size: c.iterations.map(|n| n * c.size * c.qps as u64).unwrap_or(0),
        start_ps: c.start,
        finish_ps: None,
        src_qp: None,
        dport: 0,
        dst_addr: None,
        bytes_done: 0,
        latencies: vec![],
        msg_bytes: if kind.is_attacker() { 0 } else { c.size },
        attack: None,
    }
}

impl FlowLog {
    pub fn add(&mut self, mut r: FlowRecord) -> u32 {
        r.id = self.flows.len() as u32;
        self.unfinished += 1;
        self.flows.push(r);
        self.flows.len() as u32 - 1
    }
    pub fn finish(&mut self, id: u32, at: Time) {
        let f = &mut self.flows[id as usize];
        if f.finish_ps.is_none() {
            f.finish_ps = Some(at);
            self.unfinished -= 1;
        }
    }
}

pub struct Measure {
    pub interval: Time,
    pub stopped: bool,
    pub record_messages: bool,
    pub messages: Vec<(u32, MsgRecord)>,
    pub queue_ports: Vec<(u32, u16)>,
    pub queue_names: Vec<String>,
    last_rx: HashMap<(u32, u32), u64>,
    last_sample: Time,
    /// time, host, qpn, bytes in the interval, interval length
    pub tput: Vec<(Time, u32, u32, u64, Time)>,
    /// time, queue index, bytes
    pub queues: Vec<(Time, u32, u64)>,
    pub link_changes: Vec<(Time, u32, bool)>,
    pub cq_events: u64,
    /// Record every PFC frame (`measure.pfc`).
    pub record_pfc: bool,
    /// PFC frames: time, node, port, priority, pause (else resume), received (else sent).
    pub pfc: Vec<PfcRecord>,
    /// `measure.cc`: the congestion controllers' sampled state.
    pub cc: Option<Box<crate::trace::cc::CcSampler>>,
    /// `measure.pcap`: the packet capture.
    pub pcap: Option<Box<crate::trace::pcap::PcapTracer>>,
}

/// One PFC frame at one port: sent by `node` out of `port`, or received by `node` on `port`
/// (which then stops or resumes sending that priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcRecord {
    pub time: Time,
    pub node: u32,
    pub port: u16,
    pub prio: u8,
    pub pause: bool,
    pub received: bool,
}

impl Measure {
    pub fn new(interval: Time, record_messages: bool) -> Self {
        Measure {
            interval,
            stopped: false,
            record_messages,
            messages: Vec::new(),
            queue_ports: Vec::new(),
            queue_names: Vec::new(),
            last_rx: HashMap::new(),
            last_sample: 0,
            tput: Vec::new(),
            queues: Vec::new(),
            link_changes: Vec::new(),
            cq_events: 0,
            record_pfc: true,
            pfc: Vec::new(),
            cc: None,
            pcap: None,
        }
    }

    /// The next sampling time after `now`: the next multiple of `interval` or of the
    /// congestion-control sampler's interval, whichever comes first (None: nothing is sampled).
    pub fn next_sample(&self, now: Time) -> Option<Time> {
        let next = |iv: Time| (iv > 0).then(|| (now / iv + 1) * iv);
        match (
            next(self.interval),
            self.cc.as_ref().and_then(|c| next(c.interval)),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn message(&mut self, host: u32, m: MsgRecord) {
        if self.record_messages {
            self.messages.push((host, m));
        }
    }

    pub fn pfc_frame(&mut self, r: PfcRecord) {
        if self.record_pfc {
            self.pfc.push(r);
        }
    }

    pub fn note_cq(&mut self, _host: u32, _cq: u32) {
        self.cq_events += 1;
    }

    pub fn link_change(&mut self, now: Time, link: u32, up: bool) {
        self.link_changes.push((now, link, up));
    }

    /// When the series was last sampled.
    pub fn last_sample(&self) -> Time {
        self.last_sample
    }

    /// Cumulative received bytes per (host, qpn): records the increase since the last sample.
    pub fn sample_rx(&mut self, now: Time, rx: &[(u32, u32, u64)]) {
        let dt = now - self.last_sample;
        self.last_sample = now;
        if dt == 0 {
            return;
        }
        for &(h, q, bytes) in rx {
            let prev = self.last_rx.insert((h, q), bytes).unwrap_or(0);
            if bytes > prev {
                self.tput.push((now, h, q, bytes - prev, dt));
            }
        }
    }

    pub fn sample_queues(&mut self, now: Time, q: &[(usize, u64)]) {
        for &(i, b) in q {
            self.queues.push((now, i as u32, b));
        }
    }
}

/// `[measure]`: what a run records besides its summary tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MeasureConfig {
    /// Sampling period of throughput and queue time series (0 = no time series).
    pub interval: Duration,
    /// Ports whose egress queue length is sampled: "node:port", "all-fabric", or
    /// `{ node = "tor0", peer = "spine1" }` (the ports of `node` that face `peer`).
    pub queues: Vec<QueueSpec>,
    /// Record one row per message (can be large).
    pub messages: bool,
    /// Record every PFC PAUSE/RESUME frame a port sends or receives (`pfc.parquet`).
    pub pfc: bool,
    /// The transports' summed counters (`mp_rdma_*`) and pooled out-of-order-degree percentiles
    /// in the run counters count from this time on (0 = the whole run): a steady-state figure
    /// without the start-up. The per-QP `transport` table stays whole-run.
    pub transport_from: Duration,
    /// The congestion controllers' state of chosen QPs over time (`cc.parquet`).
    pub cc: crate::trace::cc::CcConfig,
    /// Packet traces of chosen flows and ports (`trace.pcap`).
    pub pcap: crate::trace::pcap::PcapConfig,
}

impl Default for MeasureConfig {
    fn default() -> Self {
        Self {
            interval: Duration(10_000_000),
            queues: vec![],
            messages: true,
            pfc: true,
            transport_from: Duration(0),
            cc: Default::default(),
            pcap: Default::default(),
        }
    }
}

impl MeasureConfig {
    /// The checks `[measure]` can make before the world exists (keys relative to it); the
    /// ports and flows it names are checked against the built run.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.cc.validate().map_err(|e| e.nested("cc"))?;
        self.pcap.validate().map_err(|e| e.nested("pcap"))
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;

    /// The table's own checks, named under `[measure]` (its sub-tables' keys included).
    #[test]
    fn measure_checks_its_sub_tables() {
        assert_eq!(MeasureConfig::default().validate(), Ok(()));
        let mut m = MeasureConfig::default();
        m.pcap.snaplen = 10;
        assert_eq!(m.validate().unwrap_err().key, "pcap.snaplen");
        let mut m = MeasureConfig::default();
        m.cc.max_qps = 0;
        assert_eq!(
            m.validate().unwrap_err().under("measure").path,
            "measure.cc.max_qps"
        );
    }
}
