//! `pfc.parquet`: every PFC frame a port sent or received (`measure.pfc`).

use super::{col, Col, Source, TableSpec};
use crate::api::{Column, ColumnType as T, Table};

pub const SPEC: TableSpec = TableSpec {
    name: "pfc",
    doc: "every PFC frame a port sent or received (`measure.pfc`, default on): time, node, port, priority, pause/resume, sent/received; pause intervals per port are the received pause→resume pairs",
    columns: COLUMNS,
    extra: None,
    build,
};

const COLUMNS: &[Col] = &[
    col("time_ps", T::U64, "when the frame was sent or received"),
    col("node", T::U64, "node id of the port"),
    col("node_name", T::Str, "its name"),
    col("port", T::U64, "port index"),
    col("priority", T::U64, "the paused priority"),
    col("type", T::Str, "`pause` or `resume`"),
    col("direction", T::Str, "`sent` (the congested port queued it) or `received` (the upstream port, which stops or resumes)"),
];

/// PFC frames in the order they happened (HPCC ns-3's `pfc.txt` records the receiving side).
fn build(src: &Source) -> Table {
    let world = src.world;
    let recs = &world.measure.pfc;
    let mut t = Table::default();
    t.push(
        "time_ps",
        Column::U64(recs.iter().map(|r| r.time).collect()),
    );
    t.push(
        "node",
        Column::U64(recs.iter().map(|r| r.node as u64).collect()),
    );
    t.push(
        "node_name",
        Column::Str(
            recs.iter()
                .map(|r| world.nodes[r.node as usize].name.clone())
                .collect(),
        ),
    );
    t.push(
        "port",
        Column::U64(recs.iter().map(|r| r.port as u64).collect()),
    );
    t.push(
        "priority",
        Column::U64(recs.iter().map(|r| r.prio as u64).collect()),
    );
    let ty = |r: &crate::measure::PfcRecord| if r.pause { "pause" } else { "resume" };
    t.push(
        "type",
        Column::Str(recs.iter().map(|r| ty(r).to_string()).collect()),
    );
    let dir = |r: &crate::measure::PfcRecord| if r.received { "received" } else { "sent" };
    t.push(
        "direction",
        Column::Str(recs.iter().map(|r| dir(r).to_string()).collect()),
    );
    t
}
