//! Readers for the HPCC ns-3 simulator's input files (github alibaba-edu/High-Precision-Congestion-
//! Control; formats only, none of its code).
//!
//! Topology file: line 1 `nodes switches links`; then the `switches` switch node ids; then `links`
//! lines `src dst rate delay error_rate` (e.g. `0 320 100Gbps 1000ns 0.000000`). Nodes not listed
//! as switches are hosts. ns-3 reads these with `>>`, so the reader is token-based (line breaks are
//! not significant) but reports the line of every bad token. Anything after the last link is
//! ignored, as ns-3 does.
//!
//! Flow file: the number of flows N, then N lines `src dst priority dport size start_s` (node ids,
//! start time in seconds). Only the first N flows are read.
//!
//! Errors are strings of the form `path:line: message`.

use crate::input::shown;
use crate::topology::{Graph, LinkDesc, NodeDesc, NodeKind};
use crate::traffic::FlowDesc;
use crate::units::{Duration, Rate};
use std::path::Path;

/// One flow of an HPCC flow file, with node ids as in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct HpccFlow {
    pub src: u32,
    pub dst: u32,
    pub priority: u8,
    pub dport: u16,
    pub size: u64,
    pub start_ps: u64,
}

struct Tokens<'a> {
    file: String,
    it: std::iter::Peekable<Box<dyn Iterator<Item = (usize, &'a str)> + 'a>>,
    last_line: usize,
}

