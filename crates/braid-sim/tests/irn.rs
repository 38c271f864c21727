//! Selective repeat for RC (`transport.recovery = "irn"`, `transport/irn.rs`) against go-back-N
//! on lossy links and without PFC: what is retransmitted, what arrives, what it costs.

mod common;
use common::*;
use serde_json::{json, Value};

const P: f64 = 0.02;
const MTU: u64 = 1000;
const BYTES: u64 = 4_000_000;

/// One 4 MB WRITE flow at line rate (no congestion control) across a bottleneck that loses `P`
/// of the frames in each direction (data, ACKs and NACKs alike); both recoveries time out
/// after 100 us at the longest (go-back-N's `nic.rto`, IRN's `rto_high`).
fn lossy(recovery: &str, seed: u64) -> Value {
    json!({
        "seed": seed,
        "duration": "100ms",
        "topology": dumbbell(1, 1, link("40Gbps", "1us"),
                             json!({"rate": "40Gbps", "delay": "1us", "loss": P})),
        "nic": {"rto": "100us", "data_check": true},
        "transport": {"kind": "none", "recovery": recovery,
                      "irn": {"rto_low": "50us", "rto_high": "100us"}},
        "traffic": flows(&[(0, 1, &format!("{BYTES}B"))]),
    })
}

struct Outcome {
    finish_ps: i64,
    retx: u64,
    timeouts: u64,
    /// Every counter of the run, by name.
    counters: Vec<(String, u64)>,
}

impl Outcome {
    fn count(&self, k: &str) -> u64 {
        self.counters.iter().find(|x| x.0 == k).map_or(0, |x| x.1)
    }
}

fn outcome(s: &Value) -> Outcome {
    let (_, r) = run(s);
    let fin = ints(&r.tables["flows"], "finish_ps");
    assert!(fin.iter().all(|&f| f > 0), "unfinished: {:?}", r.counters);
    let mut counters: Vec<(String, u64)> =
        r.counters.iter().map(|(k, v)| (k.clone(), *v)).collect();
    counters.sort();
    Outcome {
        finish_ps: fin[0],
        retx: r.counters["retransmissions"],
        timeouts: r.counters["timeouts"],
        counters,
    }
}

/// Selective repeat resends what was lost: each data packet needs 1/(1-p) transmissions on
/// average, so about N·p/(1-p) data transmissions are lost for N packets, and each is resent.
/// A NACK SACKs only the PSN that triggered it, so a lost NACK makes its PSN look lost too: the
/// retransmissions lie between the data lost and the data plus NACKs lost. Go-back-N resends the
/// whole flight after each loss. Summed over seeds so the counts are large enough to compare.
#[test]
fn irn_retransmits_about_n_p_over_1_minus_p_and_go_back_n_far_more() {
    let n = (BYTES / MTU) as f64;
    let seeds = [1u64, 2, 3, 4];
    let (mut irn_retx, mut gbn_retx, mut irn_t, mut gbn_t) = (0u64, 0u64, 0i64, 0i64);
    let mut irn_data_lost = 0u64;
    for &seed in &seeds {
        let i = outcome(&lossy("irn", seed));
        let g = outcome(&lossy("go-back-n", seed));
        println!(
            "seed {seed}: irn retx {} timeouts {} finish {:.1} us; go-back-n retx {} timeouts {} finish {:.1} us",
            i.retx,
            i.timeouts,
            i.finish_ps as f64 / 1e6,
            g.retx,
            g.timeouts,
            g.finish_ps as f64 / 1e6
        );
        // Every lost data packet is resent; beyond those only the PSNs whose NACK (their
        // only SACK) was lost look lost to the sender.
        let (data, nak) = (i.count("drops_loss_data"), i.count("drops_loss_nak"));
        assert!(
            i.retx >= data && i.retx <= data + nak,
            "seed {seed}: {} retransmissions for {data} data and {nak} NACKs lost",
            i.retx
        );
        irn_data_lost += data;
        irn_retx += i.retx;
        gbn_retx += g.retx;
        irn_t += i.finish_ps;
        gbn_t += g.finish_ps;
    }
    let expect = seeds.len() as f64 * n * P / (1.0 - P);
    // Binomial spread: sd ≈ sqrt(4 · N · p) ≈ 18 against 326.
    let lost = irn_data_lost as f64;
    assert!(
        (lost - expect).abs() <= 4.5 * expect.sqrt(),
        "{lost} data transmissions lost, N·p/(1-p) = {expect:.0}"
    );
    assert!(
        gbn_retx > 3 * irn_retx,
        "go-back-N {gbn_retx} vs IRN {irn_retx}"
    );
    // Goodput: the 4 MB take at least 800 us at 40 Gbit/s; IRN stays within 1/(1-p) of it
    // plus its timeouts, and beats go-back-N.
    let goodput = |t: i64| seeds.len() as f64 * BYTES as f64 * 8.0 / (t as f64 / 1e12) / 1e9;
    println!(
        "goodput: irn {:.2} Gbit/s, go-back-n {:.2} Gbit/s",
        goodput(irn_t),
        goodput(gbn_t)
    );
    assert!(irn_t < gbn_t, "IRN {irn_t} ps vs go-back-N {gbn_t} ps");
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let a = outcome(&lossy("irn", 7));
    let b = outcome(&lossy("irn", 7));
    assert_eq!((a.finish_ps, &a.counters), (b.finish_ps, &b.counters));
    let c = outcome(&lossy("irn", 8));
    assert_ne!(a.counters, c.counters, "another seed, other losses");
}

