//! Traces: the congestion controllers' sampled state (`measure.cc`) against DCQCN's equations,
//! packet captures (`measure.pcap`) read back with a small pcap reader of the test's own, and
//! neither changing what a run measures.

mod common;
use braid_sim::{Column, Results, Simulation, Table};
use common::*;
use serde_json::{json, Value};
use std::path::Path;

const LINE: f64 = 40e9;
const G: f64 = 1.0 / 16.0;
/// DCQCN's alpha timer (the default, 55 us).
const ALPHA_T: u64 = 55_000_000;

/// Hosts 0, 1 send to host 3 (an incast on 3's link, ECN-marked at its switch port); host 2 sends
/// to host 4 alone, on a path with room to spare.
fn incast() -> Value {
    json!({
        "duration": "5ms",
        "topology": dumbbell(3, 2, link("40Gbps", "1us"), link("200Gbps", "1us")),
        "switch": {"ecn": {"kmin": "5KB", "kmax": "50KB", "pmax": 0.2}},
        "transport": {"dcqcn": {"g": G, "rate_timer": "10us"}},
        "traffic": flows(&[(0, 3, "6MB"), (1, 3, "1500KB"), (2, 4, "2MB")]),
        "measure": {"interval": "50us", "cc": {"qps": [0, 1, 2], "interval": "1us"}},
    })
}

struct Row {
    t: u64,
    flow: i64,
    rate: f64,
    target: f64,
    alpha: f64,
    signals: f64,
    cuts: f64,
}

fn f64s(t: &Table, name: &str) -> Vec<f64> {
    t.f64(name).to_vec()
}

