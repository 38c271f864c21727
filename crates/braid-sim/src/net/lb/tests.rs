//! Each policy against its definition, on a switch's ports built by hand.

use super::*;
use crate::net::config::EcnCurve;
use crate::packet::{Packet, PktKind};
use braid_engine::RngStream;
use braid_topo::units::{Bytes, Duration};
use serde_json::json;

fn ports(rates_gbps: &[u64]) -> Vec<Port> {
    let ecn = EcnCurve {
        kmin: Bytes(5_000),
        kmax: Bytes(200_000),
        pmax: 0.01,
    };
    rates_gbps
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            let rng = RngStream::new(1, "t", &[i as u64]);
            Port::new(
                100 + i as u32,
                0,
                i as u32,
                r * 1_000_000_000,
                1_000_000,
                0.0,
                1,
                ecn,
                rng,
            )
        })
        .collect()
}

fn build(spec: &LbSpec, ports: &[Port], seed: u64) -> Box<dyn LoadBalancer> {
    let peers: Vec<String> = (0..ports.len()).map(|i| format!("n{i}")).collect();
    let peers: Vec<&str> = peers.iter().map(|s| s.as_str()).collect();
    let site = LbSite {
        switch: 3,
        name: "sw",
        peers: &peers,
        ports,
        seed,
    };
    spec.kind().build(&site).unwrap().expect("a balancer")
}

fn packet(sport: u16) -> Packet {
    let mut pk = Packet::control(PktKind::Data, 1000);
    pk.src = 1;
    pk.dst = 2;
    pk.sport = sport;
    pk.dport = 4791;
    pk
}

/// Picks for `n` packets of one flow at times `t(i)`.
fn picks(
    lb: &mut dyn LoadBalancer,
    ports: &[Port],
    cands: &[u16],
    n: usize,
    hash: impl Fn(usize) -> u64,
    t: impl Fn(usize) -> u64,
) -> Vec<usize> {
    let pk = packet(1);
    (0..n)
        .map(|i| {
            lb.pick(&Pick {
                now: t(i),
                pk: &pk,
                hash: hash(i),
                gid: 7,
                candidates: cands,
                ports,
                behind: &[],
            })
        })
        .collect()
}

fn counts(p: &[usize], n: usize) -> Vec<usize> {
    let mut c = vec![0; n];
    for &i in p {
        c[i] += 1;
    }
    c
}

fn spec(json: serde_json::Value) -> LbSpec {
    serde_json::from_value(json).unwrap()
}

#[test]
fn random_spraying_spreads_one_flows_packets_within_the_binomial_bound() {
    let ps = ports(&[100; 4]);
    let mut lb = build(&spec(json!({"kind": "spray"})), &ps, 1);
    let n = 40_000;
    let c = counts(
        &picks(lb.as_mut(), &ps, &[0, 1, 2, 3], n, |_| 9, |i| i as u64),
        4,
    );
    // Each count is Binomial(n, 1/4): mean 10,000, sd sqrt(n p (1 - p)) = 86.6; 5 sd.
    for k in c.iter() {
        assert!(k.abs_diff(10_000) < 433, "{c:?}");
    }
}

#[test]
fn round_robin_spraying_takes_the_ports_in_turn() {
    let ps = ports(&[100; 3]);
    let mut lb = build(
        &spec(json!({"kind": "spray", "order": "round-robin"})),
        &ps,
        1,
    );
    let p = picks(lb.as_mut(), &ps, &[0, 1, 2], 10, |_| 9, |i| i as u64);
    assert_eq!(p, vec![0, 1, 2, 0, 1, 2, 0, 1, 2, 0]);
}

#[test]
fn adaptive_routing_picks_the_shortest_queue() {
    let mut ps = ports(&[100; 4]);
    for (p, b) in ps.iter_mut().zip([9_000, 3_000, 7_000, 4_000]) {
        p.bytes = b;
    }
    let mut lb = build(&spec(json!({"kind": "adaptive", "samples": 0})), &ps, 1);
    assert_eq!(
        picks(lb.as_mut(), &ps, &[0, 1, 2, 3], 5, |_| 9, |i| i as u64),
        [1; 5]
    );
    // The shortest among the candidates the route gives, not among all ports.
    assert_eq!(
        picks(lb.as_mut(), &ps, &[0, 2], 1, |_| 9, |i| i as u64),
        [1]
    );
}

