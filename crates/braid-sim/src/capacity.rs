//! What a scenario will cost, estimated from its parameters before anything is built or drawn:
//! `braid validate` prints it, and the front refuses a scenario whose memory exceeds the budget
//! (`BRAID_MEMORY_LIMIT`, else the memory available) with one line naming the key that drives
//! the cost. Each topology kind tells its size (`TopologyKind::size`) and each traffic pattern
//! its volume (`TrafficPattern::volume`: a Poisson table's expected flows from its load, the
//! host rate, its duration and its size distribution's mean); this file prices them.
//!
//! The prices are this simulator's, measured (upper-bound-ish):
//! * a node (host or switch, its ports, NIC and tables) about 9 KB; routes one ECMP group per
//!   (switch, edge switch) (4 B) and one 12 B record per host (`world/table.rs`); measured: the
//!   k = 48 fat-tree's tables 13.6 MB, its build 280 MB (docs/performance.md);
//! * a QP about 2.2 KB once running (measured with 20,000 and 100,000 QPs of one write_bw);
//! * a generated flow two QPs (every flow's sink QP is created with the run, its sender QP when
//!   the flow starts, `lazy_flows.rs`, and neither is freed: every flow started is held at once)
//!   and its record, less the send queue's buffer that a finished flow's sender QP gives back
//!   (room for four 168 B WQEs, measured with heaptrack: 4.59 MB over 6,829 flows;
//!   `nic/build.rs`); a flow that starts after the run's end only its sink QP, its record and
//!   its start timer (when its senders are lazy; the share of flows started is taken as
//!   duration / last start, an upper bound for arrivals that begin after time 0); with
//!   `nic.data_check` its bytes twice (sent, landed);
//! * a time-series sample (a row of `throughput` or `queues`) about 64 B through the run and its
//!   results: intervals × series alive at once (at most the flows, taken as at most 4 per host,
//!   plus the applications and the sampled ports);
//! * a congestion-control sample (`measure.cc`) about 400 B at its peak;
//! * a captured frame min(`snaplen`, `nic.mtu` + 80) + 16 bytes, held three times at the end
//!   (the core's buffer, the file it assembles, the front's copy): `max_packets` at most.
//!
//! The results folder (`outputs`, what the front checks the output file system holds before a
//! run) is priced per row of its Parquet files as polars writes them, measured (see
//! docs/performance.md, "The outputs estimate"): a flow row, a message row (one per traffic
//! flow; an application's `iterations` × `qps`, or as many of its `size` as its host's line rate
//! carries over its duration when it runs for a time), a time-series row, a congestion-control
//! row, a captured frame once, and the folder's fixed files (summary, the other tables' headers).

use crate::api::ScenarioError;
use crate::config::QueueSpec;
use crate::scenario::Scenario;
use crate::trace::cc::CcQps;
use braid_topo::units::Bytes;
use std::path::Path;

const BYTES_PER_NODE: f64 = 9_000.0;
/// One ECMP group id per (switch, edge switch).
const BYTES_PER_ROUTE: f64 = 4.0;
/// A host's edge switch and port.
const BYTES_PER_HOST_ROUTE: f64 = 12.0;
const BYTES_PER_QP: f64 = 2_200.0;
const BYTES_PER_FLOW_RECORD: f64 = 200.0;
/// What a generated flow's sender QP holds no more once its one WRITE is done: its send queue's
/// buffer (module doc). Most of a run's flows are finished at its peak.
const SEND_QUEUE_RETURNED: f64 = 672.0;
/// What a lazy sender keeps of a flow that has not started: its entry (`SendFlow`, 40 B) and
/// its start timer in the event queue (32 B).
const BYTES_PER_UNSTARTED_FLOW: f64 = 72.0;
const BYTES_PER_SAMPLE: f64 = 64.0;
const BYTES_PER_CC_SAMPLE: f64 = 400.0;
/// The front (interpreter, polars, numpy) and the core before any scenario: the peak RSS of
/// `braid run` on a one-flow k = 4 fat-tree, 100.0 MB (twice; docs/performance.md, "The memory
/// estimate against peak RSS"). It was 50 MB in cost.py, from an older front.
const BASE_BYTES: f64 = 100_000_000.0;
/// Results-folder bytes per row, upper-bound-ish (measured; module doc).
const OUT_PER_FLOW: f64 = 64.0;
const OUT_PER_MESSAGE: f64 = 40.0;
const OUT_PER_SAMPLE: f64 = 16.0;
const OUT_PER_CC_SAMPLE: f64 = 48.0;
/// summary.json and the headers of the tables a run always writes, empty or not.
const OUT_BASE: f64 = 100_000.0;

