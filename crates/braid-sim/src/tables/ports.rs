//! `ports.parquet`: the port map.

use super::{col, nullable, Col, Null, Source, TableSpec};
use crate::api::{Column, ColumnType as T, Table};

pub const SPEC: TableSpec = TableSpec {
    name: "ports",
    doc: "the port map: per (node, port) the node's id, name and role (host index for hosts), the peer node and port it faces, link rate (bit/s) and delay (ps) — what \"tor0:4\" in queue names and counters means",
    columns: COLUMNS,
    extra: None,
    build,
};

const COLUMNS: &[Col] = &[
    col("node", T::U64, "node id (HPCC's, for imported topologies)"),
    col("node_name", T::Str, "node name (`h3`, `tor0`, ...)"),
    col("role", T::Str, "`host` or `switch`"),
    nullable(
        "host",
        T::I64,
        Null::Negative,
        "host index; null for a switch",
    ),
    col(
        "port",
        T::U64,
        "port index on the node (the topology builder's)",
    ),
    col("peer", T::U64, "node id of the neighbour the port faces"),
    col("peer_name", T::Str, "its name"),
    col(
        "peer_port",
        T::U64,
        "the neighbour's port index on the link",
    ),
    col("rate_bps", T::U64, "link rate, bit/s"),
    col("delay_ps", T::U64, "one-way propagation delay"),
];

/// The port map: which neighbour each port index faces, so that "tor0:4" in queue names and
/// counters can be read without re-deriving the topology builder's numbering.
fn build(src: &Source) -> Table {
    let world = src.world;
    let (mut node, mut name, mut port, mut peer, mut peer_name, mut peer_port) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut rate, mut delay, mut role, mut host) = (vec![], vec![], vec![], vec![]);
    for (ni, n) in world.nodes.iter().enumerate() {
        // Flows name hosts by host index; exports (HPCC's addresses) need the node behind it.
        let (r, h) = match n.role {
            crate::world::Role::Host(h) => ("host", h as i64),
            crate::world::Role::Switch(_) => ("switch", -1),
        };
        for (pi, p) in world.node_ports(ni as u32).iter().enumerate() {
            node.push(ni as u64);
            name.push(n.name.clone());
            role.push(r.to_string());
            host.push(h);
            port.push(pi as u64);
            peer.push(p.peer_node as u64);
            peer_name.push(world.nodes[p.peer_node as usize].name.clone());
            peer_port.push(p.peer_port as u64);
            rate.push(p.rate);
            delay.push(p.delay);
        }
    }
    let mut t = Table::default();
    t.push("node", Column::U64(node));
    t.push("node_name", Column::Str(name));
    t.push("role", Column::Str(role));
    t.push("host", Column::I64(host));
    t.push("port", Column::U64(port));
    t.push("peer", Column::U64(peer));
    t.push("peer_name", Column::Str(peer_name));
    t.push("peer_port", Column::U64(peer_port));
    t.push("rate_bps", Column::U64(rate));
    t.push("delay_ps", Column::U64(delay));
    t
}
