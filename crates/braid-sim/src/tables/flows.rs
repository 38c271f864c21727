//! `flows.parquet`: one row per traffic flow and per application.

use super::{col, nullable, Col, Null, Source, TableSpec};
use crate::api::{Column, ColumnType as T, Table};
use crate::results::quantile;
use braid_engine::time::S;
use std::collections::BTreeMap;

pub const SPEC: TableSpec = TableSpec {
    name: "flows",
    doc: "per flow: src, dst, size, start, finish, FCT (null if unfinished), ideal FCT (idle fabric at the best rate between the hosts, the same for every scheme; docs/scenario.md), its own path's standalone FCT (`path_ideal_fct_ps`), slowdown (FCT / ideal, unclamped), goodput, UDP source port, `dport` (the traffic table's destination port, HPCC's flow-file field; 0 for apps), path (of that port; `multiple` where a switch chooses per packet or per flowlet), `paths` and `path_set` (every path its data took: several for MP-RDMA; null and empty where they are not known)",
    columns: COLUMNS,
    extra: None,
    build,
};

const COLUMNS: &[Col] = &[
    col("flow", T::U64, "flow id: a traffic flow, or an application (each `[[apps]]` entry's client side)"),
    col("kind", T::Str, "`flow` for traffic; the application's kind (`write_bw`, `kv`, ...) otherwise"),
    col("src", T::U64, "source host index"),
    col("dst", T::U64, "destination host index"),
    col("size", T::U64, "bytes asked for (an application that runs for a time: the bytes it moved)"),
    col("start_ps", T::I64, "start time"),
    nullable("finish_ps", T::I64, Null::Negative, "completion time; null if unfinished"),
    nullable("fct_ps", T::I64, Null::Negative, "flow completion time; null if unfinished"),
    col("ideal_fct_ps", T::I64, "FCT on the idle fabric at the best rate between the hosts (the slowdown's denominator; 0 for applications)"),
    col("path_ideal_fct_ps", T::I64, "FCT alone on the flow's own path (HPCC's standalone FCT; 0 for applications and for flows without one path: `path` = `multiple`)"),
    nullable("slowdown", T::F64, Null::Nan, "fct / ideal, not clamped; null for applications and unfinished flows"),
    nullable("goodput_gbps", T::F64, Null::Nan, "bytes delivered over the flow's life (so far, if unfinished); null if it lasted no time"),
    col("sport", T::U64, "UDP source port of the sending QP (0 if it has none)"),
    col("dport", T::U64, "the traffic table's destination port (HPCC's flow-file field); 0 for applications"),
    col("path", T::Str, "the path of `sport`, as node names joined by `>`, as each switch's policy chooses it (ECMP's or WCMP's hash); `multiple` where a switch on the way chooses per packet or per flowlet (spraying, adaptive routing, flowlets: no single path)"),
    nullable("paths", T::U64, Null::Is(u64::MAX), "how many distinct paths the flow's data took (several for MP-RDMA); null where a switch chooses per packet or per flowlet (not tracked)"),
    col("path_set", T::Str, "those paths, joined by a vertical bar; empty where `paths` is null"),
    nullable("latency_p50_ps", T::F64, Null::Nan, "median message latency of an application; null without messages"),
    nullable("latency_p99_ps", T::F64, Null::Nan, "99th-percentile message latency; null without messages"),
];