#[test]
fn adaptive_routing_keeps_its_port_within_the_hysteresis() {
    let mut ps = ports(&[100; 2]);
    ps[0].bytes = 1_000;
    ps[1].bytes = 2_000;
    let mut lb = build(
        &spec(json!({"kind": "adaptive", "samples": 0, "hysteresis": "1500B"})),
        &ps,
        1,
    );
    let pk = packet(1);
    let mut pick = |ps: &[Port]| {
        lb.pick(&Pick {
            now: 0,
            pk: &pk,
            hash: 1,
            gid: 0,
            candidates: &[0, 1],
            ports: ps,
            behind: &[],
        })
    };
    assert_eq!(pick(&ps), 0);
    // Port 1 is now shorter, but by less than the margin: stay.
    ps[0].bytes = 3_000;
    assert_eq!(pick(&ps), 0);
    // Shorter by more than the margin: move, and that port is remembered.
    ps[0].bytes = 3_600;
    assert_eq!(pick(&ps), 1);
    ps[0].bytes = 2_500;
    assert_eq!(pick(&ps), 1);
}

#[test]
fn drill_sampling_with_memory_settles_on_the_short_queue() {
    // DRILL(2, 1) over 8 ports, one of them short: two samples miss it with probability
    // (7/8)(6/7) = 3/4 per packet, but once sampled, the memory keeps it.
    let mut ps = ports(&[100; 8]);
    for (i, p) in ps.iter_mut().enumerate() {
        p.bytes = if i == 5 { 0 } else { 50_000 };
    }
    let cands: Vec<u16> = (0..8).collect();
    let mut lb = build(&spec(json!({"kind": "adaptive"})), &ps, 1);
    let p = picks(lb.as_mut(), &ps, &cands, 200, |_| 9, |i| i as u64);
    let first = p
        .iter()
        .position(|&i| i == 5)
        .expect("sampled within 200 packets");
    assert!(p[first..].iter().all(|&i| i == 5), "{p:?}");
    // Without memory it is only chosen when sampled: about 1/4 of the packets.
    let mut lb = build(&spec(json!({"kind": "adaptive", "memory": false})), &ps, 1);
    let c = counts(
        &picks(lb.as_mut(), &ps, &cands, 4000, |_| 9, |i| i as u64),
        8,
    );
    assert!(c[5].abs_diff(1000) < 140, "{c:?}"); // Binomial(4000, 1/4): sd 27.4, 5 sd
}

#[test]
fn a_flowlet_changes_port_only_after_the_gap() {
    let ps = ports(&[100; 4]);
    let gap = 500 * braid_engine::time::US;
    let mut lb = build(&spec(json!({"kind": "flowlet"})), &ps, 1);
    // Packets closer than the gap: one flowlet, one port.
    let p = picks(
        lb.as_mut(),
        &ps,
        &[0, 1, 2, 3],
        1000,
        |_| 42,
        |i| i as u64 * gap,
    );
    assert!(p.iter().all(|&i| i == p[0]), "{p:?}");
    // Packets just past the gap: each a new flowlet on a uniformly random port (3/4 move).
    let p = picks(
        lb.as_mut(),
        &ps,
        &[0, 1, 2, 3],
        4000,
        |_| 43,
        |i| i as u64 * (gap + 1),
    );
    let moves = p.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(moves.abs_diff(3000) < 140, "{moves}"); // Binomial(3999, 3/4): sd 27.4, 5 sd
                                                    // Flows are separate: another flow's packets do not extend this one's flowlet.
    let spec_gap = spec(json!({"kind": "flowlet", "gap": "10us"}));
    assert_eq!(
        spec_gap,
        LbSpec::Flowlet(FlowletLb {
            gap: Duration(10 * braid_engine::time::US),
            table_size: 65_536,
        })
    );
}

#[test]
fn flows_that_hash_into_one_flowlet_entry_share_it() {
    // Eight flows' packets interleaved 1 us apart (each flow's own packets 8 us apart, within
    // the 10 us gap). With one entry they are one flowlet on one port, the entry evicted by
    // whichever flow comes; with CONGA's 64K entries each flow keeps its own port.
    let ps = ports(&[100; 4]);
    let used = |size: u32| {
        let mut lb = build(
            &spec(json!({"kind": "flowlet", "gap": "10us", "table_size": size})),
            &ps,
            1,
        );
        let p = picks(
            lb.as_mut(),
            &ps,
            &[0, 1, 2, 3],
            800,
            |i| 1000 + (i % 8) as u64,
            |i| i as u64 * braid_engine::time::US,
        );
        let mut per_flow: Vec<Vec<usize>> = vec![Vec::new(); 8];
        for (i, &x) in p.iter().enumerate() {
            per_flow[i % 8].push(x);
        }
        assert!(per_flow.iter().all(|f| f.iter().all(|&x| x == f[0])));
        counts(&p, 4).iter().filter(|&&c| c > 0).count()
    };
    assert_eq!(used(1), 1);
    assert!(used(65_536) > 1);
}

