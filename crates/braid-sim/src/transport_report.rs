//! Transport state and counters in the results: one row per QP (the `transport` table) and the
//! sums of the transports' event counters in the run's counters.
//!
//! Every QP gets a row (host, qpn, QP type, transport kind, peer, bytes, retransmitted packets,
//! timeouts, current rate if rate-controlled) plus its transport's own counters
//! ([`Transport::counters`]; NaN where a QP's transport has no such counter). QPs whose receiver
//! keeps an out-of-order degree histogram (MP-RDMA) also get its sample count and the
//! 50th / 99th / 99.9th percentiles and maximum, computed exactly from the histogram.
//!
//! Run counters: `<kind>_<name>` is the sum over QPs of each [`Transport::totals`] entry
//! (`mp_rdma_nacks`, ...), and `<kind>_ood_{samples,p50,p99,p999,max}` describe the union of the
//! QPs' OOD histograms (the paper's Fig. 14 plots the 99.9th percentile of all packets). Nothing
//! is added for transports without totals, so DCQCN runs keep their counters as before.

use crate::api::{Column, ColumnType as T, Table};
use crate::tables::{col, nullable, Col, Extra, Null, Source, TableSpec};
use crate::transport::Transport;
use crate::world::World;
use braid_verbs::QpType;
use std::collections::BTreeMap;

/// The q-quantile (0 ≤ q ≤ 1) of the samples a histogram counts (entry d = how many samples
/// equal d), by the nearest-rank rule: the smallest d with at least ⌈q·n⌉ samples ≤ d (numpy's
/// `method="inverted_cdf"`); q = 0 gives the minimum. None without samples.
pub fn hist_quantile(hist: &[u64], q: f64) -> Option<u64> {
    let n: u64 = hist.iter().sum();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut cum = 0u64;
    for (d, &c) in hist.iter().enumerate() {
        cum += c;
        if cum >= rank {
            return Some(d as u64);
        }
    }
    None
}

/// The largest value a histogram counts.
pub fn hist_max(hist: &[u64]) -> Option<u64> {
    hist.iter().rposition(|&c| c > 0).map(|d| d as u64)
}

/// The OOD summary columns, in order, with the quantile each is (None = the maximum).
const OOD_COLUMNS: [(&str, Option<f64>); 4] = [
    ("ood_p50", Some(0.5)),
    ("ood_p99", Some(0.99)),
    ("ood_p999", Some(0.999)),
    ("ood_max", None),
];

fn ood_summary(hist: &[u64], q: Option<f64>) -> Option<u64> {
    match q {
        Some(q) => hist_quantile(hist, q),
        None => hist_max(hist),
    }
}

fn qp_type_name(t: QpType) -> &'static str {
    match t {
        QpType::Rc => "rc",
        QpType::Uc => "uc",
        QpType::Ud => "ud",
    }
}

pub const SPEC: TableSpec = TableSpec {
    name: "transport",
    doc: "per QP: host, QP number and type, transport kind (`dcqcn`, `none`, `mp-rdma`), peer, bytes sent and received, retransmitted packets, timeouts, DCQCN rate; the transport's own counters (MP-RDMA: cwnd, ACKs, ECN ACKs, pruned ACKs, NACKs, recoveries, probes, bitmap drops, ...; RC with `recovery = \"irn\"`: `irn_nacks`, `irn_recoveries`, `irn_retransmitted`, `irn_capped`, `irn_ooo_accepted`, docs/irn.md) and, for MP-RDMA receivers, the out-of-order degree's 50th/99th/99.9th percentiles and maximum (docs/mp-rdma.md)",
    columns: COLUMNS,
    extra: Some(Extra {
        ty: None,
        doc: "the transports' own counters (f64, null for a QP whose transport lacks the counter); with MP-RDMA receivers, `ood_samples` (u64) and `ood_p50`, `ood_p99`, `ood_p999`, `ood_max` (f64, null without samples)",
    }),
    build,
};

