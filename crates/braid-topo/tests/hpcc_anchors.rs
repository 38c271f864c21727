//! The HPCC ns-3 reference inputs in `../shared/anchors/hpcc` (beside the repository) load with
//! the expected shapes. Skipped, with a note, where that directory is absent (users' machines).

use braid_topo::topology::{NodeKind, TopologySpec};
use braid_topo::traffic::TrafficSpec;
use braid_topo::Cdf;
use std::path::PathBuf;

fn anchors() -> Option<PathBuf> {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        std::env::var_os("BRAID_ANCHORS").map(PathBuf::from),
        Some(here.join("../../../shared/anchors/hpcc")),
        Some(PathBuf::from("/work/shared/anchors/hpcc")),
    ];
    for c in candidates.into_iter().flatten() {
        if c.join("topology-fattree-320.txt").is_file() {
            return Some(c);
        }
    }
    eprintln!("skipping: HPCC anchor files (../shared/anchors/hpcc) not found");
    None
}

#[test]
fn fat_tree_320_and_websearch_flows() {
    let Some(dir) = anchors() else { return };
    let topo = TopologySpec::Hpcc(braid_topo::topology::Hpcc {
        file: "topology-fattree-320.txt".into(),
        default_loss: None,
    });
    let g = topo.build(&dir).unwrap();
    assert_eq!(g.nodes.len(), 376);
    assert_eq!(g.n_hosts(), 320);
    assert_eq!(g.n_switches(), 56);
    assert_eq!(g.links.len(), 480);
    assert_eq!(g.hosts(), (0..320).collect::<Vec<_>>());
    assert!(g.nodes[320..].iter().all(|n| n.kind == NodeKind::Switch));
    assert_eq!(
        g.links
            .iter()
            .filter(|l| l.rate_bps == 100_000_000_000)
            .count(),
        320
    );
    assert_eq!(
        g.links
            .iter()
            .filter(|l| l.rate_bps == 400_000_000_000)
            .count(),
        160
    );
    assert!(g
        .links
        .iter()
        .all(|l| l.delay_ps == 1_000_000 && l.loss == 0.0));
    g.check().unwrap();

    let t = TrafficSpec::Hpcc(braid_topo::traffic::Hpcc {
        file: "flows-websearch-320h-30pct-5ms.txt".into(),
        topology: None,
    });
    let f = t.generate_on(&g, 1, 0, &dir).unwrap();
    assert_eq!(f.len(), 3100);
    let total: u64 = f.iter().map(|x| x.size).sum();
    assert!((5.23e9..5.25e9).contains(&(total as f64)), "{total}");
    assert!(f.iter().all(|x| x.src < 320
        && x.dst < 320
        && x.src != x.dst
        && x.priority == 3
        && x.dport == 100));
    assert!(f.windows(2).all(|w| w[0].start_ps <= w[1].start_ps));
    assert_eq!(f[0].start_ps, 2_000_000_261_000);
    assert!(f.last().unwrap().start_ps < 2_005_000_000_000);
    // Plain generate() agrees here, since hosts are nodes 0..320.
    assert_eq!(t.generate(320, 100_000_000_000, 1, 0, &dir).unwrap(), f);
    // The flows look like web-search: mean close to the CDF's.
    let mean = total as f64 / f.len() as f64;
    let cdf_mean = Cdf::builtin("web-search").unwrap().mean();
    assert!((mean / cdf_mean - 1.0).abs() < 0.15, "{mean} vs {cdf_mean}");
}

#[test]
fn star_65_incast() {
    let Some(dir) = anchors() else { return };
    let g = TopologySpec::Hpcc(braid_topo::topology::Hpcc {
        file: "topology-star-65.txt".into(),
        default_loss: None,
    })
    .build(&dir)
    .unwrap();
    assert_eq!(
        (g.nodes.len(), g.n_hosts(), g.n_switches(), g.links.len()),
        (66, 65, 1, 65)
    );
    assert_eq!(g.nodes[0].kind, NodeKind::Switch);
    assert_eq!(g.node_by_name("n0"), Some(0));
    // "0.001ms" delays.
    assert!(g
        .links
        .iter()
        .all(|l| l.delay_ps == 1_000_000 && l.rate_bps == 100_000_000_000));
    // Switch is node 0: flows from nodes 2, 3 to node 1 are hosts 1, 2 → host 0.
    let t = TrafficSpec::Hpcc(braid_topo::traffic::Hpcc {
        file: "flows-incast-2to1.txt".into(),
        topology: None,
    });
    let f = t.generate_on(&g, 1, 0, &dir).unwrap();
    assert_eq!(f.len(), 2);
    assert_eq!((f[0].src, f[0].dst, f[1].src, f[1].dst), (1, 0, 2, 0));
    assert!(f
        .iter()
        .all(|x| x.size == 200_000_000 && x.start_ps == 2_000_000_000_000));
    // generate() without the graph would assume hosts are nodes 0..65 (wrong for this file);
    // naming the topology file in the traffic table makes it map correctly.
    let with_topo = TrafficSpec::Hpcc(braid_topo::traffic::Hpcc {
        file: "flows-incast-2to1.txt".into(),
        topology: Some("topology-star-65.txt".into()),
    });
    assert_eq!(
        with_topo.generate(65, 100_000_000_000, 1, 0, &dir).unwrap(),
        f
    );
}

#[test]
fn anchor_cdfs_match_the_built_ins() {
    let Some(dir) = anchors() else { return };
    for (file, name) in [
        ("cdf-WebSearch_distribution.txt", "web-search"),
        ("cdf-FbHdp_distribution.txt", "fb-hadoop"),
        ("cdf-AliStorage2019.txt", "ali-storage"),
        ("cdf-GoogleRPC2008.txt", "google-rpc"),
    ] {
        let from_file = Cdf::load(dir.join(file).to_str().unwrap(), &dir).unwrap();
        assert_eq!(from_file, Cdf::builtin(name).unwrap(), "{file}");
    }
}