/// The SACKs a NACK carries are wire PSNs like any other (24 bits, modulo 2^24): a flow whose
/// PSNs wrap while it recovers from loss runs exactly as one starting at 0.
#[test]
fn selective_repeat_across_the_24_bit_psn_wrap() {
    let with_psn = |p: u32| {
        let mut s = lossy("irn", 3);
        s["nic"]["initial_psn"] = json!(p);
        outcome(&s)
    };
    let wrap = with_psn((1 << 24) - 1500);
    let zero = with_psn(0);
    assert!(wrap.retx > 0);
    assert_eq!(
        (wrap.finish_ps, &wrap.counters),
        (zero.finish_ps, &zero.counters)
    );
}

/// Eight 40G senders into one 40G receiver without PFC, a small buffer: drops at the switch,
/// every byte delivered (run() checks placement), and selective repeat sends less again than
/// go-back-N. SEND and WRITE-with-immediate messages ride along: their receive completions come
/// in order (a SEND's RECV completes only once every earlier PSN arrived).
#[test]
fn without_pfc_an_incast_completes_with_fewer_retransmissions() {
    let incast = |recovery: &str| {
        let fl: Vec<(u32, u32, &str)> = (0..8).map(|i| (i, 8, "1MB")).collect();
        json!({
            "duration": "50ms",
            "topology": dumbbell(9, 1, link("40Gbps", "1us"), link("400Gbps", "1us")),
            "switch": {"buffer": "400KB", "pfc": {"enabled": false}},
            "nic": {"data_check": true, "rto": "200us"},
            "transport": {"kind": "dcqcn", "recovery": recovery,
                          "irn": {"rto_high": "200us"}},
            "traffic": flows(&fl),
            "apps": [{"kind": "send_bw", "src": 8, "dst": 9, "size": "16KB", "iterations": 100}],
        })
    };
    let run_one = |r: &str| {
        let (sim, res) = run(&incast(r));
        assert!(res.counters["drops_buffer"] > 0, "{r}: the incast drops");
        assert_eq!(res.headline["flows_completed"], 8.0, "{r}");
        assert_eq!(sim.verify_delivery().unwrap(), 8 * 1_000_000, "{r}");
        res.counters["retransmissions"]
    };
    let irn = run_one("irn");
    let gbn = run_one("go-back-n");
    println!("incast retransmissions: irn {irn}, go-back-n {gbn}");
    assert!(irn < gbn, "IRN {irn} vs go-back-N {gbn}");
}

