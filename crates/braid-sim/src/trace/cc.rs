//! `measure.cc`: the congestion controller's state of chosen QPs, sampled on a fixed grid
//! (`cc.parquet`): DCQCN's current rate Rc, target rate Rt and α; MP-RDMA's window, in-flight
//! packets and smoothed RTT. Sampling only reads transport state ([`Transport::cc_state`]), so a
//! run measures the same with and without it.
//!
//! [`Transport::cc_state`]: crate::transport::Transport::cc_state

use crate::api::{Column, ColumnType as T, ConfigError, ScenarioError, Table};
use crate::build::err;
use crate::measure::SharedLog;
use crate::tables::{col, nullable, Col, Null, Source, TableSpec};
use crate::transport::CcState;
use crate::world::World;
use braid_engine::Time;
use braid_topo::units::Duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `[measure.cc]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CcConfig {
    /// Which QPs: flow ids (the `flow` column of `flows.parquet`; a perftest application is a
    /// flow too) — each flow's sending QP and the QPs a multipath middleware made for it —,
    /// `{ host = 0, qpn = 3 }` for one QP, or `"all"`: every QP that sends data, up to `max_qps`.
    /// Empty (the default): nothing sampled.
    pub qps: CcQps,
    /// Sampling period; default `measure.interval`.
    pub interval: Option<Duration>,
    /// The most QPs `"all"` samples (the first ones to send, by host and QP number).
    pub max_qps: u32,
}

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig {
            qps: CcQps::List(vec![]),
            interval: None,
            max_qps: 64,
        }
    }
}

/// `measure.cc.qps`: `"all"`, or a list of flow ids and `{ host, qpn }` tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "expected \"all\" or a list of flow ids and { host, qpn } tables (e.g. [0, { host = 1, qpn = 2 }])"
)]
pub enum CcQps {
    All(String),
    List(Vec<QpSel>),
}

/// One entry of `measure.cc.qps`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "expected a flow id (e.g. 3) or { host = 1, qpn = 2 }"
)]
pub enum QpSel {
    /// A flow id.
    Flow(u32),
    /// One QP: host index and QP number (as in `transport.parquet`).
    Qp(QpRef),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QpRef {
    pub host: u32,
    pub qpn: u32,
}

impl CcConfig {
    /// Whether anything is to be sampled.
    pub fn enabled(&self) -> bool {
        !matches!(&self.qps, CcQps::List(v) if v.is_empty())
    }

    /// The checks of the table alone (keys relative to `[measure.cc]`); the flows and QPs it
    /// names are checked against the built run by [`CcConfig::build`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_qps == 0 {
            return Err(ConfigError::new("max_qps", "must be at least 1"));
        }
        Ok(())
    }

    /// Builds the sampler (None when nothing is asked for): checks the keys against the built run
    /// (`flows` flows, hosts with their QP numbers resolved at sampling time) and the
    /// measurement interval it rides on.
    pub fn build(
        &self,
        measure_interval: Time,
        n_flows: usize,
        n_hosts: usize,
        log: SharedLog,
    ) -> Result<Option<CcSampler>, ScenarioError> {
        self.validate().map_err(|e| e.under("measure.cc"))?;
        if !self.enabled() {
            return Ok(None);
        }
        let interval = match self.interval {
            Some(d) => d.0,
            None => measure_interval,
        };
        if interval == 0 {
            let what = if self.interval.is_some() {
                ("measure.cc.interval", "must be positive, e.g. \"10us\"")
            } else {
                (
                    "measure.cc.interval",
                    "measure.interval is 0 (no time series): give measure.cc an interval of its own, e.g. \"10us\"",
                )
            };
            return Err(err(what.0, what.1));
        }
        let mut flows = vec![];
        let mut qps = vec![];
        let all = match &self.qps {
            CcQps::All(s) if s == "all" => true,
            CcQps::All(s) => {
                return Err(err(
                    "measure.cc.qps",
                    format!(
                    "expected \"all\" or a list of flow ids and {{ host, qpn }} tables, got {s:?}"
                ),
                ))
            }
            CcQps::List(v) => {
                for (i, sel) in v.iter().enumerate() {
                    match *sel {
                        QpSel::Flow(f) => {
                            if f as usize >= n_flows {
                                return Err(err(
                                    format!("measure.cc.qps[{i}]"),
                                    format!(
                                        "no flow {f}: the run has {n_flows} flows (ids 0 to {})",
                                        n_flows.saturating_sub(1)
                                    ),
                                ));
                            }
                            if flows.contains(&f) {
                                return Err(err(
                                    format!("measure.cc.qps[{i}]"),
                                    format!("flow {f} is listed twice"),
                                ));
                            }
                            flows.push(f);
                        }
                        QpSel::Qp(q) => {
                            if q.host as usize >= n_hosts {
                                return Err(err(
                                    format!("measure.cc.qps[{i}].host"),
                                    format!("no host {}: the topology has {n_hosts} hosts", q.host),
                                ));
                            }
                            if qps.contains(&(q.host, q.qpn)) {
                                return Err(err(
                                    format!("measure.cc.qps[{i}]"),
                                    format!("QP {} of host {} is listed twice", q.qpn, q.host),
                                ));
                            }
                            qps.push((q.host, q.qpn));
                        }
                    }
                }
                false
            }
        };
        Ok(Some(CcSampler {
            interval,
            all,
            max_qps: self.max_qps as usize,
            flows,
            qps,
            chosen: vec![],
            log,
            rows: vec![],
        }))
    }
}

/// One sample of one QP.
#[derive(Debug, Clone, Copy)]
pub struct CcRow {
    pub time: Time,
    pub host: u32,
    pub qpn: u32,
    pub flow: Option<u32>,
    pub kind: &'static str,
    pub state: CcState,
}

/// The sampler: which QPs, how often, and the rows so far.
pub struct CcSampler {
    pub interval: Time,
    all: bool,
    max_qps: usize,
    flows: Vec<u32>,
    qps: Vec<(u32, u32)>,
    /// `"all"`: the QPs taken so far (host, qpn), in the order they were taken.
    chosen: Vec<(u32, u32)>,
    log: SharedLog,
    pub rows: Vec<CcRow>,
}

impl CcSampler {
    /// Samples every chosen QP that exists now and has a congestion controller.
    pub fn sample(&mut self, now: Time, world: &World) {
        let Ok(log) = self.log.try_borrow() else {
            return;
        };
        // The flow each (node, application QP) serves, for the `flow` column.
        let flow_of = |host: usize, head: u32| -> Option<u32> {
            let node = world.hosts[host].node;
            log.rx_qp_flow.get(&(node, head)).copied().or_else(|| {
                log.flows
                    .iter()
                    .position(|f| f.src_qp == Some((node, head)))
                    .map(|i| i as u32)
            })
        };
        let take = |host: usize, qpn: u32, flow: Option<u32>, rows: &mut Vec<CcRow>| {
            let Some(q) = world.hosts[host].nic.qp(qpn) else {
                return;
            };
            if let Some(state) = q.t.cc_state(now) {
                rows.push(CcRow {
                    time: now,
                    host: host as u32,
                    qpn,
                    flow,
                    kind: q.t.kind(),
                    state,
                });
            }
        };
        for &f in &self.flows {
            let Some((node, head)) = log.flows[f as usize].src_qp else {
                continue;
            };
            let h = world.host_index[node as usize] as usize;
            // The flow's QP and the QPs a middleware made for it, by QP number.
            let mut members: Vec<u32> = world.hosts[h]
                .owners
                .family
                .iter()
                .filter(|&(_, &hd)| hd == head)
                .map(|(&q, _)| q)
                .collect();
            members.push(head);
            members.sort_unstable();
            members.dedup();
            for q in members {
                take(h, q, Some(f), &mut self.rows);
            }
        }
        for &(h, q) in &self.qps {
            let head = world.hosts[h as usize].owners.family_head(q);
            take(h as usize, q, flow_of(h as usize, head), &mut self.rows);
        }
        if self.all {
            // QPs join once they have sent data, up to the cap; a taken QP stays.
            if self.chosen.len() < self.max_qps {
                for (h, host) in world.hosts.iter().enumerate() {
                    for q in host.nic.qps() {
                        if self.chosen.len() >= self.max_qps {
                            break;
                        }
                        let key = (h as u32, q.qpn);
                        if q.tx_bytes > 0
                            && q.t.cc_state(now).is_some()
                            && !self.chosen.contains(&key)
                        {
                            self.chosen.push(key);
                        }
                    }
                }
                self.chosen.sort_unstable();
            }
            for &(h, q) in &self.chosen {
                let head = world.hosts[h as usize].owners.family_head(q);
                take(h as usize, q, flow_of(h as usize, head), &mut self.rows);
            }
        }
    }

    /// The `cc` results table ([`SPEC`]; -1 and NaN where a value is missing, nulls once
    /// [`TableSpec::finish`]ed).
    pub fn table(&self) -> Table {
        table(&self.rows)
    }
}

pub const SPEC: TableSpec = TableSpec {
    name: "cc",
    doc: "the congestion controller's state of the QPs `measure.cc` chose, per sample: DCQCN rate Rc, target Rt, α; MP-RDMA and HPCC cwnd; HPCC's U; in flight, CNPs/ECN ACKs, cuts (docs/scenario.md, \"Congestion-control time series\")",
    columns: COLUMNS,
    extra: None,
    build,
};

const COLUMNS: &[Col] = &[
    col(
        "time_ps",
        T::U64,
        "sample time (multiples of `measure.cc.interval`)",
    ),
    col("host", T::U64, "host index"),
    col("qpn", T::U64, "QP number"),
    nullable(
        "flow",
        T::I64,
        Null::Negative,
        "the flow the QP carries; null if none",
    ),
    col(
        "kind",
        T::Str,
        "the controller: `dcqcn`, `dctcp`, `timely`, `hpcc`, `mp-rdma`",
    ),
    nullable(
        "rate_bps",
        T::F64,
        Null::Nan,
        "DCQCN's current rate Rc; null for other controllers",
    ),
    nullable("target_bps", T::F64, Null::Nan, "DCQCN's target rate Rt"),
    nullable("alpha", T::F64, Null::Nan, "DCQCN's α"),
    nullable(
        "cwnd",
        T::F64,
        Null::Nan,
        "the window (bytes): MP-RDMA's, DCTCP's, HPCC's",
    ),
    nullable("inflight", T::F64, Null::Nan, "bytes in flight"),
    nullable("srtt_us", T::F64, Null::Nan, "smoothed RTT"),
    nullable(
        "signals",
        T::I64,
        Null::Negative,
        "congestion signals so far (DCQCN: CNPs; MP-RDMA: ECN-marked ACKs)",
    ),
    nullable("cuts", T::I64, Null::Negative, "rate or window cuts so far"),
    nullable(
        "utilization",
        T::F64,
        Null::Nan,
        "HPCC's inflight utilisation U (EWMA of the busiest link's, from INT)",
    ),
];

fn build(src: &Source) -> Table {
    src.world
        .measure
        .cc
        .as_ref()
        .map_or_else(|| table(&[]), |c| c.table())
}

fn table(rows: &[CcRow]) -> Table {
    let f = |g: &dyn Fn(&CcState) -> Option<f64>| {
        Column::F64(
            rows.iter()
                .map(|r| g(&r.state).unwrap_or(f64::NAN))
                .collect(),
        )
    };
    let mut t = Table::default();
    t.push(
        "time_ps",
        Column::U64(rows.iter().map(|r| r.time).collect()),
    );
    t.push(
        "host",
        Column::U64(rows.iter().map(|r| r.host as u64).collect()),
    );
    t.push(
        "qpn",
        Column::U64(rows.iter().map(|r| r.qpn as u64).collect()),
    );
    t.push(
        "flow",
        Column::I64(
            rows.iter()
                .map(|r| r.flow.map_or(-1, |f| f as i64))
                .collect(),
        ),
    );
    t.push(
        "kind",
        Column::Str(rows.iter().map(|r| r.kind.to_string()).collect()),
    );
    t.push("rate_bps", f(&|s| s.rate_bps));
    t.push("target_bps", f(&|s| s.target_bps));
    t.push("alpha", f(&|s| s.alpha));
    t.push("cwnd", f(&|s| s.cwnd));
    t.push("inflight", f(&|s| s.inflight));
    t.push("srtt_us", f(&|s| s.srtt_us));
    // Counts: integers, -1 where the controller has none (a null in the results).
    let n = |g: &dyn Fn(&CcState) -> Option<u64>| {
        Column::I64(
            rows.iter()
                .map(|r| g(&r.state).map_or(-1, |x| x as i64))
                .collect(),
        )
    };
    t.push("signals", n(&|s| s.signals));
    t.push("cuts", n(&|s| s.cuts));
    t.push("utilization", f(&|s| s.utilization));
    t
}