#[test]
fn wcmp_sends_flows_in_proportion_to_the_weights() {
    // Link rates 100G and 25G: weights 4:1 by default.
    let ps = ports(&[100, 25]);
    let mut lb = build(&spec(json!({"kind": "wcmp"})), &ps, 1);
    let mut rng = RngStream::new(5, "flows", &[]);
    let hashes: Vec<u64> = (0..10_000).map(|_| rng.next_u64()).collect();
    let p = picks(
        lb.as_mut(),
        &ps,
        &[0, 1],
        10_000,
        |i| hashes[i],
        |i| i as u64,
    );
    let c = counts(&p, 2);
    assert!(c[1].abs_diff(2000) < 200, "{c:?}"); // Binomial(10000, 1/5): sd 40, 5 sd
                                                 // Per flow: a flow's packets all take one port.
    let again = picks(
        lb.as_mut(),
        &ps,
        &[0, 1],
        10_000,
        |i| hashes[i],
        |i| i as u64,
    );
    assert_eq!(p, again);
    // Explicit weights override the rates.
    let mut lb = build(
        &spec(json!({"kind": "wcmp", "weights": [{"node": "sw", "peer": "n0", "weight": 25}]})),
        &ps,
        1,
    );
    let c = counts(
        &picks(
            lb.as_mut(),
            &ps,
            &[0, 1],
            10_000,
            |i| hashes[i],
            |i| i as u64,
        ),
        2,
    );
    assert!(c[1].abs_diff(5000) < 250, "{c:?}"); // 1:1, sd 50
}

#[test]
fn the_same_seed_gives_the_same_choices_and_another_seed_others() {
    let ps = ports(&[100; 4]);
    for kind in [
        json!({"kind": "spray"}),
        json!({"kind": "adaptive"}),
        json!({"kind": "flowlet", "gap": "1ns"}),
    ] {
        let run = |seed| {
            let mut lb = build(&spec(kind.clone()), &ps, seed);
            picks(
                lb.as_mut(),
                &ps,
                &[0, 1, 2, 3],
                200,
                |_| 3,
                |i| i as u64 * 10_000,
            )
        };
        assert_eq!(run(1), run(1), "{kind}");
        assert_ne!(run(1), run(2), "{kind}");
    }
}

#[test]
fn ecmp_builds_no_balancer_and_is_the_default() {
    let ps = ports(&[100; 2]);
    let site = LbSite {
        switch: 0,
        name: "sw",
        peers: &["a", "b"],
        ports: &ps,
        seed: 1,
    };
    assert!(LbSpec::default().kind().build(&site).unwrap().is_none());
    assert_eq!(spec(json!({"kind": "ecmp"})), LbSpec::default());
}

#[test]
fn bad_parameters_are_refused_with_their_key() {
    let ps = ports(&[100; 2]);
    let site = LbSite {
        switch: 0,
        name: "sw",
        peers: &["a", "b"],
        ports: &ps,
        seed: 1,
    };
    let err = |s: serde_json::Value| spec(s).kind().build(&site).err().expect("refused");
    assert!(err(json!({"kind": "flowlet", "gap": "0s"})).starts_with("switch.lb.gap: "));
    assert!(err(json!({"kind": "flowlet", "table_size": 0})).starts_with("switch.lb.table_size: "));
    let w = |peer: &str, weight: f64| json!({"kind": "wcmp", "weights": [{"node": "sw", "peer": peer, "weight": weight}]});
    assert!(err(w("zz", 1.0)).starts_with("switch.lb.weights[0].peer: "));
    assert!(err(w("a", 0.0)).starts_with("switch.lb.weights[0].weight: "));
    let e = serde_json::from_value::<LbSpec>(json!({"kind": "flowlet", "gapp": "1us"}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("gapp"), "{e}");
}

#[test]
fn wcmp_weights_by_the_capacity_behind_each_port_when_given() {
    // Four 100G ports whose paths carry 100, 100, 100 and 25 Gbit/s: port 3 takes 25/325 of
    // the flows (Binomial(10000, 0.0769): sd 26.6; 5 sd), not a quarter.
    let ps = ports(&[100; 4]);
    let lb = build(&spec(json!({"kind": "wcmp"})), &ps, 1);
    assert!(lb.wants_path_capacity());
    let mut rng = RngStream::new(5, "flows", &[]);
    let pk = packet(1);
    let behind = [100e9, 100e9, 100e9, 25e9];
    let mut c = [0usize; 4];
    for _ in 0..10_000 {
        let at = Pick {
            now: 0,
            pk: &pk,
            hash: rng.next_u64(),
            gid: 7,
            candidates: &[0, 1, 2, 3],
            ports: &ps,
            behind: &behind,
        };
        let i = lb.replay(&at).expect("WCMP replays");
        c[i] += 1;
    }
    let expected = 10_000.0 * 25.0 / 325.0;
    assert!((c[3] as f64 - expected).abs() < 5.0 * 26.6, "{c:?}");
    // Spraying has no replay: its choice depends on its random stream.
    let spray = build(&spec(json!({"kind": "spray"})), &ps, 1);
    let at = Pick {
        now: 0,
        pk: &pk,
        hash: 1,
        gid: 7,
        candidates: &[0, 1],
        ports: &ps,
        behind: &[],
    };
    assert_eq!(spray.replay(&at), None);
}