impl<'a> Tokens<'a> {
    fn new(path: &Path, text: &'a str) -> Tokens<'a> {
        let it = text
            .lines()
            .enumerate()
            .flat_map(|(i, l)| l.split_whitespace().map(move |t| (i + 1, t)));
        Tokens {
            file: path.display().to_string(),
            it: (Box::new(it) as Box<dyn Iterator<Item = (usize, &'a str)> + 'a>).peekable(),
            last_line: 1,
        }
    }

    fn peek(&mut self) -> Option<&(usize, &'a str)> {
        self.it.peek()
    }

    fn err(&self, line: usize, msg: impl std::fmt::Display) -> String {
        format!("{}:{}: {}", self.file, line, msg)
    }

    fn next(&mut self, what: &str) -> Result<(usize, &'a str), String> {
        match self.it.next() {
            Some((l, t)) => {
                self.last_line = l;
                Ok((l, t))
            }
            None => Err(self.err(self.last_line, format!("file ends early: expected {what}"))),
        }
    }

    fn int<T: std::str::FromStr>(&mut self, what: &str) -> Result<(usize, T), String> {
        let (l, t) = self.next(what)?;
        t.parse::<T>().map(|v| (l, v)).map_err(|_| {
            self.err(
                l,
                format!("expected {what} (a non-negative integer), got {}", shown(t)),
            )
        })
    }
}

fn read(path: &Path, limit: u64) -> Result<String, String> {
    crate::input::read_text(path, limit)
}

/// Reads an HPCC topology file. Node ids are kept; names are `n{id}`.
pub fn read_topology(path: &Path) -> Result<Graph, String> {
    let text = read(path, crate::input::TOPOLOGY_LIMIT)?;
    parse_topology(path, &text)
}

pub fn parse_topology(path: &Path, text: &str) -> Result<Graph, String> {
    let mut t = Tokens::new(path, text);
    let (_, n_nodes) = t.int::<u32>("the number of nodes")?;
    let (l, n_switches) = t.int::<u32>("the number of switches")?;
    let (_, n_links) = t.int::<u64>("the number of links")?;
    if n_nodes == 0 {
        return Err(t.err(1, "the topology has no nodes"));
    }
    if n_nodes > 4_000_000 {
        return Err(t.err(
            1,
            format!("{n_nodes} nodes is more than braid supports (4,000,000)"),
        ));
    }
    if n_switches > n_nodes {
        return Err(t.err(l, format!("{n_switches} switches but only {n_nodes} nodes")));
    }
    let mut nodes: Vec<NodeDesc> = (0..n_nodes)
        .map(|i| NodeDesc {
            kind: NodeKind::Host,
            name: format!("n{i}"),
        })
        .collect();
    for _ in 0..n_switches {
        let (l, id) = t.int::<u32>("a switch node id")?;
        if id >= n_nodes {
            return Err(t.err(
                l,
                format!(
                    "switch {id} does not exist (line 1 declares {n_nodes} nodes: ids 0 to {})",
                    n_nodes - 1
                ),
            ));
        }
        if nodes[id as usize].kind == NodeKind::Switch {
            return Err(t.err(l, format!("switch {id} is listed twice")));
        }
        nodes[id as usize].kind = NodeKind::Switch;
    }
    if n_switches == n_nodes {
        return Err(t.err(l, "every node is a switch; the topology has no hosts"));
    }
    let mut links = Vec::with_capacity(n_links.min(16_000_000) as usize);
    for _ in 0..n_links {
        let (l, a) = t.int::<u32>("a link's source node id")?;
        let (_, b) = t.int::<u32>("a link's destination node id")?;
        for id in [a, b] {
            if id >= n_nodes {
                return Err(t.err(
                    l,
                    format!(
                        "node {id} does not exist (line 1 declares {n_nodes} nodes: ids 0 to {})",
                        n_nodes - 1
                    ),
                ));
            }
        }
        if a == b {
            return Err(t.err(l, format!("link joins node {a} to itself")));
        }
        let (lr, rate) = t.next("a link rate like 100Gbps")?;
        let rate: Rate = rate
            .parse()
            .map_err(|e: crate::units::UnitError| t.err(lr, e))?;
        if rate.0 == 0 {
            return Err(t.err(lr, "link rate must be positive"));
        }
        let (ld, delay) = t.next("a link delay like 1000ns")?;
        let delay: Duration = delay
            .parse()
            .map_err(|e: crate::units::UnitError| t.err(ld, e))?;
        let (le, err) = t.next("a link error rate")?;
        let loss: f64 = err.parse().map_err(|_| {
            t.err(
                le,
                format!("expected an error rate between 0 and 1, got {}", shown(err)),
            )
        })?;
        if !(0.0..=1.0).contains(&loss) {
            return Err(t.err(
                le,
                format!("expected an error rate between 0 and 1, got {}", shown(err)),
            ));
        }
        links.push(LinkDesc {
            a,
            b,
            rate_bps: rate.0,
            delay_ps: delay.0,
            loss,
        });
    }
    Ok(Graph { nodes, links })
}

/// Reads an HPCC flow file.
pub fn read_flows(path: &Path) -> Result<Vec<HpccFlow>, String> {
    let text = read(path, crate::input::FLOWS_LIMIT)?;
    parse_flows(path, &text)
}

pub fn parse_flows(path: &Path, text: &str) -> Result<Vec<HpccFlow>, String> {
    let mut t = Tokens::new(path, text);
    let (_, n) = t.int::<u64>("the number of flows")?;
    let mut flows = Vec::with_capacity(n.min(50_000_000) as usize);
    for i in 0..n {
        // A short file, said in its own terms: the count on line 1 against the flows there are.
        if t.peek().is_none() {
            return Err(t.err(
                t.last_line,
                format!("file ends early: line 1 declares {n} flows, the file has {i}"),
            ));
        }
        let (l, src) = t.int::<u32>("a flow's source node id")?;
        let (_, dst) = t.int::<u32>("a flow's destination node id")?;
        let (lp, priority) = t.int::<u32>("a flow's priority")?;
        if priority > 7 {
            return Err(t.err(lp, format!("priority {priority} is out of range (0–7)")));
        }
        let (_, dport) = t.int::<u16>("a flow's destination port (0–65535)")?;
        let (_, size) = t.int::<u64>("a flow's size in bytes")?;
        let (ls, start) = t.next("a flow's start time in seconds")?;
        let start_ps = parse_seconds(start).ok_or_else(|| {
            t.err(
                ls,
                format!(
                    "expected a start time in seconds like 2.000001, got {}",
                    shown(start)
                ),
            )
        })?;
        if src == dst {
            return Err(t.err(l, format!("flow from node {src} to itself")));
        }
        flows.push(HpccFlow {
            src,
            dst,
            priority: priority as u8,
            dport,
            size,
            start_ps,
        });
    }
    Ok(flows)
}

/// The flows of an HPCC flow file on the host indices of `topology`, the HPCC topology its node
/// ids refer to: read and checked as a run reads `pattern = "hpcc"` with `topology` (every flow
/// between two hosts that exist, none of 0 bytes). `braid import-hpcc` reads the files through
/// this too (braid-py's `hpcc_flows`), so the importer and the run refuse the same files in the
/// same words.
pub fn read_flows_on(path: &Path, topology: &Graph) -> Result<Vec<FlowDesc>, String> {
    let raw = read_flows(path)?;
    let idx = topology.host_index_map();
    to_hosts(path, &raw, |id| graph_host(&idx, id))
}

/// Node id `id` as a host index, through a graph's `host_index_map`.
pub(crate) fn graph_host(idx: &[Option<u32>], id: u32) -> Result<u32, String> {
    match idx.get(id as usize) {
        Some(Some(h)) => Ok(*h),
        Some(None) => Err(format!("node {id} is a switch, not a host")),
        None => Err(format!(
            "node {id} does not exist (the topology has {} nodes)",
            idx.len()
        )),
    }
}

/// `raw` with node ids mapped to host indices by `lookup`; read whole, so a bad line anywhere
/// refuses the file before any flow runs. Errors name the file and the flow.
pub(crate) fn to_hosts(
    path: &Path,
    raw: &[HpccFlow],
    lookup: impl Fn(u32) -> Result<u32, String>,
) -> Result<Vec<FlowDesc>, String> {
    let mut out = Vec::with_capacity(raw.len());
    for (i, f) in raw.iter().enumerate() {
        let at = |m: String| format!("{}: flow {} (of {}): {m}", path.display(), i + 1, raw.len());
        let src = lookup(f.src).map_err(at)?;
        let dst = lookup(f.dst).map_err(at)?;
        if f.size == 0 {
            return Err(at("flow size is 0 bytes".into()));
        }
        out.push(FlowDesc {
            src,
            dst,
            size: f.size,
            start_ps: f.start_ps,
            priority: f.priority,
            dport: f.dport,
        });
    }
    Ok(out)
}

/// Seconds as a plain decimal ("2.000000261", "2", "1e-3") → picoseconds, exactly.
fn parse_seconds(s: &str) -> Option<u64> {
    if s.starts_with(['-', '+']) || s.ends_with(|c: char| !c.is_ascii_digit() && c != '.') {
        return None;
    }
    format!("{s}s").parse::<Duration>().ok().map(|d| d.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn p() -> PathBuf {
        PathBuf::from("t.txt")
    }

    #[test]
    fn small_topology() {
        let g = parse_topology(
            &p(),
            "4 1 3\n0\n0 1 100Gbps 1000ns 0\n0 2 100Gbps 0.001ms 0.01\n0 3 40Gbps 1us 0.000000\n",
        )
        .unwrap();
        assert_eq!(g.hosts(), vec![1, 2, 3]);
        assert_eq!(g.links[1].delay_ps, 1_000_000);
        assert_eq!(g.links[1].loss, 0.01);
        assert_eq!(g.links[2].rate_bps, 40_000_000_000);
        assert_eq!(g.nodes[3].name, "n3");
    }

    #[test]
    fn topology_errors_name_file_and_line() {
        let e =
            parse_topology(&p(), "4 1 3\n0\n0 1 100Gbps 1000ns 0\n0 2 100 1000ns 0\n").unwrap_err();
        assert!(e.starts_with("t.txt:4: expected a rate like"), "{e}");
        let e = parse_topology(&p(), "4 1 3\n0\n0 1 100Gbps 1000ns 0\n").unwrap_err();
        assert!(e.starts_with("t.txt:3: file ends early"), "{e}");
        let e = parse_topology(&p(), "4 1 1\n9\n").unwrap_err();
        assert!(
            e.starts_with("t.txt:2: switch 9 does not exist (line 1 declares 4 nodes"),
            "{e}"
        );
        let e = parse_topology(&p(), "4 1 1\n0\n0 7 1Gbps 1us 0\n").unwrap_err();
        assert!(
            e.starts_with("t.txt:3: node 7 does not exist (line 1 declares 4 nodes: ids 0 to 3)"),
            "{e}"
        );
        let e = parse_topology(&p(), "4 1 1\n0\n0 1 1Gbps 1us 2\n").unwrap_err();
        assert!(e.contains("error rate"), "{e}");
        let e = parse_topology(&p(), "x 1 1\n").unwrap_err();
        assert!(
            e.starts_with("t.txt:1: expected the number of nodes"),
            "{e}"
        );
    }

    #[test]
    fn flows() {
        let f = parse_flows(
            &p(),
            "2\n2 1 3 100 200000000 2\n3 1 3 100 200000000 2.000000261\n9 9 9 9 9 9\n",
        )
        .unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(
            f[0],
            HpccFlow {
                src: 2,
                dst: 1,
                priority: 3,
                dport: 100,
                size: 200_000_000,
                start_ps: 2_000_000_000_000
            }
        );
        assert_eq!(f[1].start_ps, 2_000_000_261_000);
        let e = parse_flows(&p(), "2\n2 1 3 100 200000000 2\n3 1 3 100 -5 2\n").unwrap_err();
        assert!(e.starts_with("t.txt:3: expected a flow's size"), "{e}");
        let e = parse_flows(&p(), "1\n2 1 3 100 5 2s\n").unwrap_err();
        assert!(e.starts_with("t.txt:2: expected a start time"), "{e}");
        let e = parse_flows(&p(), "3\n2 1 3 100 5 2\n").unwrap_err();
        assert!(
            e.starts_with("t.txt:2: file ends early: line 1 declares 3 flows, the file has 1"),
            "{e}"
        );
        // A flow cut short mid-line is its own error.
        let e = parse_flows(&p(), "1\n2 1 3\n").unwrap_err();
        assert!(
            e.contains("file ends early: expected a flow's destination port"),
            "{e}"
        );
    }
}