/// One key's share of the memory, and what it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub key: String,
    pub bytes: f64,
    pub what: String,
}

/// The estimate. Counts are f64: a Poisson table's flows are an expectation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Estimate {
    pub hosts: f64,
    pub switches: f64,
    pub qps: f64,
    pub flows: f64,
    pub samples: f64,
    /// Bytes, the base included.
    pub memory: f64,
    /// Bytes the results folder will take (its Parquet files, summary and packet trace).
    pub outputs: f64,
    /// By the key that causes them, in scenario order (for naming the culprit).
    pub parts: Vec<Part>,
    /// What will not run as the scenario seems to mean it (one line each, key first).
    pub warnings: Vec<String>,
}

impl Estimate {
    fn add(&mut self, key: impl Into<String>, bytes: f64, what: String) {
        let key = key.into();
        self.memory += bytes;
        match self.parts.iter_mut().find(|p| p.key == key) {
            Some(p) => p.bytes += bytes,
            None => self.parts.push(Part { key, bytes, what }),
        }
    }

    /// `36 nodes, 138,404 QPs, 69,202 flows, 0 time-series samples, ~369 MB of memory, ~5.1 MB
    /// of results`.
    pub fn line(&self) -> String {
        format!(
            "{} nodes, {} QPs, {} flows, {} time-series samples, ~{} of memory, ~{} of results",
            count(self.hosts + self.switches),
            count(self.qps),
            count(self.flows),
            count(self.samples),
            fmt_bytes(self.memory),
            fmt_bytes(self.outputs)
        )
    }

    /// The part that costs most.
    pub fn costliest(&self) -> Option<&Part> {
        self.parts.iter().max_by(|a, b| a.bytes.total_cmp(&b.bytes))
    }

    /// Refuses the estimate if it exceeds `budget` bytes (`source` says where the figure comes
    /// from), naming the costliest key and what would lower it.
    pub fn check(&self, budget: f64, source: &str) -> Result<(), ScenarioError> {
        if self.memory <= budget {
            return Ok(());
        }
        let Some(p) = self.costliest() else {
            return Ok(());
        };
        Err(ScenarioError {
            path: p.key.clone(),
            message: format!(
                "the run would need ~{} of memory ({}: ~{}), more than the {} {source}; {}",
                fmt_bytes(self.memory),
                p.what,
                fmt_bytes(p.bytes),
                fmt_bytes(budget),
                advice(&p.key)
            ),
        })
    }
}

fn advice(key: &str) -> &'static str {
    match key {
        "measure.interval" => "use a longer interval (e.g. \"10us\") or a shorter duration",
        "measure.cc.interval" => "sample fewer QPs, less often, or over a shorter duration",
        "measure.pcap.max_packets" => {
            "keep fewer frames (max_packets) or fewer bytes of each (snaplen)"
        }
        "topology.k" => "use a smaller k",
        "topology.nodes" => "use fewer nodes",
        "topology.file" => "use a smaller topology file",
        "topology" => "use a smaller topology",
        k if k.ends_with(".qps") => "use fewer QPs",
        _ => "use fewer flows (for Poisson traffic: a lower load or a shorter duration)",
    }
}

