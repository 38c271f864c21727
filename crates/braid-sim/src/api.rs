//! The simulator's public face: build a run from a validated scenario, advance it in slices, read
//! its results as plain column tables. Front ends (the Python package) use only this module.

use std::collections::BTreeMap;

/// A column of a results table.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Str(Vec<String>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::U64(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::F64(v) => v.len(),
            Column::Str(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A table: named columns of equal length, in a fixed order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<(String, Column)>,
}

impl Table {
    pub fn push(&mut self, name: &str, col: Column) {
        debug_assert!(self
            .columns
            .first()
            .is_none_or(|(_, c)| c.len() == col.len()));
        self.columns.push((name.to_string(), col));
    }
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }
    pub fn get(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }
}

/// Everything a run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Results {
    /// Per message: qp, src, dst, opcode, bytes, post_ps, complete_ps.
    pub messages: Table,
    /// Per flow: flow id, src, dst, size, start_ps, finish_ps, fct_ps, ideal_fct_ps (idle fabric,
    /// best rate between the hosts: the same for every scheme), path_ideal_fct_ps (alone on its
    /// own path), slowdown (fct / ideal, not clamped), sport, dport (a traffic flow's HPCC
    /// destination port; 0 for an application), ...
    pub flows: Table,
    /// Per-flow goodput time series: time_ps, flow, bytes delivered in the interval, gbps.
    pub throughput: Table,
    /// Queue-length time series: time_ps, port name, bytes.
    pub queues: Table,
    /// Per QP: host, qpn, transport kind, bytes, the transport's counters and (MP-RDMA) the
    /// out-of-order degree percentiles (`transport_report`).
    pub transport: Table,
    /// Per tenant (application side or traffic table on a host, and each host agent that runs
    /// layers): its stack, CPU time by layer, verbs calls, its layers' counters and, for
    /// perftest clients, latency percentiles, goodput and message rate (`tenants.rs`).
    pub tenants: Table,
    /// The port map, one row per (node, port): node id, name, role and host index, port index,
    /// the peer node (id and name) and port it faces, the link's rate (bits/s) and one-way delay (ps).
    pub ports: Table,
    /// Every PFC frame a port sent or received (`measure.pfc`): time_ps, node, node_name, port,
    /// priority, type ("pause"/"resume"), direction ("sent"/"received").
    pub pfc: Table,
    /// `measure.cc`: the congestion controllers' state of the chosen QPs at each sample
    /// (`trace::cc`): time_ps, host, qpn, flow (-1: none), kind, rate_bps, target_bps, alpha,
    /// cwnd, inflight, srtt_us, signals, cuts (NaN where the controller has no such field).
    pub cc: Table,
    /// Tables the middleware layers handed over (`Middleware::tables`), by name (e.g.
    /// `drum_rounds`: the DRUM online solver's rounds), each with `host` and `tenant` first
    /// (`tenants::layer_tables`). Written as `<name>.parquet` beside the others.
    pub layer_tables: BTreeMap<String, Table>,
    /// `measure.pcap`: the packet capture as a pcap file (empty when nothing was captured).
    pub pcap: Vec<u8>,
    /// Totals: drops, pfc_pauses, ecn_marks, cnps, retransmissions, ...
    pub counters: BTreeMap<String, u64>,
    /// Headline figures for summaries (e.g. total goodput, mean FCT, Jain index).
    pub headline: BTreeMap<String, f64>,
    /// Run statistics: events, packets, sim_time_ps, ...
    pub stats: BTreeMap<String, f64>,
}

/// A scenario the front end handed us was not valid. `path` is the dotted key path
/// (e.g. `topology.host_link.rate`), `message` says what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ScenarioError {}

/// A config table's refusal of one of its keys: the key path relative to the table (`cpu.post_ns`
/// in `[host]`) and why, in the user's terms. Each config type's `validate` returns it; the
/// scenario, which knows where the table sits, turns it into a [`ScenarioError`] with
/// [`ConfigError::under`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            message: message.into(),
        }
    }

    /// The error of a sub-table, as its parent table sees it (`cpu` + `post_ns` = `cpu.post_ns`).
    pub fn nested(self, sub: &str) -> ConfigError {
        let e = self.under(sub);
        ConfigError {
            key: e.path,
            message: e.message,
        }
    }

    /// The error with its key placed under `table` (`host` + `cpu.post_ns` = `host.cpu.post_ns`).
    pub fn under(self, table: &str) -> ScenarioError {
        let path = match (table.is_empty(), self.key.is_empty()) {
            (true, _) => self.key,
            (false, true) => table.to_string(),
            (false, false) if self.key.starts_with('[') => format!("{table}{}", self.key),
            (false, false) => format!("{table}.{}", self.key),
        };
        ScenarioError {
            path,
            message: self.message,
        }
    }
}
