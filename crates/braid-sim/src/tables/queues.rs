//! `queues.parquet`: queue lengths of the sampled ports (`measure.queues`).

use super::{col, Col, Source, TableSpec};
use crate::api::{Column, ColumnType as T, Table};

pub const SPEC: TableSpec = TableSpec {
    name: "queues",
    doc: "queue-length time series of the sampled ports",
    columns: COLUMNS,
    extra: None,
    build,
};

const COLUMNS: &[Col] = &[
    col("time_ps", T::U64, "sample time"),
    col(
        "port",
        T::Str,
        "`node:port` (port indices as in `ports.parquet`)",
    ),
    col("bytes", T::U64, "bytes queued at the port"),
];

fn build(src: &Source) -> Table {
    let world = src.world;
    let mut t = Table::default();
    // Queue series.
    let (mut qt, mut qn, mut qb) = (vec![], vec![], vec![]);
    for &(t, i, b) in &world.measure.queues {
        qt.push(t);
        qn.push(world.measure.queue_names[i as usize].clone());
        qb.push(b);
    }
    t.push("time_ps", Column::U64(qt));
    t.push("port", Column::Str(qn));
    t.push("bytes", Column::U64(qb));

    t
}