const COLUMNS: &[Col] = &[
    col("host", T::U64, "host index"),
    col("qpn", T::U64, "QP number"),
    col("qp_type", T::Str, "`rc`, `uc` or `ud`"),
    col(
        "kind",
        T::Str,
        "transport kind (`dcqcn`, `none`, `mp-rdma`, ...)",
    ),
    nullable(
        "remote_host",
        T::U64,
        Null::Is(u64::MAX),
        "the peer's host index; null for a UD QP (no single peer)",
    ),
    col(
        "remote_qpn",
        T::U64,
        "the peer QP's number (a UD QP's stays as created, 2^32-1)",
    ),
    col("sport", T::U64, "UDP source port"),
    col("tx_bytes", T::U64, "payload bytes sent"),
    col("rx_bytes", T::U64, "payload bytes delivered"),
    col("retx_pkts", T::U64, "retransmitted packets"),
    col("timeouts", T::U64, "retransmission timeouts"),
    nullable(
        "rate_gbps",
        T::F64,
        Null::Nan,
        "the current sending rate of a rate-controlled transport (DCQCN); null otherwise",
    ),
];

/// Builds the per-QP `transport` table.
fn build(src: &Source) -> Table {
    let world = src.world;
    let qps: Vec<(usize, &crate::nic::Qp)> = world
        .hosts
        .iter()
        .enumerate()
        .flat_map(|(h, host)| host.nic.qps().map(move |q| (h, q)))
        .collect();
    let mut t = Table::default();
    t.push(
        "host",
        Column::U64(qps.iter().map(|(h, _)| *h as u64).collect()),
    );
    t.push(
        "qpn",
        Column::U64(qps.iter().map(|(_, q)| q.qpn as u64).collect()),
    );
    t.push(
        "qp_type",
        Column::Str(
            qps.iter()
                .map(|(_, q)| qp_type_name(q.qp_type).to_string())
                .collect(),
        ),
    );
    t.push(
        "kind",
        Column::Str(qps.iter().map(|(_, q)| q.t.kind().to_string()).collect()),
    );
    // A UD QP has no single peer: its remote fields stay as created (u32::MAX).
    t.push(
        "remote_host",
        Column::U64(
            qps.iter()
                .map(|(_, q)| world.host_of(q.remote_host).map_or(u64::MAX, |h| h as u64))
                .collect(),
        ),
    );
    t.push(
        "remote_qpn",
        Column::U64(qps.iter().map(|(_, q)| q.remote_qpn as u64).collect()),
    );
    t.push(
        "sport",
        Column::U64(qps.iter().map(|(_, q)| q.sport as u64).collect()),
    );
    t.push(
        "tx_bytes",
        Column::U64(qps.iter().map(|(_, q)| q.tx_bytes).collect()),
    );
    t.push(
        "rx_bytes",
        Column::U64(qps.iter().map(|(_, q)| q.rx_bytes).collect()),
    );
    t.push(
        "retx_pkts",
        Column::U64(qps.iter().map(|(_, q)| q.retx_pkts).collect()),
    );
    t.push(
        "timeouts",
        Column::U64(qps.iter().map(|(_, q)| q.t.timeouts()).collect()),
    );
    t.push(
        "rate_gbps",
        Column::F64(
            qps.iter()
                .map(|(_, q)| q.t.rate_bps().map_or(f64::NAN, |r| r / 1e9))
                .collect(),
        ),
    );

    // The transports' own counters: the union of names, in the order first met.
    let per_qp: Vec<Vec<(&'static str, f64)>> = qps.iter().map(|(_, q)| q.t.counters()).collect();
    let mut names: Vec<&'static str> = Vec::new();
    for c in &per_qp {
        for (n, _) in c {
            if !names.contains(n) {
                names.push(n);
            }
        }
    }
    for name in names {
        let col = per_qp
            .iter()
            .map(|c| {
                c.iter()
                    .find(|(n, _)| *n == name)
                    .map_or(f64::NAN, |(_, v)| *v)
            })
            .collect();
        t.push(name, Column::F64(col));
    }

    let hists: Vec<Option<&[u64]>> = qps.iter().map(|(_, q)| q.t.ood_histogram()).collect();
    if hists.iter().any(Option::is_some) {
        t.push(
            "ood_samples",
            Column::U64(
                hists
                    .iter()
                    .map(|h| h.map_or(0, |h| h.iter().sum()))
                    .collect(),
            ),
        );
        for (name, q) in OOD_COLUMNS {
            let col = hists
                .iter()
                .map(|h| {
                    h.and_then(|h| ood_summary(h, q))
                        .map_or(f64::NAN, |v| v as f64)
                })
                .collect();
            t.push(name, Column::F64(col));
        }
    }
    t
}

/// The transports' summed event counters (`<kind>_<name>`) and pooled OOD histograms (by kind)
/// at one moment: what the run counters report, or a baseline to subtract from them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TransportTotals {
    pub counts: BTreeMap<String, u64>,
    pub ood: BTreeMap<&'static str, Vec<u64>>,
}