fn build(src: &Source) -> Table {
    let (world, log, now) = (src.world, src.log, src.now);
    let mut t = Table::default();
    // Bytes each flow's receiving QPs (and the QPs a middleware made for them) delivered so far,
    // and the source ports each sending QP family put data on (several for multipath transports).
    let mut delivered_by_flow: BTreeMap<u32, u64> = BTreeMap::new();
    let mut sports_by_qp: BTreeMap<(u32, u32), std::collections::BTreeSet<u16>> = BTreeMap::new();
    for host in &world.hosts {
        for q in host.nic.qps() {
            let head = host.owners.family_head(q.qpn);
            if let Some(&flow) = log.rx_qp_flow.get(&(host.node, head)) {
                *delivered_by_flow.entry(flow).or_default() += q.rx_bytes;
            }
            let vps = q.t.vp_counters();
            let used = sports_by_qp.entry((host.node, head)).or_default();
            if vps.is_empty() {
                if q.tx_bytes > 0 {
                    used.insert(q.sport);
                }
            } else {
                used.extend(vps.iter().map(|&(vp, _, _)| vp));
            }
        }
    }
    let name_path = |p: Vec<u32>| {
        p.iter()
            .map(|&n| world.nodes[n as usize].name.as_str())
            .collect::<Vec<_>>()
            .join(">")
    };

    // Flows.
    let mut fl = FlowCols::default();
    let mut capacity = crate::world::path_capacity::PathCapacity::default();
    let mut ideals = crate::world::ideal::Ideals::new(world);
    ideals.prepare(
        log.flows
            .iter()
            .filter(|f| f.kind == "flow")
            .map(|f| (f.src, f.dst)),
    );
    for f in &log.flows {
        let sport = f
            .src_qp
            .and_then(|(node, qpn)| {
                world.hosts[world.host_index[node as usize] as usize]
                    .nic
                    .sport_of(qpn)
            })
            .unwrap_or(0);
        // The routes' own choice per switch; None under a per-packet or per-flowlet policy.
        let path = world.flow_path(f.src, f.dst, sport, &mut capacity);
        let fct = f.finish_ps.map(|t| t.saturating_sub(f.start_ps));
        let is_flow = f.kind == "flow";
        // The slowdown's denominator describes the fabric (the same for every scheme); the
        // flow's own path's standalone FCT is kept beside it (HPCC's notion, `compare-hpcc`).
        let (ideal, path_ideal) = if is_flow {
            (
                ideals.fct(f.src, f.dst, f.size),
                path.as_ref()
                    .map_or(0, |p| world.ideal_fct_on(p, f.dst, f.size)),
            )
        } else {
            (0, 0)
        };
        let bytes = if is_flow { f.size } else { f.bytes_done };
        let elapsed = fct.unwrap_or(now.saturating_sub(f.start_ps));
        fl.id.push(f.id as u64);
        fl.kind.push(f.kind.to_string());
        fl.src.push(f.src as u64);
        fl.dst.push(f.dst as u64);
        // `size` is what was asked for, finished or not (an app stopped halfway used to show the
        // bytes it had moved); an app that runs for a time rather than a count asked for none,
        // and shows what it moved.
        fl.size
            .push(if is_flow || f.size > 0 { f.size } else { bytes });
        fl.start.push(f.start_ps as i64);
        fl.finish.push(f.finish_ps.map_or(-1, |t| t as i64));
        fl.fct.push(fct.map_or(-1, |t| t as i64));
        fl.ideal.push(ideal as i64);
        fl.path_ideal.push(path_ideal as i64);
        // Not clamped: a value below 1 would mean a flow beat the idle fabric (a model bug).
        fl.slowdown.push(match (fct, is_flow) {
            (Some(t), true) if ideal > 0 => t as f64 / ideal as f64,
            _ => f64::NAN,
        });
        // An unfinished flow has the goodput of what it delivered so far (0 if stuck).
        let so_far = delivered_by_flow
            .get(&f.id)
            .copied()
            .unwrap_or(0)
            .min(f.size);
        let good = if is_flow && fct.is_none() {
            so_far
        } else {
            bytes
        };
        fl.goodput.push(if elapsed > 0 {
            good as f64 * 8.0 / (elapsed as f64 / S as f64) / 1e9
        } else {
            f64::NAN
        });
        fl.sport.push(sport as u64);
        fl.dport.push(f.dport as u64);
        let own = path.map(name_path);
        // Every distinct path the flow's data took: one per source port its sending QPs used.
        let set: Option<Vec<String>> = f
            .src_qp
            .and_then(|qp| sports_by_qp.get(&qp))
            .map(|ports| {
                ports
                    .iter()
                    .map(|&sp| {
                        world
                            .flow_path(f.src, f.dst, sp, &mut capacity)
                            .map(name_path)
                    })
                    .collect()
            })
            .unwrap_or_else(|| Some(Vec::new()));
        match (own, set) {
            (Some(own), Some(mut set)) => {
                set.sort();
                set.dedup();
                if set.is_empty() {
                    set.push(own.clone());
                }
                fl.n_paths.push(set.len() as u64);
                fl.path_set.push(set.join(" | "));
                fl.path.push(own);
            }
            (own, _) => {
                fl.n_paths.push(u64::MAX);
                fl.path_set.push(String::new());
                fl.path.push(own.unwrap_or_else(|| "multiple".into()));
            }
        }
        let mut lat: Vec<f64> = f.latencies.iter().map(|&x| x as f64).collect();
        lat.sort_by(f64::total_cmp);
        fl.lat_p50.push(quantile(&lat, 0.5));
        fl.lat_p99.push(quantile(&lat, 0.99));
    }
    t.push("flow", Column::U64(fl.id));
    t.push("kind", Column::Str(fl.kind));
    t.push("src", Column::U64(fl.src));
    t.push("dst", Column::U64(fl.dst));
    t.push("size", Column::U64(fl.size));
    t.push("start_ps", Column::I64(fl.start));
    t.push("finish_ps", Column::I64(fl.finish));
    t.push("fct_ps", Column::I64(fl.fct));
    t.push("ideal_fct_ps", Column::I64(fl.ideal));
    t.push("path_ideal_fct_ps", Column::I64(fl.path_ideal));
    t.push("slowdown", Column::F64(fl.slowdown));
    t.push("goodput_gbps", Column::F64(fl.goodput));
    t.push("sport", Column::U64(fl.sport));
    t.push("dport", Column::U64(fl.dport));
    t.push("path", Column::Str(fl.path));
    t.push("paths", Column::U64(fl.n_paths));
    t.push("path_set", Column::Str(fl.path_set));
    t.push("latency_p50_ps", Column::F64(fl.lat_p50));
    t.push("latency_p99_ps", Column::F64(fl.lat_p99));

    t
}

#[derive(Default)]
struct FlowCols {
    id: Vec<u64>,
    kind: Vec<String>,
    src: Vec<u64>,
    dst: Vec<u64>,
    size: Vec<u64>,
    start: Vec<i64>,
    finish: Vec<i64>,
    fct: Vec<i64>,
    ideal: Vec<i64>,
    path_ideal: Vec<i64>,
    slowdown: Vec<f64>,
    goodput: Vec<f64>,
    sport: Vec<u64>,
    dport: Vec<u64>,
    path: Vec<String>,
    n_paths: Vec<u64>,
    path_set: Vec<String>,
    lat_p50: Vec<f64>,
    lat_p99: Vec<f64>,
}
