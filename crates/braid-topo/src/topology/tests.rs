use super::*;

fn link(rate: &str, delay: &str) -> LinkSpec {
    LinkSpec {
        rate: rate.parse().unwrap(),
        delay: delay.parse().unwrap(),
        loss: 0.0,
    }
}

fn degree(g: &Graph, n: u32) -> usize {
    g.links.iter().filter(|l| l.a == n || l.b == n).count()
}

fn from_json(j: &str) -> Result<TopologySpec, String> {
    let de = &mut serde_json::Deserializer::from_str(j);
    serde_path_to_error::deserialize(de).map_err(|e| format!("{}: {}", e.path(), e.inner()))
}

#[test]
fn fat_tree_k4() {
    let t = TopologySpec::FatTree(crate::topology::FatTree {
        k: 4,
        host_link: link("100Gbps", "1us"),
        fabric_link: link("400Gbps", "1us"),
        core_link: None,
    });
    let g = t.build(Path::new(".")).unwrap();
    assert_eq!(g.n_hosts(), 16);
    assert_eq!(g.n_switches(), 20);
    assert_eq!(g.links.len(), 48);
    g.check().unwrap();
    // Every switch has k ports; hosts have one.
    for s in g.switches() {
        assert_eq!(degree(&g, s), 4, "{}", g.nodes[s as usize].name);
    }
    for h in g.hosts() {
        assert_eq!(degree(&g, h), 1);
    }
    // Host i under edge i / 2.
    assert_eq!(g.node_by_name("edge1").unwrap(), 16 + 1);
    let e = g.links.iter().find(|l| l.a == 3).unwrap();
    assert_eq!(g.nodes[e.b as usize].name, "edge1");
    assert_eq!(
        g.nodes[g.node_by_name("core3").unwrap() as usize].kind,
        NodeKind::Switch
    );
    assert_eq!(t.n_hosts(Path::new(".")).unwrap(), 16);
}

#[test]
fn fat_tree_k24_is_light() {
    let t = TopologySpec::FatTree(crate::topology::FatTree {
        k: 24,
        host_link: link("100Gbps", "1us"),
        fabric_link: link("100Gbps", "1us"),
        core_link: Some(link("400Gbps", "2us")),
    });
    let g = t.build(Path::new(".")).unwrap();
    assert_eq!(g.n_hosts(), 3456);
    assert_eq!(g.n_switches(), 5 * 24 * 24 / 4);
    assert_eq!(g.links.len(), 3 * 3456);
    assert_eq!(
        g.links
            .iter()
            .filter(|l| l.rate_bps == 400_000_000_000)
            .count(),
        3456
    );
    g.check().unwrap();
}

#[test]
fn fat_tree_bad_k() {
    let t = TopologySpec::FatTree(crate::topology::FatTree {
        k: 5,
        host_link: link("1Gbps", "1us"),
        fabric_link: link("1Gbps", "1us"),
        core_link: None,
    });
    assert_eq!(t.build(Path::new(".")).unwrap_err().path, "k");
}

#[test]
fn leaf_spine_structure() {
    let t = TopologySpec::LeafSpine(crate::topology::LeafSpine {
        spines: 4,
        leaves: 32,
        hosts_per_leaf: 10,
        host_link: link("40Gbps", "1us"),
        fabric_link: link("100Gbps", "1us"),
    });
    let g = t.build(Path::new(".")).unwrap();
    assert_eq!(g.n_hosts(), 320);
    assert_eq!(g.n_switches(), 36);
    assert_eq!(g.links.len(), 320 + 4 * 32);
    assert_eq!(g.hosts(), (0..320).collect::<Vec<_>>());
    for l in 0..32 {
        let leaf = g.node_by_name(&format!("leaf{l}")).unwrap();
        assert_eq!(degree(&g, leaf), 10 + 4);
    }
    for s in 0..4 {
        let sp = g.node_by_name(&format!("spine{s}")).unwrap();
        assert_eq!(degree(&g, sp), 32);
    }
    // host 25 under leaf 2
    let l = g.links.iter().find(|l| l.a == 25).unwrap();
    assert_eq!(g.nodes[l.b as usize].name, "leaf2");
    assert_eq!(l.rate_bps, 40_000_000_000);
    assert_eq!(l.delay_ps, 1_000_000);
    assert_eq!(g.host_link_rate(25), Some(40_000_000_000));
}