impl TransportTotals {
    pub fn of(world: &World) -> Self {
        let mut out = TransportTotals::default();
        for q in world.hosts.iter().flat_map(|h| h.nic.qps()) {
            let t: &dyn Transport = q.t.as_ref();
            let totals = t.totals();
            if totals.is_empty() {
                continue;
            }
            let prefix = t.kind().replace('-', "_");
            for (name, v) in totals {
                *out.counts.entry(format!("{prefix}_{name}")).or_insert(0) += v;
            }
            if let Some(h) = t.ood_histogram() {
                let acc = out.ood.entry(t.kind()).or_default();
                if acc.len() < h.len() {
                    acc.resize(h.len(), 0);
                }
                for (a, &c) in acc.iter_mut().zip(h) {
                    *a += c;
                }
            }
        }
        out
    }

    /// What happened since `base` (counters only grow, so this is exact).
    pub fn since(mut self, base: &TransportTotals) -> Self {
        for (k, v) in &base.counts {
            if let Some(x) = self.counts.get_mut(k) {
                *x = x.saturating_sub(*v);
            }
        }
        for (kind, h0) in &base.ood {
            if let Some(h) = self.ood.get_mut(kind) {
                for (a, b) in h.iter_mut().zip(h0) {
                    *a = a.saturating_sub(*b);
                }
            }
        }
        self
    }
}

/// Adds the transports' summed event counters and pooled OOD percentiles to the run counters,
/// counted since `base` (`measure.transport_from`) when there is one.
pub fn add_counters(world: &World, base: Option<&TransportTotals>, k: &mut BTreeMap<String, u64>) {
    let mut now = TransportTotals::of(world);
    if let Some(b) = base {
        now = now.since(b);
    }
    k.extend(now.counts);
    for (kind, h) in now.ood {
        let prefix = kind.replace('-', "_");
        k.insert(format!("{prefix}_ood_samples"), h.iter().sum());
        for (name, q) in OOD_COLUMNS {
            if let Some(v) = ood_summary(&h, q) {
                k.insert(format!("{prefix}_{name}"), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nearest-rank quantile of an explicit sample list (numpy's "inverted_cdf").
    fn nearest_rank(samples: &mut [u64], q: f64) -> u64 {
        samples.sort_unstable();
        let n = samples.len();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        samples[rank - 1]
    }

    #[test]
    fn quantiles_of_a_histogram_equal_those_of_its_samples() {
        // 1000 samples 0..999 once each: p50 = 499, p99 = 989, p99.9 = 998, max = 999
        // (numpy.quantile(np.arange(1000), [.5, .99, .999], method="inverted_cdf")).
        let h = vec![1u64; 1000];
        assert_eq!(hist_quantile(&h, 0.5), Some(499));
        assert_eq!(hist_quantile(&h, 0.99), Some(989));
        assert_eq!(hist_quantile(&h, 0.999), Some(998));
        assert_eq!(hist_max(&h), Some(999));
        assert_eq!(hist_quantile(&h, 0.0), Some(0));
        assert_eq!(hist_quantile(&h, 1.0), Some(999));
        // A skewed histogram against its expanded samples.
        let h = [700u64, 200, 0, 50, 0, 0, 30, 0, 15, 4, 0, 1];
        let mut s: Vec<u64> = h
            .iter()
            .enumerate()
            .flat_map(|(d, &c)| std::iter::repeat_n(d as u64, c as usize))
            .collect();
        for q in [0.01, 0.5, 0.7, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0] {
            assert_eq!(
                hist_quantile(&h, q),
                Some(nearest_rank(&mut s, q)),
                "q = {q}"
            );
        }
        assert_eq!(hist_max(&h), Some(11));
    }

    #[test]
    fn an_empty_histogram_has_no_quantiles() {
        assert_eq!(hist_quantile(&[0, 0, 0], 0.5), None);
        assert_eq!(hist_quantile(&[], 0.5), None);
        assert_eq!(hist_max(&[0, 0]), None);
    }
}