/// A count as the estimate prints it: `69,202`, or `3.5e+10` past a billion.
fn count(n: f64) -> String {
    if n >= 1e9 {
        return format!("{n:.2e}");
    }
    let s = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes to three significant digits in decimal units, trailing zeros dropped (`409 MB`,
/// `50.3 MB`, `2 GB`).
pub fn fmt_bytes(n: f64) -> String {
    for (unit, scale) in [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)] {
        if n >= scale {
            let v = n / scale;
            let digits = if v >= 100.0 {
                0
            } else if v >= 10.0 {
                1
            } else {
                2
            };
            let s = format!("{v:.digits$}");
            let s = if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.')
            } else {
                &s
            };
            return format!("{s} {unit}");
        }
    }
    format!("{n:.0} B")
}

/// The estimate of a parsed scenario. A table whose size or volume cannot be told (a bad file,
/// a bad value) counts nothing here: the build reports that error in its own order.
pub fn estimate(sc: &Scenario, base_dir: &Path) -> Estimate {
    let mut e = Estimate::default();
    let Ok(t) = sc.topology.size(base_dir) else {
        e.memory = BASE_BYTES;
        e.outputs = OUT_BASE;
        return e;
    };
    let (hosts, switches) = (t.hosts as f64, t.switches as f64);
    e.hosts = hosts;
    e.switches = switches;
    let routes = switches * t.edge_switches as f64 * BYTES_PER_ROUTE + hosts * BYTES_PER_HOST_ROUTE;
    let key = match sc.topology.size_key() {
        "" => "topology".to_string(),
        k => format!("topology.{k}"),
    };
    e.add(
        key,
        (hosts + switches) * BYTES_PER_NODE + routes,
        format!("{} hosts and {} switches", count(hosts), count(switches)),
    );
    let duration = sc.duration.0;
    for (i, tr) in sc.traffic.iter().enumerate() {
        let Ok(v) = tr.spec.volume(t.hosts as u32, t.host_rate_bps, base_dir) else {
            continue;
        };
        e.flows += v.flows;
        // Flows whose sender QP is never created: those starting after the run's end, when
        // its senders create QPs lazily.
        let unstarted = match v.last_start_ps {
            Some(last) if last > duration && crate::lazy_flows::lazy_table(sc, i) => {
                v.flows * (1.0 - duration as f64 / last as f64)
            }
            _ => 0.0,
        };
        e.qps += 2.0 * v.flows - unstarted;
        let data = if sc.nic.data_check {
            2.0 * v.bytes
        } else {
            0.0
        };
        e.add(
            format!("traffic[{i}]"),
            v.flows * (2.0 * BYTES_PER_QP - SEND_QUEUE_RETURNED + BYTES_PER_FLOW_RECORD)
                - unstarted * (BYTES_PER_QP - SEND_QUEUE_RETURNED - BYTES_PER_UNSTARTED_FLOW)
                + data,
            format!("{} flows", count(v.flows)),
        );
        if let Some(last) = v.last_start_ps.filter(|&l| l > duration) {
            e.warnings.push(format!(
                "traffic[{i}]: flows start until {}, past the run's duration ({}): those starting after it never run",
                braid_topo::Duration(last),
                sc.duration
            ));
        }
    }
    let mut series = e.flows.min(4.0 * hosts.max(1.0));
    // One message per traffic flow; the applications' are added below.
    let mut messages = e.flows;
    for (i, a) in sc.apps.iter().enumerate() {
        if !a.enabled {
            continue;
        }
        let c = a.spec.common();
        messages += match c.iterations {
            Some(n) => n as f64 * c.qps.max(1) as f64,
            None => {
                let secs = c.duration.unwrap_or(duration).min(duration) as f64 / 1e12;
                secs * t.host_rate_bps as f64 / (8.0 * c.size.max(1) as f64)
            }
        };
        let q = c.qps.max(1) as f64;
        e.qps += 2.0 * q;
        e.flows += 1.0;
        series += 1.0;
        e.add(
            format!("apps[{i}].qps"),
            2.0 * q * BYTES_PER_QP,
            format!("{} QPs", count(2.0 * q)),
        );
    }
    let m = &sc.measure;
    for q in &m.queues {
        series += match q {
            QueueSpec::Name(n) if n == "all-fabric" => t.fabric_ports as f64,
            _ => 1.0,
        };
    }
    let interval = m.interval.0;
    let intervals = if interval > 0 {
        duration as f64 / interval as f64
    } else {
        0.0
    };
    e.samples = intervals * series;
    e.add(
        "measure.interval",
        e.samples * BYTES_PER_SAMPLE,
        format!(
            "{} time-series samples ({} intervals of {} over duration {})",
            count(e.samples),
            count(intervals),
            m.interval,
            sc.duration
        ),
    );
    let n_cc = match &m.cc.qps {
        CcQps::All(_) => m.cc.max_qps as f64,
        CcQps::List(l) => l.len() as f64,
    };
    if n_cc > 0.0 {
        let cc_iv = m.cc.interval.unwrap_or(m.interval).0;
        let rows = if cc_iv > 0 {
            n_cc * duration as f64 / cc_iv as f64
        } else {
            0.0
        };
        e.samples += rows;
        e.outputs += rows * OUT_PER_CC_SAMPLE;
        e.add(
            "measure.cc.interval",
            rows * BYTES_PER_CC_SAMPLE,
            format!(
                "{} congestion-control samples ({} QPs)",
                count(rows),
                count(n_cc)
            ),
        );
    }
    let messages = if m.messages { messages } else { 0.0 };
    e.outputs = OUT_BASE
        + e.flows * OUT_PER_FLOW
        + messages * OUT_PER_MESSAGE
        + intervals * series * OUT_PER_SAMPLE;
    let p = &m.pcap;
    if !p.flows.is_empty() || !p.ports.is_empty() {
        let snap = (p.snaplen as f64).min(sc.nic.mtu as f64 + 80.0);
        e.outputs += p.max_packets as f64 * (snap + 16.0);
        e.add(
            "measure.pcap.max_packets",
            3.0 * p.max_packets as f64 * (snap + 16.0),
            format!(
                "a packet trace of up to {} frames of {snap} bytes",
                count(p.max_packets as f64)
            ),
        );
    }
    e.memory += BASE_BYTES;
    e
}