#[test]
fn two_tor_structure() {
    let t: TopologySpec = from_json(
        r#"{"kind":"two-tor","hosts_per_tor":5,"paths":4,
            "host_link":{"rate":"40Gbps","delay":"1us"},"fabric_link":{"rate":"40Gbps","delay":"1us","loss":0.0}}"#,
    )
    .unwrap();
    let g = t.build(Path::new(".")).unwrap();
    assert_eq!(g.n_hosts(), 10);
    assert_eq!(g.n_switches(), 6);
    assert_eq!(g.links.len(), 10 + 8);
    let tor0 = g.node_by_name("tor0").unwrap();
    let tor1 = g.node_by_name("tor1").unwrap();
    assert_eq!(degree(&g, tor0), 5 + 4);
    assert_eq!(degree(&g, tor1), 5 + 4);
    for h in 0..10u32 {
        let l = g.links.iter().find(|l| l.a == h).unwrap();
        assert_eq!(l.b, if h < 5 { tor0 } else { tor1 });
    }
    for s in 0..4 {
        let sp = g.node_by_name(&format!("spine{s}")).unwrap();
        assert_eq!(degree(&g, sp), 2);
    }
}

#[test]
fn dumbbell_structure() {
    let t = TopologySpec::Dumbbell(crate::topology::Dumbbell {
        left: 3,
        right: 2,
        host_link: link("10Gbps", "1us"),
        bottleneck: link("1Gbps", "10us"),
    });
    let g = t.build(Path::new(".")).unwrap();
    assert_eq!((g.n_hosts(), g.n_switches(), g.links.len()), (5, 2, 6));
    let (l, r) = (
        g.node_by_name("swL").unwrap(),
        g.node_by_name("swR").unwrap(),
    );
    assert_eq!(degree(&g, l), 4);
    assert_eq!(degree(&g, r), 3);
    assert!(g
        .links
        .iter()
        .any(|x| x.a == l && x.b == r && x.rate_bps == 1_000_000_000));
}