#[test]
fn irn_with_mp_rdma_is_refused_naming_the_key() {
    let mut s = lossy("irn", 1);
    s["transport"]["kind"] = json!("mp-rdma");
    let e = braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("transport.recovery"), "{e}");
    let mut s = lossy("irn", 1);
    s["transport"]["irn"]["rto_low"] = json!("1ms");
    let e = braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("transport.irn.rto_low"), "{e}");
}

/// READs (requests one way, responses the other: the requester still takes responses in order
/// and asks again from a missing one) and SENDs (a RECV completes only once every earlier PSN
/// arrived) over the same lossy bottleneck, beside a WRITE flow: every application finishes
/// every iteration and every byte lands where it belongs.
#[test]
fn reads_and_sends_complete_over_a_lossy_link_under_selective_repeat() {
    for seed in [5, 6, 7, 8] {
        reads_and_sends(seed);
    }
}

fn reads_and_sends(seed: u64) {
    let s = json!({
        "seed": seed,
        "duration": "100ms",
        "topology": dumbbell(3, 3, link("40Gbps", "1us"),
                             json!({"rate": "40Gbps", "delay": "1us", "loss": P})),
        "nic": {"data_check": true},
        "transport": {"kind": "dcqcn", "recovery": "irn"},
        "traffic": flows(&[(0, 3, "1MB")]),
        "apps": [
            {"kind": "read_bw", "src": 4, "dst": 1, "size": "8KB", "tx_depth": 4, "iterations": 300},
            {"kind": "send_bw", "src": 2, "dst": 5, "size": "6KB", "iterations": 300},
        ],
    });
    let (_, r) = run(&s);
    assert!(
        ints(&r.tables["flows"], "finish_ps").iter().all(|&f| f > 0),
        "{:?} {:?}",
        ints(&r.tables["flows"], "finish_ps"),
        r.counters
    );
    assert!(r.counters["drops_loss_read_resp"] > 0 && r.counters["drops_loss_data"] > 0);
    // Completed messages by operation (the flow's WRITE is one more).
    let ops: Vec<String> = match r.tables["messages"].get("op") {
        Some(braid_sim::Column::Str(v)) => v.iter().map(|x| x.to_string()).collect(),
        _ => panic!("no op column"),
    };
    let count = |o: &str| ops.iter().filter(|x| *x == o).count();
    assert_eq!(
        (count("read"), count("send")),
        (300, 300),
        "{:?}",
        r.counters
    );
}

/// Over a lossy link READs finish no later under selective repeat than under go-back-N: IRN
/// places READ responses out of order and asks again only for the missing ones (docs/irn.md),
/// and a hole behind responses already placed is asked for as soon as the one before it is
/// filled (no later arrival would reveal it).
#[test]
fn reads_over_a_lossy_link_finish_no_later_than_under_go_back_n() {
    let last_read = |recovery: &str, seed: u64| {
        let s = json!({
            "seed": seed,
            "duration": "100ms",
            "topology": dumbbell(1, 1, link("40Gbps", "1us"),
                                 json!({"rate": "40Gbps", "delay": "1us", "loss": P})),
            "nic": {"rto": "100us"},
            "transport": {"kind": "dcqcn", "recovery": recovery,
                          "irn": {"rto_low": "100us", "rto_high": "100us"}},
            "apps": [{"kind": "read_bw", "src": 1, "dst": 0, "size": "8KB", "tx_depth": 4,
                      "iterations": 200}],
        });
        let (_, r) = run(&s);
        let done = ints(&r.tables["messages"], "complete_ps");
        assert_eq!(done.len(), 200, "{recovery} seed {seed}: {:?}", r.counters);
        *done.iter().max().unwrap()
    };
    let (mut irn, mut gbn) = (0i64, 0i64);
    for seed in [5, 6, 7, 8] {
        irn += last_read("irn", seed);
        gbn += last_read("go-back-n", seed);
    }
    println!("last READ, summed over seeds: irn {irn} ps, go-back-n {gbn} ps");
    assert!(irn <= gbn, "IRN {irn} ps vs go-back-N {gbn} ps");
}

