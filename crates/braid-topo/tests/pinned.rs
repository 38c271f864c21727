//! The graphs every topology kind builds, the flows every traffic pattern generates, their JSON
//! schemas and their error messages, pinned as hashes computed on the code before the kinds moved
//! to one file each (main at 8b41db9). A refactor of `topology/` or `traffic/` must leave every
//! hash here unchanged; a deliberate change of a graph, a flow list or a message updates the pin
//! and says why.

use braid_topo::{Graph, TopologySpec, TrafficSpec};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// FNV-1a, 64 bits: a stable hash we do not have to trust to std's `Hasher`, which may change.
fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn graph_text(g: &Graph) -> String {
    let mut s = String::new();
    for n in &g.nodes {
        writeln!(s, "{:?} {}", n.kind, n.name).unwrap();
    }
    for l in &g.links {
        writeln!(
            s,
            "{} {} {} {} {:016x}",
            l.a,
            l.b,
            l.rate_bps,
            l.delay_ps,
            l.loss.to_bits()
        )
        .unwrap();
    }
    s
}

fn topo(j: &str) -> Result<TopologySpec, String> {
    let de = &mut serde_json::Deserializer::from_str(j);
    serde_path_to_error::deserialize(de).map_err(|e| format!("{}: {}", e.path(), e.inner()))
}

fn traffic(j: &str) -> Result<TrafficSpec, String> {
    let de = &mut serde_json::Deserializer::from_str(j);
    serde_path_to_error::deserialize(de).map_err(|e| format!("{}: {}", e.path(), e.inner()))
}

/// A scratch directory with a small HPCC topology and flow file (written, not read from beside
/// the repository, so the test runs anywhere).
fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("braid-topo-pinned-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("topo.txt"),
        "6 2 5\n4 5\n0 4 100Gbps 0.001ms 0\n1 4 100Gbps 0.001ms 0\n2 5 100Gbps 0.001ms 0.01\n3 5 100Gbps 0.001ms 0\n4 5 400Gbps 0.002ms 0\n",
    )
    .unwrap();
    std::fs::write(
        d.join("flows.txt"),
        "3\n0 2 3 100 50000 2.0\n1 3 3 100 7000 2.000001\n3 0 1 200 123456 2.5\n",
    )
    .unwrap();
    d
}

const LINK: &str = r#"{"rate": "100Gbps", "delay": "1us"}"#;
const FAB: &str = r#"{"rate": "400Gbps", "delay": "2us", "loss": 0.001}"#;