#[test]
fn edges_by_names_and_ids() {
    let t: TopologySpec = from_json(
        r#"{"kind":"edges","nodes":["a","b","sw"],"switches":["sw"],
            "links":[{"a":"a","b":"sw","rate":"10Gbps","delay":"1us"},{"a":1,"b":2,"rate":"10Gbps","delay":"1us","loss":0.01}]}"#,
    )
    .unwrap();
    let g = t.build(Path::new(".")).unwrap();
    assert_eq!(g.hosts(), vec![0, 1]);
    assert_eq!(g.links[1].loss, 0.01);
    let t: TopologySpec = from_json(r#"{"kind":"edges","nodes":3,"switches":[0],"links":[{"a":1,"b":0,"rate":"1Gbps","delay":"1us"},{"a":2,"b":"n0","rate":"1Gbps","delay":"1us"}]}"#).unwrap();
    let g = t.build(Path::new(".")).unwrap();
    assert_eq!(g.hosts(), vec![1, 2]);
    assert_eq!(g.host_index(2), Some(1));
    assert_eq!(g.host_index(0), None);
    assert_eq!(g.nodes[0].name, "n0");
    let bad: TopologySpec = from_json(r#"{"kind":"edges","nodes":3,"switches":[0],"links":[{"a":1,"b":"nope","rate":"1Gbps","delay":"1us"}]}"#).unwrap();
    assert_eq!(bad.build(Path::new(".")).unwrap_err().path, "links[0].b");
    let bad: TopologySpec =
        from_json(r#"{"kind":"edges","nodes":3,"switches":[7],"links":[]}"#).unwrap();
    assert_eq!(bad.build(Path::new(".")).unwrap_err().path, "switches[0]");
}

#[test]
fn bad_input_names_the_key() {
    let e = from_json(r#"{"kind":"two-tor","hosts_per_tor":5,"paths":4,"host_link":{"rate":"40","delay":"1us"},"fabric_link":{"rate":"40Gbps","delay":"1us"}}"#).unwrap_err();
    assert!(e.starts_with("host_link.rate:"), "{e}");
    assert!(e.contains("expected a rate like \"40Gbps\""), "{e}");
    let e = from_json(r#"{"kind":"two-tor","hosts_per_tor":5,"paths":4,"host_link":{"rate":"40Gbps","delay":"1us","lost":1},"fabric_link":{"rate":"40Gbps","delay":"1us"}}"#).unwrap_err();
    assert!(e.contains("lost"), "{e}");
    let e = from_json(r#"{"kind":"ring","n":3}"#).unwrap_err();
    assert!(e.contains("ring"), "{e}");
    let e = from_json(r#"{"kind":"dumbbell","left":1,"right":1,"host_link":{"rate":"1Gbps","delay":"1us"},"bottleneck":{"rate":"1Gbps","delay":"1us"},"extra":1}"#).unwrap_err();
    assert!(e.contains("extra"), "{e}");
    let t = TopologySpec::LeafSpine(crate::topology::LeafSpine {
        spines: 0,
        leaves: 2,
        hosts_per_leaf: 2,
        host_link: link("1Gbps", "1us"),
        fabric_link: link("1Gbps", "1us"),
    });
    assert_eq!(t.build(Path::new(".")).unwrap_err().path, "spines");
    let mut bl = link("1Gbps", "1us");
    bl.loss = 1.5;
    let t = TopologySpec::Dumbbell(crate::topology::Dumbbell {
        left: 1,
        right: 1,
        host_link: link("1Gbps", "1us"),
        bottleneck: bl,
    });
    assert_eq!(t.build(Path::new(".")).unwrap_err().path, "bottleneck.loss");
}

#[test]
fn hpcc_default_loss_fills_lossless_links() {
    let dir = std::env::temp_dir().join(format!("braid-topo-loss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("t.txt"),
        "3 1 2\n0\n0 1 10Gbps 1us 0.05\n0 2 10Gbps 1us 0\n",
    )
    .unwrap();
    let g = TopologySpec::Hpcc(crate::topology::Hpcc {
        file: "t.txt".into(),
        default_loss: Some(0.01),
    })
    .build(&dir)
    .unwrap();
    assert_eq!((g.links[0].loss, g.links[1].loss), (0.05, 0.01));
    let e = TopologySpec::Hpcc(crate::topology::Hpcc {
        file: "t.txt".into(),
        default_loss: Some(2.0),
    })
    .build(&dir)
    .unwrap_err();
    assert_eq!(e.path, "default_loss");
    let e = TopologySpec::Hpcc(crate::topology::Hpcc {
        file: "missing.txt".into(),
        default_loss: None,
    })
    .build(&dir)
    .unwrap_err();
    assert_eq!(e.path, "file");
    assert!(e.message.contains("missing.txt"), "{}", e.message);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn serde_round_trip_and_schema() {
    let t = TopologySpec::FatTree(crate::topology::FatTree {
        k: 4,
        host_link: link("100Gbps", "1us"),
        fabric_link: link("400Gbps", "1us"),
        core_link: None,
    });
    let j = serde_json::to_string(&t).unwrap();
    assert!(j.contains("\"kind\":\"fat-tree\""), "{j}");
    assert_eq!(serde_json::from_str::<TopologySpec>(&j).unwrap(), t);
    let s = serde_json::to_string(&schemars::schema_for!(TopologySpec)).unwrap();
    assert!(s.contains("leaf-spine") && s.contains("hpcc"));
}
