//! `throughput.parquet`: goodput per flow and sampling interval (`measure.interval`).

use super::{col, Col, Source, TableSpec};
use crate::api::{Column, ColumnType as T, Table};
use braid_engine::time::S;
use braid_engine::Time;
use std::collections::BTreeMap;

pub const SPEC: TableSpec = TableSpec {
    name: "throughput",
    doc: "per-flow goodput time series: one row per sampling interval of each flow's life, zero intervals (stalls) included",
    columns: COLUMNS,
    extra: None,
    build,
};

const COLUMNS: &[Col] = &[
    col("time_ps", T::U64, "end of the sampling interval"),
    col("flow", T::U64, "flow id (`flows.parquet`)"),
    col(
        "bytes",
        T::U64,
        "bytes the flow's receiving QPs delivered in the interval",
    ),
    col("gbps", T::F64, "those bytes over the interval"),
];

fn build(src: &Source) -> Table {
    let (world, log, now) = (src.world, src.log, src.now);
    let mut t = Table::default();
    // Goodput series, per flow: one row per sampling interval of the flow's life, zero
    // intervals included (a stall shows as zeros, not as a line bridging it).
    let mut series: BTreeMap<(Time, u32), (u64, Time)> = BTreeMap::new();
    for &(t, node, qpn, bytes, dt) in &world.measure.tput {
        // A middleware's QP counts for the application QP it serves (world::facing).
        let host = &world.hosts[node as usize];
        let head = host.owners.family_head(qpn);
        let Some(&flow) = log.rx_qp_flow.get(&(host.node, head)) else {
            continue;
        };
        let e = series.entry((t, flow)).or_insert((0, dt));
        e.0 += bytes;
    }
    let iv = world.measure.interval;
    if let Some(k) = now.checked_div(iv) {
        let last = k * iv;
        for f in &log.flows {
            if f.start_ps >= last {
                continue;
            }
            // Samples end intervals: the first after the start, through the one holding the end.
            let end = f.finish_ps.unwrap_or(now).min(now);
            let hi = end.div_ceil(iv).saturating_mul(iv).min(last);
            let mut t = (f.start_ps / iv + 1) * iv;
            while t <= hi {
                series.entry((t, f.id)).or_insert((0, iv));
                t += iv;
            }
        }
    }
    let (mut tt, mut tf, mut tb, mut tg) = (vec![], vec![], vec![], vec![]);
    for (&(t, flow), &(bytes, dt)) in &series {
        tt.push(t);
        tf.push(flow as u64);
        tb.push(bytes);
        tg.push(bytes as f64 * 8.0 / (dt as f64 / S as f64) / 1e9);
    }
    t.push("time_ps", Column::U64(tt));
    t.push("flow", Column::U64(tf));
    t.push("bytes", Column::U64(tb));
    t.push("gbps", Column::F64(tg));

    t
}