/// The same lossy bottleneck with RACK's time-based loss detection (`loss_detection = "rack"`,
/// RFC 8985): nothing is reordered here, so it must recover exactly what IRN's NACK rule
/// recovers: every lost data transmission once (N·p/(1-p) over the run), beyond those only the
/// PSNs whose only SACK was lost, and every byte delivered. A READ/SEND mix over the same link
/// completes too.
#[test]
fn rack_recovers_real_losses_about_n_p_over_1_minus_p() {
    let n = (BYTES / MTU) as f64;
    let seeds = [1u64, 2, 3, 4];
    let (mut lost, mut retx) = (0u64, 0u64);
    for &seed in &seeds {
        let mut s = lossy("irn", seed);
        s["transport"]["irn"]["loss_detection"] = json!("rack");
        let o = outcome(&s);
        let (data, nak) = (o.count("drops_loss_data"), o.count("drops_loss_nak"));
        println!(
            "seed {seed}: rack retx {} (data lost {data}, NACKs lost {nak}) timeouts {} finish {:.1} us",
            o.retx,
            o.timeouts,
            o.finish_ps as f64 / 1e6
        );
        assert!(
            o.retx >= data && o.retx <= data + nak,
            "seed {seed}: {} retransmissions for {data} data and {nak} NACKs lost",
            o.retx
        );
        lost += data;
        retx += o.retx;
    }
    let expect = seeds.len() as f64 * n * P / (1.0 - P);
    assert!(
        (lost as f64 - expect).abs() <= 4.5 * expect.sqrt(),
        "{lost} data transmissions lost, N·p/(1-p) = {expect:.0}"
    );
    println!("rack: {retx} retransmissions for {lost} lost, N·p/(1-p) = {expect:.0}");
    // Deterministic per seed, as every model.
    let mut s = lossy("irn", 1);
    s["transport"]["irn"]["loss_detection"] = json!("rack");
    let (a, b) = (outcome(&s), outcome(&s));
    assert_eq!((a.finish_ps, &a.counters), (b.finish_ps, &b.counters));
    let mut s = lossy("irn", 9);
    s["transport"]["irn"]["loss_detection"] = json!("rack");
    s["transport"]["kind"] = json!("dcqcn");
    s["apps"] = json!([
        {"kind": "read_bw", "src": 1, "dst": 0, "size": "8KB", "tx_depth": 4, "iterations": 100},
        {"kind": "send_bw", "src": 0, "dst": 1, "size": "6KB", "iterations": 100},
    ]);
    let (sim, r) = run(&s);
    let ops: Vec<String> = match r.tables["messages"].get("op") {
        Some(braid_sim::Column::Str(v)) => v.iter().map(|x| x.to_string()).collect(),
        _ => panic!("no op column"),
    };
    let count = |o: &str| ops.iter().filter(|x| *x == o).count();
    assert_eq!(
        (count("read"), count("send")),
        (100, 100),
        "{:?}",
        r.counters
    );
    assert_eq!(sim.verify_delivery().unwrap(), BYTES);
}

#[test]
fn a_bad_loss_detection_is_refused_naming_the_key() {
    let mut s = lossy("irn", 1);
    s["transport"]["irn"]["loss_detection"] = json!("dupack");
    let e = braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("transport.irn"), "{e}");
    assert!(e.to_string().contains("rack"), "{e}");
}

