//! `messages.parquet`: one row per completed message (`measure.messages`).

use super::{col, nullable, Col, Null, Source, TableSpec};
use crate::api::{Column, ColumnType as T, Table};

pub const SPEC: TableSpec = TableSpec {
    name: "messages",
    doc:
        "per message: host, QP, opcode, bytes, post and completion time, the tenant that posted it",
    columns: COLUMNS,
    extra: None,
    build,
};

const COLUMNS: &[Col] = &[
    col("host", T::U64, "host index of the QP that posted it"),
    col("qpn", T::U64, "its QP number"),
    nullable(
        "dst",
        T::U64,
        Null::Is(u32::MAX as u64),
        "destination host index; null if the destination is not a host",
    ),
    col("op", T::Str, "opcode (`write`, `read`, `send`, ...)"),
    col("bytes", T::U64, "message size"),
    col("post_ps", T::U64, "when it was posted"),
    col("complete_ps", T::U64, "when its completion was generated"),
    col("latency_ps", T::U64, "complete_ps - post_ps"),
    col(
        "wr_id",
        T::U64,
        "the work request id the application gave it",
    ),
    nullable(
        "tenant",
        T::U64,
        Null::Is(u32::MAX as u64),
        "the tenant slot on `host` that owns the QP (`tenants.parquet`); null if none",
    ),
];

fn build(src: &Source) -> Table {
    let world = src.world;
    let mut t = Table::default();
    // Messages.
    let mut m = MsgCols::default();
    for (h, rec) in &world.measure.messages {
        m.host.push(*h as u64);
        m.qpn.push(rec.qpn as u64);
        m.dst
            .push(world.host_of(rec.dst).map_or(u32::MAX as u64, |h| h as u64));
        m.op.push(rec.op.to_string());
        m.bytes.push(rec.bytes);
        m.post.push(rec.post_ps);
        m.complete.push(rec.complete_ps);
        m.wr_id.push(rec.wr_id);
        // Who posted it: per-tenant latency (report, compare) joins on (host, tenant).
        let owners = &world.hosts[*h as usize].owners.qp;
        m.tenant.push(
            owners
                .get(rec.qpn as usize)
                .map_or(u32::MAX as u64, |&t| t as u64),
        );
    }
    t.push("host", Column::U64(m.host));
    t.push("qpn", Column::U64(m.qpn));
    t.push("dst", Column::U64(m.dst));
    t.push("op", Column::Str(m.op));
    t.push("bytes", Column::U64(m.bytes));
    t.push("post_ps", Column::U64(m.post.clone()));
    t.push("complete_ps", Column::U64(m.complete.clone()));
    t.push(
        "latency_ps",
        Column::U64(m.complete.iter().zip(&m.post).map(|(c, p)| c - p).collect()),
    );
    t.push("wr_id", Column::U64(m.wr_id));
    t.push("tenant", Column::U64(m.tenant));

    t
}

#[derive(Default)]
struct MsgCols {
    host: Vec<u64>,
    qpn: Vec<u64>,
    dst: Vec<u64>,
    op: Vec<String>,
    bytes: Vec<u64>,
    post: Vec<u64>,
    complete: Vec<u64>,
    wr_id: Vec<u64>,
    tenant: Vec<u64>,
}