fn topologies() -> Vec<(&'static str, String)> {
    vec![
        ("leaf-spine", format!(r#"{{"kind": "leaf-spine", "spines": 3, "leaves": 4, "hosts_per_leaf": 5, "host_link": {LINK}, "fabric_link": {FAB}}}"#)),
        ("fat-tree", format!(r#"{{"kind": "fat-tree", "k": 6, "host_link": {LINK}, "fabric_link": {FAB}}}"#)),
        ("fat-tree core", format!(r#"{{"kind": "fat-tree", "k": 4, "host_link": {LINK}, "fabric_link": {LINK}, "core_link": {FAB}}}"#)),
        ("two-tor", format!(r#"{{"kind": "two-tor", "hosts_per_tor": 3, "paths": 4, "host_link": {LINK}, "fabric_link": {FAB}}}"#)),
        ("dumbbell", format!(r#"{{"kind": "dumbbell", "left": 2, "right": 3, "host_link": {LINK}, "bottleneck": {FAB}}}"#)),
        ("edges count", r#"{"kind": "edges", "nodes": 4, "switches": [3], "links": [{"a": 0, "b": 3, "rate": "10Gbps", "delay": "1us"}, {"a": "n1", "b": 3, "rate": "10Gbps", "delay": "1us"}, {"a": 2, "b": "n3", "rate": "25Gbps", "delay": "3us", "loss": 0.5}]}"#.into()),
        ("edges names", r#"{"kind": "edges", "nodes": ["a", "b", "s"], "switches": ["s"], "links": [{"a": "a", "b": "s", "rate": "10Gbps", "delay": "1us"}, {"a": "b", "b": 2, "rate": "10Gbps", "delay": "1us"}]}"#.into()),
        ("hpcc", r#"{"kind": "hpcc", "file": "topo.txt"}"#.into()),
        ("hpcc loss", r#"{"kind": "hpcc", "file": "topo.txt", "default_loss": 0.0001}"#.into()),
    ]
}

/// (name, nodes, links, hash of the node and link lists) per kind, from 8b41db9.
const GRAPHS: &[(&str, usize, usize, u64)] = &[
    ("leaf-spine", 27, 32, 16558482272832018673),
    ("fat-tree", 99, 162, 13278446593238162960),
    ("fat-tree core", 36, 48, 13512131263536705611),
    ("two-tor", 12, 14, 5064679557461324431),
    ("dumbbell", 7, 6, 6081768222879602944),
    ("edges count", 4, 3, 2119678342994807697),
    ("edges names", 3, 2, 7132176389442782818),
    ("hpcc", 6, 5, 9455582569378009261),
    ("hpcc loss", 6, 5, 13289983913459929593),
];

#[test]
fn every_topology_kind_builds_the_pinned_graph() {
    let dir = scratch();
    let mut got = Vec::new();
    for (name, j) in topologies() {
        let t = topo(&j).unwrap_or_else(|e| panic!("{name}: {e}"));
        let g = t.build(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(t.n_hosts(&dir).unwrap(), g.n_hosts(), "{name}");
        // Serialising and reading back gives the same table.
        let back = topo(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t, "{name}");
        got.push((name, g.nodes.len(), g.links.len(), fnv(&graph_text(&g))));
    }
    let got_text = format!("{got:#?}");
    let want: Vec<_> = GRAPHS.to_vec();
    assert_eq!(got, want, "\n{got_text}");
}

fn patterns() -> Vec<(&'static str, String)> {
    vec![
        ("permutation", r#"{"pattern": "permutation", "size": "1MB", "start": "3us"}"#.into()),
        ("permutation hosts", r#"{"pattern": "permutation", "size": "64KB", "hosts": [0, 3, 5, 7, 9], "priority": 2, "dport": 7}"#.into()),
        ("permutation cross", r#"{"pattern": "permutation", "size": "1MB", "cross": true}"#.into()),
        ("permutation both", r#"{"pattern": "permutation", "size": "1MB", "cross": true, "both_ways": true}"#.into()),
        ("incast count", r#"{"pattern": "incast", "senders": 7, "receiver": 2, "size": "100KB"}"#.into()),
        ("incast list", r#"{"pattern": "incast", "senders": [9, 1, 4], "receiver": 0, "size": "1KB", "start": "1ms", "priority": 5}"#.into()),
        ("all-to-all", r#"{"pattern": "all-to-all", "size": "4KB"}"#.into()),
        ("all-to-all hosts", r#"{"pattern": "all-to-all", "hosts": [1, 2, 3], "size": "4KB", "dport": 9}"#.into()),
        ("poisson duration", r#"{"pattern": "poisson", "load": 0.5, "cdf": "web-search", "duration": "2ms"}"#.into()),
        ("poisson flows", r#"{"pattern": "poisson", "load": 0.3, "cdf": "fb-hadoop", "flows": 500, "start": "10us", "hosts": [0, 1, 2, 3, 4, 5]}"#.into()),
        ("poisson both", r#"{"pattern": "poisson", "load": 0.8, "cdf": "google-rpc", "flows": 300, "duration": "100us"}"#.into()),
        ("hpcc", r#"{"pattern": "hpcc", "file": "flows.txt"}"#.into()),
        ("hpcc topology", r#"{"pattern": "hpcc", "file": "flows.txt", "topology": "topo.txt"}"#.into()),
        ("flows", r#"{"pattern": "flows", "flows": [{"src": 0, "dst": 1, "size": "1MB"}, {"src": 3, "dst": 2, "size": 10, "start": "5us", "priority": 1, "dport": 4791}]}"#.into()),
    ]
}

/// (name, flows, hash of the flow list) per pattern, seed 7, table index 2, on 16 hosts at
/// 100 Gb/s, from 8b41db9.
const FLOWS: &[(&str, usize, u64)] = &[
    ("permutation", 16, 10805110988519441571),
    ("permutation hosts", 5, 966006972622565456),
    ("permutation cross", 8, 3818897787659437789),
    ("permutation both", 16, 4767430783103803535),
    ("incast count", 7, 5996509203172721708),
    ("incast list", 3, 1643957504203034469),
    ("all-to-all", 240, 4410997289091383399),
    ("all-to-all hosts", 6, 1614027191868925861),
    ("poisson duration", 118, 8395923393718858740),
    ("poisson flows", 500, 15903563286369528904),
    ("poisson both", 300, 15098067285000617550),
    ("hpcc", 3, 3889101061771442060),
    ("hpcc topology", 3, 3889101061771442060),
    ("flows", 2, 9445848864565745570),
];

fn flows_text(f: &[braid_topo::FlowDesc]) -> String {
    let mut s = String::new();
    for f in f {
        writeln!(
            s,
            "{} {} {} {} {} {}",
            f.src, f.dst, f.size, f.start_ps, f.priority, f.dport
        )
        .unwrap();
    }
    s
}

#[test]
fn every_traffic_pattern_generates_the_pinned_flows() {
    let dir = scratch();
    let mut got = Vec::new();
    for (name, j) in patterns() {
        let t = traffic(&j).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The hpcc patterns' node ids are those of the 4-host file; the others run on 16 hosts.
        let (hosts, rate) = if name.starts_with("hpcc") {
            (4, 100_000_000_000)
        } else {
            (16, 100_000_000_000)
        };
        let f = t
            .generate(hosts, rate, 7, 2, &dir)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let back = traffic(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t, "{name}");
        got.push((name, f.len(), fnv(&flows_text(&f))));
    }
    // generate_on maps HPCC node ids through the graph: same flows as with the file named.
    let g = topo(r#"{"kind": "hpcc", "file": "topo.txt"}"#)
        .unwrap()
        .build(&dir)
        .unwrap();
    let on = traffic(r#"{"pattern": "hpcc", "file": "flows.txt"}"#)
        .unwrap()
        .generate_on(&g, 7, 2, &dir)
        .unwrap();
    got.push(("hpcc on graph", on.len(), fnv(&flows_text(&on))));
    let got_text = format!("{got:#?}");
    let mut want: Vec<_> = FLOWS.to_vec();
    want.push(("hpcc on graph", 3, 3889101061771442060));
    assert_eq!(got, want, "\n{got_text}");
}

/// Tables that must be refused, each with its message (deserialising or building).
fn bad_tables() -> Vec<String> {
    let dir = Path::new(".");
    let mut out = Vec::new();
    let topos = [
        r#"{"kind": "leaf-spine", "spines": 0, "leaves": 4, "hosts_per_leaf": 5, "host_link": {"rate": "1Gbps", "delay": "1us"}, "fabric_link": {"rate": "1Gbps", "delay": "1us"}}"#,
        r#"{"kind": "leaf-spine", "spines": 1, "leaves": 4, "hosts_per_leaf": 5, "host_link": {"rate": "1Gbps", "delay": "1us"}}"#,
        r#"{"kind": "leaf-spine", "spines": 1, "leaves": 4, "hosts_per_leaf": 5, "host_link": {"rate": "1Gbps", "delay": "1us"}, "fabric_link": {"rate": "1Gbps", "delay": "1us"}, "extra": 1}"#,
        r#"{"kind": "fat-tree", "k": 3, "host_link": {"rate": "1Gbps", "delay": "1us"}, "fabric_link": {"rate": "1Gbps", "delay": "1us"}}"#,
        r#"{"kind": "fat-tree", "k": 2400, "host_link": {"rate": "1Gbps", "delay": "1us"}, "fabric_link": {"rate": "1Gbps", "delay": "1us"}}"#,
        r#"{"kind": "fat-tree", "k": 4, "host_link": {"rate": "1Gbps", "delay": "1us", "loss": 2}, "fabric_link": {"rate": "1Gbps", "delay": "1us"}}"#,
        r#"{"kind": "two-tor", "hosts_per_tor": 2, "paths": 0, "host_link": {"rate": "1Gbps", "delay": "1us"}, "fabric_link": {"rate": "1Gbps", "delay": "1us"}}"#,
        r#"{"kind": "dumbbell", "left": 2, "right": 3, "host_link": {"rate": "0Gbps", "delay": "1us"}, "bottleneck": {"rate": "1Gbps", "delay": "1us"}}"#,
        r#"{"kind": "edges", "nodes": ["a", "a"], "switches": [], "links": []}"#,
        r#"{"kind": "edges", "nodes": 2, "switches": [0, 1], "links": []}"#,
        r#"{"kind": "edges", "nodes": 2, "switches": ["x"], "links": []}"#,
        r#"{"kind": "edges", "nodes": 2, "switches": [], "links": [{"a": 0, "b": 0, "rate": "1Gbps", "delay": "1us"}]}"#,
        r#"{"kind": "hpcc", "file": "x.txt", "default_loss": 3}"#,
        r#"{"kind": "torus", "n": 3}"#,
        r#"{"spines": 3}"#,
    ];
    for j in topos {
        out.push(match topo(j) {
            Err(m) => format!("de {m}"),
            Ok(t) => format!(
                "build {}",
                t.build(dir).err().map_or("ok".into(), |e| e.to_string())
            ),
        });
    }
    let pats = [
        r#"{"pattern": "permutation", "size": 0}"#,
        r#"{"pattern": "permutation", "size": 10, "both_ways": true}"#,
        r#"{"pattern": "permutation", "size": 10, "cross": true, "hosts": [1, 2, 3]}"#,
        r#"{"pattern": "permutation", "size": 10, "hosts": [1, 1]}"#,
        r#"{"pattern": "permutation", "size": 10, "priority": 9}"#,
        r#"{"pattern": "incast", "senders": 16, "receiver": 0, "size": 10}"#,
        r#"{"pattern": "incast", "senders": [0], "receiver": 0, "size": 10}"#,
        r#"{"pattern": "incast", "senders": [], "receiver": 0, "size": 10}"#,
        r#"{"pattern": "incast", "senders": [1], "receiver": 20, "size": 10}"#,
        r#"{"pattern": "all-to-all", "hosts": [3], "size": 10}"#,
        r#"{"pattern": "poisson", "load": 1.5, "cdf": "web-search", "flows": 3}"#,
        r#"{"pattern": "poisson", "load": 0.5, "cdf": "web-search"}"#,
        r#"{"pattern": "poisson", "load": 0.5, "cdf": "no-such-cdf", "flows": 3}"#,
        r#"{"pattern": "poisson", "load": 0.5, "cdf": "web-search", "flows": 0}"#,
        r#"{"pattern": "poisson", "load": 0.5, "cdf": "web-search", "duration": "0s"}"#,
        r#"{"pattern": "poisson", "load": 0.5, "cdf": "web-search", "flows": 100000000}"#,
        r#"{"pattern": "flows", "flows": [{"src": 1, "dst": 1, "size": 3}]}"#,
        r#"{"pattern": "flows", "flows": [{"src": 1, "dst": 2, "size": 3, "priority": 8}]}"#,
        r#"{"pattern": "flows", "flows": [{"src": 1, "dst": 2, "size": 3, "color": 8}]}"#,
        r#"{"pattern": "zipf", "size": 3}"#,
        r#"{"size": 3}"#,
    ];
    for j in pats {
        out.push(match traffic(j) {
            Err(m) => format!("de {m}"),
            Ok(t) => format!(
                "generate {}",
                t.generate(16, 100_000_000_000, 1, 0, dir)
                    .err()
                    .map_or("ok".into(), |e| e.to_string())
            ),
        });
    }
    out
}

#[test]
fn refusals_keep_their_messages() {
    let msgs = bad_tables();
    let text = msgs.join("\n");
    // Re-pinned once, for one intended change: a CDF that is no file now reads "...: no such
    // file" (issue 28's input readers quote no OS error text) instead of the OS error.
    assert_eq!(fnv(&text), 5763297772773480814, "\n{text}");
}

#[test]
fn schemas_are_unchanged() {
    let t = serde_json::to_string(&schemars::schema_for!(TopologySpec)).unwrap();
    let f = serde_json::to_string(&schemars::schema_for!(TrafficSpec)).unwrap();
    assert_eq!(
        (fnv(&t), fnv(&f)),
        (8457415060197660576, 1924261739515871811),
        "\n{t}\n{f}"
    );
}