/// The memory a run may take, bytes, and where the figure comes from: `BRAID_MEMORY_LIMIT`
/// (a size such as "8GB") when set, else `MemAvailable` from /proc/meminfo; None when neither
/// is known.
pub fn memory_budget() -> Result<Option<(f64, &'static str)>, ScenarioError> {
    if let Ok(v) = std::env::var("BRAID_MEMORY_LIMIT") {
        if !v.is_empty() {
            return match v.parse::<Bytes>() {
                Ok(b) if b.0 > 0 => Ok(Some((b.0 as f64, "BRAID_MEMORY_LIMIT"))),
                _ => Err(ScenarioError {
                    path: "BRAID_MEMORY_LIMIT".into(),
                    message: format!("expected a size like \"8GB\", got {v:?}"),
                }),
            };
        }
    }
    let Ok(info) = std::fs::read_to_string("/proc/meminfo") else {
        return Ok(None);
    };
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| (kb as f64 * 1024.0, "available on this machine")))
}

/// Parses a scenario (JSON), estimates it and refuses it if it exceeds the memory budget:
/// what the front calls before building anything.
pub fn check_json(json: &str, base_dir: &Path) -> Result<Estimate, ScenarioError> {
    let sc = Scenario::from_json(json)?;
    let e = estimate(&sc, base_dir);
    if let Some((budget, source)) = memory_budget()? {
        e.check(budget, source)
            .map_err(|e| crate::scenario::wording::in_document(json, e))?;
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_sizes_print_as_a_reader_expects() {
        assert_eq!(count(69_202.4), "69,202");
        assert_eq!(count(999.0), "999");
        assert_eq!(count(1_000.0), "1,000");
        assert_eq!(fmt_bytes(409_000_000.0), "409 MB");
        assert_eq!(fmt_bytes(50_300_000.0), "50.3 MB");
        assert_eq!(fmt_bytes(2_000_000_000.0), "2 GB");
        assert_eq!(fmt_bytes(1_500_000.0), "1.5 MB");
        assert_eq!(fmt_bytes(12.0), "12 B");
    }
}