/// Two ToRs joined by four spines, `n` hosts under each; tor0's uplink to s3 at 25 Gbit/s (the
/// others 100): packets sprayed over the four uplinks overtake those queued on the slow one.
fn sprayed_fabric(n: u32) -> Value {
    let mut nodes: Vec<String> = (0..2 * n).map(|i| format!("h{i}")).collect();
    nodes.extend(["tor0", "tor1", "s0", "s1", "s2", "s3"].map(String::from));
    let mut links = Vec::new();
    for i in 0..2 * n {
        let tor = if i < n { "tor0" } else { "tor1" };
        links.push(json!({"a": format!("h{i}"), "b": tor, "rate": "100Gbps", "delay": "1us"}));
    }
    for s in 0..4 {
        let rate = if s == 3 { "25Gbps" } else { "100Gbps" };
        links.push(json!({"a": "tor0", "b": format!("s{s}"), "rate": rate, "delay": "1us"}));
        links.push(json!({"a": "tor1", "b": format!("s{s}"), "rate": "100Gbps", "delay": "1us"}));
    }
    json!({"kind": "edges", "nodes": nodes, "switches": ["tor0", "tor1", "s0", "s1", "s2", "s3"],
           "links": links})
}

const READS: u64 = 40;
const READ_SIZE: u64 = 64_000;

/// Hosts under tor1 READ from those under tor0 over sprayed uplinks: the responses arrive out
/// of order. Returns the run's counters.
fn sprayed_reads(recovery: &str) -> std::collections::BTreeMap<String, u64> {
    let n = 4;
    let apps: Vec<Value> = (0..n)
        .map(|i| {
            json!({"kind": "read_bw", "src": n + i, "dst": i, "size": format!("{READ_SIZE}B"),
                   "tx_depth": 4, "iterations": READS})
        })
        .collect();
    let s = json!({
        "seed": 3,
        "duration": "50ms",
        "topology": sprayed_fabric(n),
        "switch": {"lb": {"kind": "spray"}},
        "nic": {"data_check": true, "mtu": MTU},
        "transport": {"kind": "dcqcn", "recovery": recovery},
        "apps": apps,
    });
    let (_, r) = run(&s);
    let done = ints(&r.tables["messages"], "complete_ps");
    assert_eq!(
        done.len() as u64,
        n as u64 * READS,
        "{recovery}: {:?}",
        r.counters
    );
    r.counters.iter().map(|(k, v)| (k.clone(), *v)).collect()
}

/// IRN's requester takes READ responses out of order, as its receiver takes WRITE data (issue
/// 27): behind packet spraying none is dropped, and a gap asks again only for the responses
/// missing, not for the rest of the READ. Go-back-N, on the same fabric, drops every response
/// that overtook another (the reordering is real) and has far more sent again.
#[test]
fn irn_places_sprayed_read_responses_out_of_order_and_asks_only_for_the_missing_ones() {
    let irn = sprayed_reads("irn");
    let gbn = sprayed_reads("go-back-n");
    let needed = 4 * READS * READ_SIZE.div_ceil(MTU);
    // Data packets are READ responses here (the requests are READ requests).
    let extra = |c: &std::collections::BTreeMap<String, u64>| c["data_packets"] - needed;
    eprintln!(
        "irn: {} responses beyond the {needed} needed, {} out-of-order drops, {} retransmissions, {} timeouts; \
         go-back-n: {} beyond, {} out-of-order drops, {} retransmissions, {} timeouts",
        extra(&irn),
        irn["out_of_order_drops"],
        irn["retransmissions"],
        irn["timeouts"],
        extra(&gbn),
        gbn["out_of_order_drops"],
        gbn["retransmissions"],
        gbn["timeouts"],
    );
    assert_eq!(irn["drops"], 0, "nothing is lost: {irn:?}");
    assert!(gbn["out_of_order_drops"] > 0, "the responses are reordered");
    assert_eq!(irn["out_of_order_drops"], 0, "{irn:?}");
    assert!(
        extra(&irn) * 4 < extra(&gbn),
        "IRN {} vs go-back-N {} responses sent again",
        extra(&irn),
        extra(&gbn)
    );
}
