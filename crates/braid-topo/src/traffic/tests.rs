use super::*;
use crate::cdf::Cdf;
use crate::topology::TopologySpec;

fn from_json(j: &str) -> Result<TrafficSpec, String> {
    let de = &mut serde_json::Deserializer::from_str(j);
    serde_path_to_error::deserialize(de).map_err(|e| format!("{}: {}", e.path(), e.inner()))
}

fn gen(j: &str, n: u32, seed: u64) -> Result<Vec<FlowDesc>, SpecError> {
    from_json(j)
        .unwrap()
        .generate(n, 100_000_000_000, seed, 0, Path::new("."))
}

#[test]
fn permutation_is_a_derangement() {
    for seed in 0..50 {
        let f = gen(r#"{"pattern":"permutation","size":"1MB"}"#, 10, seed).unwrap();
        assert_eq!(f.len(), 10);
        let srcs: HashSet<u32> = f.iter().map(|x| x.src).collect();
        let dsts: HashSet<u32> = f.iter().map(|x| x.dst).collect();
        assert_eq!(srcs.len(), 10);
        assert_eq!(dsts.len(), 10);
        assert!(f
            .iter()
            .all(|x| x.src != x.dst && x.size == 1_000_000 && x.start_ps == 0));
    }
    // Subset.
    let f = gen(
        r#"{"pattern":"permutation","size":1000,"hosts":[3,5,7],"start":"1us"}"#,
        10,
        1,
    )
    .unwrap();
    assert_eq!(f.len(), 3);
    assert!(f.iter().all(|x| [3, 5, 7].contains(&x.src)
        && [3, 5, 7].contains(&x.dst)
        && x.src != x.dst
        && x.start_ps == 1_000_000));
    // Permutations vary with the seed.
    let a = gen(r#"{"pattern":"permutation","size":"1MB"}"#, 32, 1).unwrap();
    let b = gen(r#"{"pattern":"permutation","size":"1MB"}"#, 32, 2).unwrap();
    assert_ne!(a, b);
}

#[test]
fn permutation_cross_two_tor() {
    for seed in 0..20 {
        let f = gen(
            r#"{"pattern":"permutation","size":"1MB","cross":true}"#,
            10,
            seed,
        )
        .unwrap();
        assert_eq!(f.len(), 5);
        assert!(f.iter().all(|x| x.src < 5 && x.dst >= 5));
        assert_eq!(f.iter().map(|x| x.dst).collect::<HashSet<_>>().len(), 5);
        let f = gen(
            r#"{"pattern":"permutation","size":"1MB","cross":true,"both_ways":true}"#,
            10,
            seed,
        )
        .unwrap();
        assert_eq!(f.len(), 10);
        assert_eq!(f.iter().map(|x| x.dst).collect::<HashSet<_>>().len(), 10);
        assert!(f.iter().all(|x| (x.src < 5) != (x.dst < 5)));
    }
    assert_eq!(
        gen(
            r#"{"pattern":"permutation","size":"1MB","cross":true}"#,
            9,
            0
        )
        .unwrap_err()
        .path,
        "cross"
    );
}

#[test]
fn incast_and_all_to_all() {
    let f = gen(
        r#"{"pattern":"incast","senders":8,"receiver":0,"size":"64KB"}"#,
        10,
        0,
    )
    .unwrap();
    assert_eq!(
        f.iter().map(|x| x.src).collect::<Vec<_>>(),
        (1..9).collect::<Vec<_>>()
    );
    assert!(f.iter().all(|x| x.dst == 0 && x.size == 64_000));
    let f = gen(
        r#"{"pattern":"incast","senders":[2,3],"receiver":1,"size":"200MB","start":"2s"}"#,
        65,
        0,
    )
    .unwrap();
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].start_ps, 2_000_000_000_000);
    let f = gen(r#"{"pattern":"all-to-all","size":"1KB"}"#, 5, 0).unwrap();
    assert_eq!(f.len(), 20);
    let f = gen(
        r#"{"pattern":"all-to-all","size":"1KB","hosts":[0,4,2]}"#,
        5,
        0,
    )
    .unwrap();
    assert_eq!(f.len(), 6);
}

#[test]
fn bad_input_names_the_key() {
    assert_eq!(
        gen(
            r#"{"pattern":"incast","senders":[2,30],"receiver":1,"size":"1MB"}"#,
            10,
            0
        )
        .unwrap_err()
        .path,
        "senders[1]"
    );
    assert_eq!(
        gen(
            r#"{"pattern":"incast","senders":[1],"receiver":1,"size":"1MB"}"#,
            10,
            0
        )
        .unwrap_err()
        .path,
        "senders[0]"
    );
    assert_eq!(
        gen(
            r#"{"pattern":"incast","senders":10,"receiver":1,"size":"1MB"}"#,
            10,
            0
        )
        .unwrap_err()
        .path,
        "senders"
    );
    assert_eq!(
        gen(
            r#"{"pattern":"incast","senders":3,"receiver":10,"size":"1MB"}"#,
            10,
            0
        )
        .unwrap_err()
        .path,
        "receiver"
    );
    assert_eq!(
        gen(r#"{"pattern":"permutation","size":0}"#, 10, 0)
            .unwrap_err()
            .path,
        "size"
    );
    assert_eq!(
        gen(
            r#"{"pattern":"permutation","size":"1MB","hosts":[1,1]}"#,
            10,
            0
        )
        .unwrap_err()
        .path,
        "hosts[1]"
    );
    assert_eq!(
        gen(
            r#"{"pattern":"poisson","load":1.5,"cdf":"web-search","duration":"1ms"}"#,
            10,
            0
        )
        .unwrap_err()
        .path,
        "load"
    );
    assert_eq!(
        gen(
            r#"{"pattern":"poisson","load":0.5,"cdf":"nope","duration":"1ms"}"#,
            10,
            0
        )
        .unwrap_err()
        .path,
        "cdf"
    );
    assert_eq!(
        gen(
            r#"{"pattern":"poisson","load":0.5,"cdf":"web-search"}"#,
            10,
            0
        )
        .unwrap_err()
        .path,
        "duration"
    );
    assert_eq!(gen(r#"{"pattern":"flows","flows":[{"src":0,"dst":1,"size":"1KB"},{"src":0,"dst":0,"size":"1KB"}]}"#, 10, 0).unwrap_err().path, "flows[1].dst");
    assert_eq!(
        gen(
            r#"{"pattern":"flows","flows":[{"src":0,"dst":1,"size":"1KB","priority":9}]}"#,
            10,
            0
        )
        .unwrap_err()
        .path,
        "flows[0].priority"
    );
    let e =
        from_json(r#"{"pattern":"incast","senders":[2],"receiver":1,"size":"1MB","start":"5"}"#)
            .unwrap_err();
    assert!(
        e.starts_with("start:") && e.contains("expected a duration like"),
        "{e}"
    );
    let e = from_json(r#"{"pattern":"permutation","size":"1MB","sise":1}"#).unwrap_err();
    assert!(e.contains("sise"), "{e}");
    let e = from_json(r#"{"pattern":"flows","flows":[{"src":0,"dst":1,"size":"1KB","bogus":1}]}"#)
        .unwrap_err();
    assert!(e.starts_with("flows[0]") && e.contains("bogus"), "{e}");
    let e = from_json(r#"{"pattern":"zigzag"}"#).unwrap_err();
    assert!(e.contains("zigzag"), "{e}");
}

#[test]
fn explicit_flows() {
    let f = gen(r#"{"pattern":"flows","flows":[{"src":0,"dst":1,"size":"1KB","start":"3us","priority":1,"dport":7}]}"#, 2, 0).unwrap();
    assert_eq!(
        f,
        vec![FlowDesc {
            src: 0,
            dst: 1,
            size: 1000,
            start_ps: 3_000_000,
            priority: 1,
            dport: 7
        }]
    );
}

fn poisson(load: f64, cdf: &str, n_hosts: u32, dur: &str, seed: u64) -> Vec<FlowDesc> {
    let j = format!(
        r#"{{"pattern":"poisson","load":{load},"cdf":"{cdf}","duration":"{dur}","start":"1ms"}}"#
    );
    gen(&j, n_hosts, seed).unwrap()
}

#[test]
fn poisson_offered_load() {
    // 16 hosts at 100 Gb/s, 40% load, web-search (mean ≈ 1.14 MB): ≈ 70,000 flows in 1 s.
    let (n, rate, load) = (16u32, 100e9, 0.4);
    let f = poisson(load, "web-search", n, "1s", 7);
    let bytes: u64 = f.iter().map(|x| x.size).sum();
    let offered = bytes as f64 * 8.0 / (n as f64 * rate * 1.0);
    assert!(
        (offered - load).abs() / load < 0.03,
        "offered {offered} vs {load} ({} flows)",
        f.len()
    );
    assert!(f.windows(2).all(|w| w[0].start_ps <= w[1].start_ps));
    assert!(f
        .iter()
        .all(|x| x.src != x.dst && x.start_ps >= 1_000_000_000 && x.start_ps < 1_001_000_000_000));
    // Every host sends and receives about the same.
    let mut per = vec![0u32; n as usize];
    for x in &f {
        per[x.src as usize] += 1;
    }
    let mean = f.len() as f64 / n as f64;
    assert!(
        per.iter().all(|&c| (c as f64 - mean).abs() < 0.1 * mean),
        "{per:?}"
    );
    // fb-hadoop too.
    let f = poisson(0.3, "fb-hadoop", 8, "200ms", 3);
    let bytes: u64 = f.iter().map(|x| x.size).sum();
    let offered = bytes as f64 * 8.0 / (8.0 * rate * 0.2);
    assert!((offered - 0.3).abs() / 0.3 < 0.05, "offered {offered}");
}

/// Kolmogorov–Smirnov-style check of the sampled sizes against the CDF. Sizes are truncated
/// to whole bytes (at least 1), so P(size <= x) = F(x + 1 - ε) for the piecewise-linear F.
fn ks_check(cdf_name: &str, sizes: &mut [u64]) {
    let c = Cdf::builtin(cdf_name).unwrap();
    let g = |x: u64| c.fraction_at(x as f64 + 1.0 - 1e-7);
    sizes.sort_unstable();
    let n = sizes.len() as f64;
    let tol = 1.63 / n.sqrt(); // KS critical value at the 1% level
    let (mut i, mut worst) = (0usize, 0f64);
    while i < sizes.len() {
        let x = sizes[i];
        let mut j = i;
        while j < sizes.len() && sizes[j] == x {
            j += 1;
        }
        // Just below x (the empirical CDF is flat on [prev, x)) and at x.
        if x > 1 {
            worst = worst.max((i as f64 / n - g(x - 1)).abs());
        }
        worst = worst.max((j as f64 / n - g(x)).abs());
        i = j;
    }
    assert!(worst < tol, "{cdf_name}: KS distance {worst} >= {tol}");
}

#[test]
fn poisson_sizes_follow_the_cdf() {
    for cdf in ["web-search", "data-mining", "fb-hadoop", "google-rpc"] {
        let f = gen(
            &format!(r#"{{"pattern":"poisson","load":0.5,"cdf":"{cdf}","flows":20000}}"#),
            20,
            11,
        )
        .unwrap();
        assert_eq!(f.len(), 20000);
        let mut sizes: Vec<u64> = f.iter().map(|x| x.size).collect();
        ks_check(cdf, &mut sizes);
    }
}

#[test]
fn determinism_by_seed_and_index() {
    let t = from_json(r#"{"pattern":"poisson","load":0.3,"cdf":"web-search","duration":"1ms"}"#)
        .unwrap();
    let a = t
        .generate(64, 100_000_000_000, 5, 0, Path::new("."))
        .unwrap();
    let b = t
        .generate(64, 100_000_000_000, 5, 0, Path::new("."))
        .unwrap();
    let c = t
        .generate(64, 100_000_000_000, 6, 0, Path::new("."))
        .unwrap();
    let d = t
        .generate(64, 100_000_000_000, 5, 1, Path::new("."))
        .unwrap();
    assert!(!a.is_empty());
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(a, d);
}

#[test]
fn cdf_from_file() {
    let dir = std::env::temp_dir().join(format!("braid-topo-cdf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("my.txt"), "100 0\n100 50\n1000 100\n").unwrap();
    let t = from_json(r#"{"pattern":"poisson","load":0.3,"cdf":"my.txt","flows":1000}"#).unwrap();
    let f = t.generate(4, 10_000_000_000, 1, 0, &dir).unwrap();
    assert!(f.iter().all(|x| (100..1000).contains(&x.size)));
    std::fs::write(dir.join("bad.txt"), "100 0\n100 50\n").unwrap();
    let t = from_json(r#"{"pattern":"poisson","load":0.3,"cdf":"bad.txt","flows":1000}"#).unwrap();
    let err = t.generate(4, 10_000_000_000, 1, 0, &dir).unwrap_err();
    assert_eq!(err.path, "cdf");
    assert!(err.message.contains("bad.txt"), "{}", err.message);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn hpcc_flows_map_node_ids_through_the_graph() {
    let dir = std::env::temp_dir().join(format!("braid-topo-hpcc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Star: switch 0, hosts 1..4 (hosts are NOT the lowest ids).
    std::fs::write(
        dir.join("topo.txt"),
        "5 1 4\n0\n0 1 100Gbps 1us 0\n0 2 100Gbps 1us 0\n0 3 100Gbps 1us 0\n0 4 100Gbps 1us 0\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("flow.txt"),
        "2\n2 1 3 100 200000000 2\n3 1 3 100 200000000 2\n",
    )
    .unwrap();
    let g = TopologySpec::Hpcc(crate::topology::Hpcc {
        file: "topo.txt".into(),
        default_loss: None,
    })
    .build(&dir)
    .unwrap();
    let t = TrafficSpec::Hpcc(crate::traffic::Hpcc {
        file: "flow.txt".into(),
        topology: None,
    });
    let f = t.generate_on(&g, 1, 0, &dir).unwrap();
    assert_eq!((f[0].src, f[0].dst, f[1].src), (1, 0, 2));
    assert_eq!(f[0].start_ps, 2_000_000_000_000);
    // With `topology`, plain generate() maps the same way.
    let t2 = TrafficSpec::Hpcc(crate::traffic::Hpcc {
        file: "flow.txt".into(),
        topology: Some("topo.txt".into()),
    });
    assert_eq!(t2.generate(4, 0, 1, 0, &dir).unwrap(), f);
    // Without either, node 4 is beyond host ids 0..3: a clear error.
    std::fs::write(dir.join("flow2.txt"), "1\n4 1 3 100 10 2\n").unwrap();
    let err = TrafficSpec::Hpcc(crate::traffic::Hpcc {
        file: "flow2.txt".into(),
        topology: None,
    })
    .generate(4, 0, 1, 0, &dir)
    .unwrap_err();
    assert_eq!(err.path, "file");
    assert!(
        err.message.contains("node 4 is not a host"),
        "{}",
        err.message
    );
    // A flow from a switch.
    std::fs::write(dir.join("flow3.txt"), "1\n0 1 3 100 10 2\n").unwrap();
    let err = TrafficSpec::Hpcc(crate::traffic::Hpcc {
        file: "flow3.txt".into(),
        topology: None,
    })
    .generate_on(&g, 1, 0, &dir)
    .unwrap_err();
    assert!(
        err.message.contains("node 0 is a switch"),
        "{}",
        err.message
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn poisson_yields_its_flows_lazily_in_arrival_order() {
    let t: TrafficSpec = serde_json::from_str(
        r#"{"pattern": "poisson", "load": 0.5, "cdf": "web-search", "flows": 400}"#,
    )
    .unwrap();
    let dir = Path::new(".");
    let all = t.generate(8, 100_000_000_000, 3, 0, dir).unwrap();
    assert_eq!(all.len(), 400);
    assert!(all.windows(2).all(|w| w[0].start_ps <= w[1].start_ps));
    // The first flows, asked for alone, are the run's first flows (what a lazy consumer gets).
    let spec = r#"{"kind": "leaf-spine", "spines": 1, "leaves": 2, "hosts_per_leaf": 4,
        "host_link": {"rate": "100Gbps", "delay": "1us"}, "fabric_link": {"rate": "100Gbps", "delay": "1us"}}"#;
    let g = serde_json::from_str::<TopologySpec>(spec)
        .unwrap()
        .build(dir)
        .unwrap();
    let lazy = t.flows_on(&g, 3, 0, dir).unwrap();
    // A collector reserves for the flows asked for (and some slack), not by doubling.
    assert_eq!(lazy.expected(), 400 + 16);
    let first: Vec<FlowDesc> = lazy.take(10).collect();
    assert_eq!(first, all[..10]);
}