fn rows(r: &Results, flow: i64) -> Vec<Row> {
    let c = &r.tables["cc"];
    let (t, fl) = (ints(c, "time_ps"), ints(c, "flow"));
    let (rate, target, alpha) = (f64s(c, "rate_bps"), f64s(c, "target_bps"), f64s(c, "alpha"));
    // Counts are integers in the table (null where the controller has none).
    let (signals, cuts) = (numbers(c, "signals"), numbers(c, "cuts"));
    (0..c.rows())
        .filter(|&i| fl[i] == flow)
        .map(|i| Row {
            t: t[i] as u64,
            flow: fl[i],
            rate: rate[i],
            target: target[i],
            alpha: alpha[i],
            signals: signals[i],
            cuts: cuts[i],
        })
        .collect()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn dcqcn_series_follow_the_reaction_point_equations() {
    let (_, r) = run(&incast());
    assert!(r.counters["cnps"] > 0, "the incast raises CNPs");
    let kinds = match r.tables["cc"].get("kind").unwrap() {
        Column::Str(v) => v.clone(),
        _ => unreachable!(),
    };
    assert!(kinds.iter().all(|k| k == "dcqcn"));

    // The flow that never saw congestion: at line rate, target at line, alpha where it started.
    let quiet = rows(&r, 2);
    assert!(
        quiet.len() > 300,
        "sampled every microsecond: {}",
        quiet.len()
    );
    for w in &quiet {
        assert_eq!(
            (w.rate, w.target, w.alpha, w.cuts),
            (LINE, LINE, 1.0, 0.0),
            "t {}",
            w.t
        );
    }

    for f in [0, 1] {
        let s = rows(&r, f);
        assert!(s.iter().all(|w| w.flow == f));
        // Samples are 1 us apart, from 1 us on.
        assert!(s.windows(2).all(|w| w[1].t - w[0].t == 1_000_000));
        // The first cut, with alpha at its initial 1: Rc = Rc (1 - 1/2), Rt = the old Rc, and
        // alpha = (1 - g) 1 + g = 1.
        let i = s.iter().position(|w| w.cuts == 1.0).expect("a first cut");
        assert_eq!(s[i - 1].rate, LINE);
        assert!(close(s[i].rate, LINE / 2.0, 1e-12), "{}", s[i].rate);
        assert!(close(s[i].target, LINE, 1e-12));
        assert!(close(s[i].alpha, 1.0, 1e-12));
        // Every later cut: Rc_new = Rt_new (1 - a/2), where Rt_new is the rate just before the cut
        // and a the alpha it used, a = (alpha_new - g) / (1 - g); that a is the alpha of the
        // previous sample, or one alpha-timer decay of it.
        let mut checked = 0;
        for w in s.windows(2) {
            let (p, c) = (&w[0], &w[1]);
            if c.cuts != p.cuts + 1.0 || p.cuts == 0.0 {
                continue;
            }
            let a = (c.alpha - G) / (1.0 - G);
            assert!(
                close(a, p.alpha, 1e-9) || close(a, p.alpha * (1.0 - G), 1e-9),
                "t {}: alpha {} -> {} (used {a})",
                c.t,
                p.alpha,
                c.alpha
            );
            assert!(
                close(c.rate, c.target * (1.0 - a / 2.0), 1e-9),
                "t {}: Rc {} vs Rt {} (1 - {a}/2)",
                c.t,
                c.rate,
                c.target
            );
            checked += 1;
        }
        if f == 0 {
            assert!(checked >= 2, "several cuts checked: {checked}");
        }
    }

    // Flow 0 after its last CNP (flow 1 finished; it is alone on host 3's link): alpha decays by
    // (1 - g) per alpha-timer period, and the rate only recovers.
    let s = rows(&r, 0);
    let last_signal = s.last().unwrap().signals;
    let quiet_from = s.iter().position(|w| w.signals == last_signal).unwrap();
    let t0 = s[quiet_from].t + ALPHA_T;
    let calm: Vec<&Row> = s.iter().filter(|w| w.t > t0).collect();
    assert!(
        calm.len() > 300,
        "a long uncongested stretch: {} samples",
        calm.len()
    );
    for w in calm.windows(2) {
        assert!(w[1].rate >= w[0].rate, "t {}: no cut without a CNP", w[1].t);
    }
    let mut decays = 0;
    for (k, w) in calm.iter().enumerate().step_by(37) {
        for v in calm.iter().skip(k + 1).step_by(53) {
            let n = (v.alpha / w.alpha).ln() / (1.0 - G).ln();
            let dt = (v.t - w.t) as f64 / ALPHA_T as f64;
            assert!(
                (n - n.round()).abs() < 1e-6,
                "alpha {} -> {} is not (1-g)^n",
                w.alpha,
                v.alpha
            );
            assert!(
                n.round() == dt.floor() || n.round() == dt.ceil(),
                "{n} decays in {dt} alpha periods ({} -> {} ps)",
                w.t,
                v.t
            );
            decays += 1;
        }
    }
    assert!(decays > 10);
    let (a, b) = (calm.first().unwrap(), calm.last().unwrap());
    assert!(b.alpha < a.alpha * (1.0 - G).powi(4), "alpha decayed");
}

/// Results with the trace outputs and wall-clock figures taken out.
fn measured(r: &Results, keep_events: bool) -> String {
    let mut r = r.clone();
    r.tables["cc"] = Table::default();
    r.pcap.clear();
    r.stats.retain(|k, _| {
        !matches!(
            k.as_str(),
            "wall_s" | "events_per_s" | "sim_s_per_wall_s" | "pcap_packets" | "pcap_missed"
        ) && (keep_events || !k.starts_with("events"))
    });
    format!("{r:?}")
}

#[test]
fn tracing_does_not_change_what_a_run_measures() {
    let mut plain = incast();
    plain["measure"] = json!({"interval": "50us", "queues": ["swR:0"]});
    let (_, a) = run(&plain);
    assert_eq!(a.tables["cc"].rows(), 0);
    assert!(a.pcap.is_empty());
    // Sampled on the measurement grid: not even the event count changes.
    let mut same_grid = plain.clone();
    same_grid["measure"]["cc"] = json!({"qps": "all"});
    same_grid["measure"]["pcap"] =
        json!({"flows": [0, 2], "ports": [{"node": "swL", "peer": "swR"}], "snaplen": 256});
    let (_, b) = run(&same_grid);
    assert!(b.tables["cc"].rows() > 0 && !b.pcap.is_empty());
    assert!(measured(&a, true) == measured(&b, true), "results differ");
    // On a grid of its own (extra sampling events), captured at the senders: the same too.
    let mut own = same_grid.clone();
    own["measure"]["cc"] = json!({"qps": [0, {"host": 1, "qpn": 1}], "interval": "3us"});
    own["measure"]["pcap"]["at"] = json!("send");
    let (_, c) = run(&own);
    assert!(c.stats["events"] > a.stats["events"]);
    assert!(measured(&a, false) == measured(&c, false), "results differ");
    // And the traces themselves are deterministic.
    let (_, d) = run(&own);
    // (Debug text: NaN, a field a controller lacks, equals itself there.)
    assert!(
        format!("{:?}", c.tables["cc"]) == format!("{:?}", d.tables["cc"]),
        "cc differs"
    );
    assert!(c.pcap == d.pcap, "pcap differs");
}

#[test]
fn all_takes_the_sending_qps_up_to_the_cap() {
    let mut s = incast();
    s["measure"]["cc"] = json!({"qps": "all", "interval": "10us", "max_qps": 2});
    let (_, r) = run(&s);
    let (h, q) = (ints(&r.tables["cc"], "host"), ints(&r.tables["cc"], "qpn"));
    let mut qps: Vec<(i64, i64)> = h.iter().copied().zip(q.iter().copied()).collect();
    qps.sort();
    qps.dedup();
    assert_eq!(qps.len(), 2, "{qps:?}");
    // Senders only: hosts 0, 1, 2 send.
    assert!(qps.iter().all(|&(h, _)| h <= 2), "{qps:?}");
    s["measure"]["cc"]["max_qps"] = json!(100);
    let (_, r) = run(&s);
    let (h, f) = (ints(&r.tables["cc"], "host"), ints(&r.tables["cc"], "flow"));
    let mut hosts: Vec<i64> = h.clone();
    hosts.sort();
    hosts.dedup();
    assert_eq!(hosts, vec![0, 1, 2]);
    // Each row names the flow its QP carries.
    for i in 0..r.tables["cc"].rows() {
        assert_eq!(f[i], h[i], "host k sends flow k");
    }
}

#[test]
fn mp_rdma_rows_carry_the_window_and_no_rate() {
    let s = json!({
        "duration": "2ms",
        "topology": {"kind": "two-tor", "hosts_per_tor": 1, "paths": 2,
                     "host_link": link("40Gbps", "1us"), "fabric_link": link("40Gbps", "1us")},
        "transport": {"kind": "mp-rdma", "mp_rdma": {"iw": 12}},
        "traffic": [{"pattern": "flows", "flows": [{"src": 0, "dst": 1, "size": "1MB", "start": "20us"}]}],
        "measure": {"interval": "10us", "cc": {"qps": [0], "interval": "2us"}},
    });
    let (_, r) = run(&s);
    let c = &r.tables["cc"];
    assert!(c.rows() > 50);
    let t = ints(c, "time_ps");
    let cwnd = c.f64("cwnd");
    assert!(c.f64("rate_bps").iter().all(|x| x.is_nan()));
    assert!(c.f64("alpha").iter().all(|x| x.is_nan()));
    assert!(cwnd.iter().all(|x| x.is_finite() && *x >= 1.0));
    // Before the flow starts, the window is the initial one and nothing is in flight.
    let before: Vec<usize> = (0..c.rows()).filter(|&i| t[i] < 20_000_000).collect();
    assert!(!before.is_empty());
    for &i in &before {
        assert_eq!(cwnd[i], 12.0);
        assert_eq!(c.f64("inflight")[i], 0.0);
    }
    // Later it moves, and what is in flight stays within the window (plus its inflation).
    assert!(cwnd.iter().any(|&w| w != 12.0));
}

#[test]
fn bad_trace_keys_name_the_key() {
    let base = incast();
    let bad = |m: Value| -> (String, String) {
        let mut s = base.clone();
        s["measure"] = m;
        match Simulation::from_json(&s.to_string(), Path::new("."), None) {
            Ok(_) => panic!("accepted: {}", s["measure"]),
            Err(e) => (e.path, e.message),
        }
    };
    let (p, m) = bad(json!({"cc": {"qps": [7]}}));
    assert_eq!(p, "measure.cc.qps[0]");
    assert!(m.contains("no flow 7"), "{m}");
    let (p, _) = bad(json!({"cc": {"qps": [0, 0]}}));
    assert_eq!(p, "measure.cc.qps[1]");
    let (p, m) = bad(json!({"cc": {"qps": "some"}}));
    assert_eq!(p, "measure.cc.qps");
    assert!(m.contains("\"all\""), "{m}");
    let (p, _) = bad(json!({"cc": {"qps": [{"host": 9, "qpn": 0}]}}));
    assert_eq!(p, "measure.cc.qps[0].host");
    let (p, m) = bad(json!({"interval": "0us", "cc": {"qps": [0]}}));
    assert_eq!(p, "measure.cc.interval");
    assert!(m.contains("measure.interval is 0"), "{m}");
    let (p, _) = bad(json!({"pcap": {"flows": [3]}}));
    assert_eq!(p, "measure.pcap.flows[0]");
    let (p, _) = bad(json!({"pcap": {"ports": ["swL:9"]}}));
    assert_eq!(p, "measure.pcap.ports[0]");
    let (p, _) = bad(json!({"pcap": {"ports": ["swL:0", "swL:0"]}}));
    assert_eq!(p, "measure.pcap.ports[1]");
    let (p, _) = bad(json!({"pcap": {"flows": [0], "snaplen": 10}}));
    assert_eq!(p, "measure.pcap.snaplen");
    let (p, _) = bad(json!({"pcap": {"flows": [0], "max_packets": 0}}));
    assert_eq!(p, "measure.pcap.max_packets");
    // Checked even when nothing is captured or sampled.
    let (p, _) = bad(json!({"pcap": {"snaplen": 10}}));
    assert_eq!(p, "measure.pcap.snaplen");
    let (p, _) = bad(json!({"cc": {"max_qps": 0}}));
    assert_eq!(p, "measure.cc.max_qps");
    let (p, _) = bad(json!({"pcap": {"flows": [0], "at": "middle"}}));
    assert!(p.starts_with("measure.pcap"), "{p}");
}

// ------------------------------------------------------------------ pcap read back

/// One record of a pcap file.
struct Rec {
    ts_ns: u64,
    caplen: usize,
    len: usize,
    data: Vec<u8>,
}

/// A pcap reader written from the format's description (libpcap file format, nanosecond
/// variant), independent of the writer.
fn read_pcap(b: &[u8]) -> (u32, Vec<Rec>) {
    let u32le = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    assert_eq!(u32le(0), 0xa1b23c4d, "nanosecond magic");
    assert_eq!((b[4], b[5], b[6], b[7]), (2, 0, 4, 0), "version 2.4");
    assert_eq!(u32le(20), 1, "Ethernet link type");
    let snap = u32le(16);
    let mut out = vec![];
    let mut i = 24;
    while i < b.len() {
        let (s, ns, cap, len) = (u32le(i), u32le(i + 4), u32le(i + 8), u32le(i + 12));
        assert!(ns < 1_000_000_000);
        assert!(cap <= len && cap <= snap);
        out.push(Rec {
            ts_ns: s as u64 * 1_000_000_000 + ns as u64,
            caplen: cap as usize,
            len: len as usize,
            data: b[i + 16..i + 16 + cap as usize].to_vec(),
        });
        i += 16 + cap as usize;
    }
    assert_eq!(i, b.len(), "records fill the file exactly");
    (snap, out)
}

fn ones_complement_ok(h: &[u8]) -> bool {
    let mut s: u32 = h
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s == 0xFFFF
}

#[test]
fn a_flow_capture_holds_every_packet_of_the_flow() {
    // 100 KB in 1 KB packets (MTU 1024): 98 consecutive PSNs from the QP's initial PSN (drawn
    // from the seed, modulo 2^24), WRITE First, Middle..., Last; ACKs back.
    let s = json!({
        "duration": "1ms",
        "topology": dumbbell(2, 2, link("40Gbps", "1us"), link("40Gbps", "1us")),
        "nic": {"mtu": 1024},
        "traffic": flows(&[(0, 2, "100KB"), (1, 3, "50KB")]),
        "measure": {"pcap": {"flows": [0], "snaplen": 2048}},
    });
    let (sim, r) = run(&s);
    let (snap, recs) = read_pcap(&r.pcap);
    assert_eq!(snap, 2048);
    assert_eq!(r.stats["pcap_packets"] as usize, recs.len());
    assert_eq!(r.stats["pcap_missed"], 0.0);
    let w = sim.world();
    let (src, dst) = (w.hosts[0].node, w.hosts[2].node);
    let ip = |n: u32| [10, (n >> 16) as u8, (n >> 8) as u8, n as u8];
    let mut data_psns = vec![];
    let mut initial_psn = None;
    let mut acks = 0;
    let mut last_t = 0;
    for rec in &recs {
        let d = &rec.data;
        assert!(rec.ts_ns >= last_t, "in time order");
        last_t = rec.ts_ns;
        assert_eq!(rec.caplen, rec.len, "whole frames below the snap length");
        assert_eq!(&d[12..14], &[0x08, 0x00]);
        assert!(ones_complement_ok(&d[14..34]), "IPv4 header checksum");
        assert_eq!(u16::from_be_bytes([d[16], d[17]]) as usize, rec.len - 14);
        assert_eq!(d[23], 17);
        assert_eq!(u16::from_be_bytes([d[36], d[37]]), 4791);
        let opcode = d[42];
        let wire_psn = u32::from_be_bytes([0, d[51], d[52], d[53]]);
        let (s_ip, d_ip) = (&d[26..30], &d[30..34]);
        match opcode {
            0x06..=0x08 => {
                // PSNs relative to the first (the WRITE First's), modulo 2^24.
                let base = *initial_psn.get_or_insert(wire_psn);
                let psn = wire_psn.wrapping_sub(base) & 0xFF_FFFF;
                assert_eq!((s_ip, d_ip), (&ip(src)[..], &ip(dst)[..]));
                let want = match psn {
                    0 => 0x06,
                    97 => 0x08,
                    _ => 0x07,
                };
                assert_eq!(opcode, want, "psn {psn}");
                // Headers, RETH on the first, the payload (1024, the last 100,000 - 97 x 1024 =
                // 672), ICRC.
                let reth = if psn == 0 { 16 } else { 0 };
                let payload = if psn == 97 { 672 } else { 1024 };
                assert_eq!(rec.len, 14 + 20 + 8 + 12 + reth + payload + 4, "psn {psn}");
                if psn == 0 {
                    let dma = u32::from_be_bytes([d[66], d[67], d[68], d[69]]);
                    assert_eq!(dma, 100_000, "RETH DMA length: the message");
                }
                data_psns.push(psn);
            }
            0x11 => {
                assert_eq!((s_ip, d_ip), (&ip(dst)[..], &ip(src)[..]));
                assert_eq!(d[54], 0x1F, "ACK syndrome");
                acks += 1;
            }
            o => panic!("unexpected opcode {o:#x}"),
        }
    }
    // No loss: every PSN once, nothing of the other flow.
    assert_eq!(data_psns, (0..98).collect::<Vec<u32>>());
    assert!(acks >= 1);
    assert_eq!(r.counters["data_packets"], 98 + 49);
}

#[test]
fn a_port_capture_holds_what_the_port_sent_and_stops_at_max_packets() {
    let mut s = incast();
    s["measure"] = json!({"interval": "50us", "pcap": {"ports": ["swR:0"], "max_packets": 1000000, "snaplen": 128}});
    let (sim, r) = run(&s);
    let (_, recs) = read_pcap(&r.pcap);
    let w = sim.world();
    let n = w.nodes.iter().position(|n| n.name == "swR").unwrap();
    let port = &w.node_ports(n as u32)[0];
    assert_eq!(
        recs.len() as u64,
        port.tx_pkts,
        "one frame per packet the port sent"
    );
    assert_eq!(recs.len() as u64, r.stats["pcap_packets"] as u64);
    // Its ECN marks are the port's.
    let ce = recs
        .iter()
        .filter(|x| x.data[12..14] == [0x08, 0x00] && x.data[15] & 3 == 3)
        .count();
    assert_eq!(ce as u64, port.ecn_marks);
    assert!(ce > 0);
    // Cut at the snap length, the original length kept.
    assert!(recs.iter().all(|x| x.caplen <= 128 && x.len >= x.caplen));
    assert!(recs.iter().any(|x| x.len > 1000 && x.caplen == 128));
    // Bounded.
    s["measure"]["pcap"]["max_packets"] = json!(100);
    let (_, r) = run(&s);
    let (_, few) = read_pcap(&r.pcap);
    assert_eq!(few.len(), 100);
    assert_eq!(r.stats["pcap_missed"] as usize, recs.len() - 100);
    assert_eq!(few[99].data, recs[99].data, "the first 100 frames");
}
