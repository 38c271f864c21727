//! The RNIC's WQE pipeline (`nic/limits.rs`) against its definition: every WR, data or control,
//! takes one slot of its QP's message rate (`nic.max_qp_msg_rate`) and one of the NIC's
//! (`nic.max_msg_rate`), so a single QP of 16 B WRITEs runs at the per-QP ceiling, enough QPs
//! reach the NIC's, and a PeRF-style chain of 0_WAITs costs one slot per WAIT.

mod common;
use braid_verbs::*;
use common::*;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::rc::Rc;

/// Messages per second of `qps` write_bw QPs of 16 B, depth 128, 20 000 messages each (the
/// defaults of the simulator's NIC unless `nic` says otherwise).
fn msg_rate(nic: Value, qps: u32) -> f64 {
    let n = 20_000u64;
    let s = json!({
        "duration": "50ms",
        "topology": dumbbell(1, 1, link("100Gbps", "1us"), link("100Gbps", "1us")),
        "nic": nic,
        "transport": {"kind": "none"},
        "apps": [{"kind": "write_bw", "src": 0, "dst": 1, "size": "16B", "qps": qps,
                  "tx_depth": 128, "iterations": n}],
    });
    let (_, r) = run(&s);
    let fct = ints(&r.tables["flows"], "fct_ps")[0] as f64 / 1e12;
    (qps as u64 * n) as f64 / fct
}

#[test]
fn one_qp_of_16_byte_writes_runs_at_the_per_qp_ceiling() {
    // The default NIC: ConnectX-6's 12.4 Mmsg/s per QP (the PeRF artifact's figure).
    let r = msg_rate(json!({}), 1);
    assert!((r - 12.4e6).abs() / 12.4e6 < 0.01, "{r} msg/s");
    let r = msg_rate(json!({"max_qp_msg_rate": 5e6}), 1);
    assert!((r - 5e6).abs() / 5e6 < 0.01, "{r} msg/s");
    // Unlimited (0): 128 WRs per round trip (~6 µs here) decide, 21 Mmsg/s.
    let r = msg_rate(json!({"max_qp_msg_rate": 0, "max_msg_rate": 0}), 1);
    assert!(r > 1.5 * 12.4e6, "{r} msg/s");
}

#[test]
fn enough_qps_together_reach_the_nic_ceiling() {
    // 16 QPs of 12.4 M would make 198 M; the default NIC port stops them at 107.5 M.
    let r = msg_rate(json!({}), 16);
    assert!((r - 107.5e6).abs() / 107.5e6 < 0.01, "{r} msg/s");
    // Below the port's ceiling, the QPs' own: 4 x 12.4 M.
    let r = msg_rate(json!({}), 4);
    assert!((r - 49.6e6).abs() / 49.6e6 < 0.01, "{r} msg/s");
}

// ------------------------------------------------------------------- 0_WAIT chains

#[derive(Default)]
struct Shared {
    server_qp: Option<QpNum>,
    server_mr: Option<MemoryRegion>,
    server_host: u32,
    client_qp: Option<QpNum>,
    client_host: u32,
    /// (start, completion of the last WRITE), picoseconds.
    start: u64,
    done: Option<u64>,
}

type S = Rc<RefCell<Shared>>;

struct Server(S);

impl App for Server {
    fn start(&mut self, v: &mut dyn Verbs) {
        let cq = v.create_cq(16).unwrap();
        let mr = v.reg_mr(0x1000_0000, 1 << 20, Access::ALL).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        let mut s = self.0.borrow_mut();
        s.server_host = v.local_host();
        s.server_mr = Some(mr);
        s.server_qp = Some(qp);
        v.set_timer(v.now(), 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if let Event::Timer(1) = ev {
            let s = self.0.borrow();
            let remote = RemoteQp {
                host: s.client_host,
                qpn: s.client_qp.unwrap(),
                udp_sport: None,
            };
            v.connect_qp(s.server_qp.unwrap(), remote).unwrap();
        }
    }
}

/// Posts `subs` WRITEs of `size` bytes on one cross-channel QP, each behind `waits` zero-count
/// WAITs on a CQ nothing completes on (PeRF's 0_WAITs: they never block), the last WRITE
/// signaled.
struct Client {
    s: S,
    subs: u64,
    waits: u32,
    size: u32,
    cq: CqId,
    idle_cq: CqId,
    mr: Option<MemoryRegion>,
}

impl App for Client {
    fn start(&mut self, v: &mut dyn Verbs) {
        self.cq = v.create_cq(16).unwrap();
        v.req_notify_cq(self.cq).unwrap();
        self.idle_cq = v.create_cq(16).unwrap();
        self.mr = Some(v.reg_mr(0x2000_0000, 1 << 20, Access::ALL).unwrap());
        let init = QpInit {
            cross_channel: true,
            ..QpInit::rc(self.cq)
        };
        let qp = v.create_qp(&init).unwrap();
        let mut s = self.s.borrow_mut();
        s.client_host = v.local_host();
        s.client_qp = Some(qp);
        v.set_timer(v.now(), 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(1) => {
                let (qp, host, sqp, smr) = {
                    let s = self.s.borrow();
                    (
                        s.client_qp.unwrap(),
                        s.server_host,
                        s.server_qp.unwrap(),
                        s.server_mr.unwrap(),
                    )
                };
                let remote = RemoteQp {
                    host,
                    qpn: sqp,
                    udp_sport: None,
                };
                v.connect_qp(qp, remote).unwrap();
                // Start once both ends are connected (the server's timer fired first).
                v.set_timer(v.now() + 10_000_000, 2);
                let _ = smr;
            }
            Event::Timer(2) => {
                let (qp, smr) = {
                    let s = self.s.borrow();
                    (s.client_qp.unwrap(), s.server_mr.unwrap())
                };
                let l = self.mr.unwrap();
                self.s.borrow_mut().start = v.now();
                for i in 0..self.subs {
                    for _ in 0..self.waits {
                        let mut w = SendWr::new(
                            0,
                            SendOp::Wait {
                                cq: self.idle_cq,
                                count: 0,
                            },
                            vec![],
                        );
                        w.signaled = false;
                        v.post_send(qp, w).unwrap();
                    }
                    let mut w = SendWr::new(
                        i,
                        SendOp::Write,
                        vec![Sge {
                            addr: l.addr,
                            length: self.size,
                            lkey: l.lkey,
                        }],
                    );
                    w.remote_addr = smr.addr;
                    w.rkey = smr.rkey;
                    w.signaled = i + 1 == self.subs;
                    v.post_send(qp, w).unwrap();
                }
            }
            Event::Completion(cq) => {
                let mut out = Vec::new();
                poll_and_rearm(v, cq, &mut out).unwrap();
                for wc in out {
                    assert_eq!(wc.status, WcStatus::Success);
                    if wc.wr_id + 1 == self.subs {
                        self.s.borrow_mut().done = Some(v.now());
                    }
                }
            }
            _ => {}
        }
    }
}

/// Picoseconds from posting `subs` sub-WRs of 16 B, each behind `waits` 0_WAITs, to the last
/// one's completion.
fn chain_time(nic: Value, subs: u64, waits: u32) -> u64 {
    chain_time_of(nic, subs, waits, 16)
}

fn chain_time_of(nic: Value, subs: u64, waits: u32, size: u32) -> u64 {
    let s: S = Default::default();
    let scenario = json!({
        "duration": "10ms",
        "topology": dumbbell(1, 1, link("100Gbps", "1us"), link("100Gbps", "1us")),
        "nic": nic,
        "transport": {"kind": "none"},
    });
    let mut sim = build(&scenario);
    sim.add_app(1, Box::new(Server(s.clone())), vec![]).unwrap();
    let client = Client {
        s: s.clone(),
        subs,
        waits,
        size,
        cq: 0,
        idle_cq: 0,
        mr: None,
    };
    sim.add_app(0, Box::new(client), vec![]).unwrap();
    sim.run();
    let sh = s.borrow();
    sh.done.expect("the last WRITE completed") - sh.start
}

#[test]
fn zero_waits_take_wqe_slots_of_their_qp() {
    // 200 sub-WRs, each behind PeRF's chain of 16 0_WAITs: 200 x 17 WQEs at 12.4 M per QP =
    // 274.2 µs, plus one round trip for the last WRITE's ACK (a few µs).
    let subs = 200;
    let t = chain_time(json!({}), subs, 16) as f64;
    let want = (subs * 17) as f64 / 12.4e6 * 1e12;
    assert!(
        t >= want && t < want * 1.03,
        "{} µs, want {} µs + an RTT",
        t / 1e6,
        want / 1e6
    );
    // Without the WAITs: 200 WQEs, 16.1 µs + an RTT.
    let bare = chain_time(json!({}), subs, 0) as f64;
    let want_bare = subs as f64 / 12.4e6 * 1e12;
    assert!(
        bare >= want_bare && bare < want_bare + 10e6,
        "{} µs",
        bare / 1e6
    );
    // wqe_time adds serial processing to every WQE, WAITs included: 1 µs each dominates.
    let slow = chain_time(json!({"wqe_time": "1us"}), 20, 16) as f64;
    assert!(
        (20.0 * 17.0 * 1e6..20.0 * 17.0 * 1e6 * 1.03).contains(&slow),
        "{} µs",
        slow / 1e6
    );
}

#[test]
fn a_pipelined_engine_hides_the_zero_waits_behind_the_sub_wr() {
    // PeRF's sub-WR: 16 KiB, then 16 0_WAITs, 100 sub-WRs on one QP. D, one sub-WR's time on
    // the wire, is measured with the message rates off (the 0_WAITs then cost nothing).
    let (subs, size) = (100u64, 16_384u32);
    let free = json!({"max_qp_msg_rate": 0, "max_msg_rate": 0});
    let d = chain_time_of(free, subs, 16, size) as f64 / subs as f64;
    let g = 1e12 / 12.4e6;
    // Pipelined (the default): the 17 WQE slots of a sub-WR and its chain run while its data
    // goes, so one sub-WR per max(D, 17 slots).
    let piped = chain_time_of(json!({}), subs, 16, size) as f64 / subs as f64;
    let want = d.max(17.0 * g);
    assert!(
        (piped - want).abs() / want < 0.03,
        "pipelined {piped} ps per sub-WR, want max({d}, {})",
        17.0 * g
    );
    // Serial: the 16 WAITs' slots come after the data: D + 16 slots per sub-WR.
    let serial =
        chain_time_of(json!({"wqe_pipelined": false}), subs, 16, size) as f64 / subs as f64;
    let want = d + 16.0 * g;
    assert!(
        (serial - want).abs() / want < 0.03,
        "serial {serial} ps per sub-WR, want {want}"
    );
}

// ------------------------------------------------------------------- a WAIT that blocks

#[derive(Default)]
struct Held {
    server_qp: Option<QpNum>,
    server_mr: Option<MemoryRegion>,
    server_host: u32,
    client_qp: Option<QpNum>,
    client_host: u32,
    /// When the server posted the SEND that releases the client's WAIT, and when the client's
    /// last WRITE completed (ps).
    released: u64,
    done: Option<u64>,
}

type H = Rc<RefCell<Held>>;

/// Connects to the client, then at `at` sends it a 0-byte SEND (the WAIT's release).
struct Releaser(H, u64);

impl App for Releaser {
    fn start(&mut self, v: &mut dyn Verbs) {
        let cq = v.create_cq(16).unwrap();
        let mr = v.reg_mr(0x1000_0000, 1 << 20, Access::ALL).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        let mut s = self.0.borrow_mut();
        s.server_host = v.local_host();
        s.server_mr = Some(mr);
        s.server_qp = Some(qp);
        v.set_timer(v.now(), 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(1) => {
                let s = self.0.borrow();
                let remote = RemoteQp {
                    host: s.client_host,
                    qpn: s.client_qp.unwrap(),
                    udp_sport: None,
                };
                v.connect_qp(s.server_qp.unwrap(), remote).unwrap();
                v.set_timer(self.1, 2);
            }
            Event::Timer(2) => {
                let qp = self.0.borrow().server_qp.unwrap();
                let mut w = SendWr::new(0, SendOp::Send, vec![]);
                w.signaled = false;
                v.post_send(qp, w).unwrap();
                self.0.borrow_mut().released = v.now();
            }
            _ => {}
        }
    }
}

/// One cross-channel QP: a WAIT on its receive CQ (released by the server's SEND), then
/// `n` WRITEs of 16 B, the last signaled, all posted at once at the start.
struct HeldClient(H, u64);

impl App for HeldClient {
    fn start(&mut self, v: &mut dyn Verbs) {
        let scq = v.create_cq(16).unwrap();
        v.req_notify_cq(scq).unwrap();
        let rcq = v.create_cq(16).unwrap();
        let init = QpInit {
            cross_channel: true,
            recv_cq: rcq,
            ..QpInit::rc(scq)
        };
        let qp = v.create_qp(&init).unwrap();
        let mut s = self.0.borrow_mut();
        s.client_host = v.local_host();
        s.client_qp = Some(qp);
        v.set_timer(v.now(), 1);
        let _ = rcq;
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(1) => {
                let (qp, host, sqp, smr) = {
                    let s = self.0.borrow();
                    (
                        s.client_qp.unwrap(),
                        s.server_host,
                        s.server_qp.unwrap(),
                        s.server_mr.unwrap(),
                    )
                };
                let remote = RemoteQp {
                    host,
                    qpn: sqp,
                    udp_sport: None,
                };
                v.connect_qp(qp, remote).unwrap();
                v.post_recv(
                    qp,
                    RecvWr {
                        wr_id: 0,
                        sg_list: vec![],
                    },
                )
                .unwrap();
                let l = v.reg_mr(0x2000_0000, 1 << 20, Access::ALL).unwrap();
                let rcq = v.query_qp(qp).unwrap().recv_cq;
                let mut w = SendWr::new(u64::MAX, SendOp::Wait { cq: rcq, count: 1 }, vec![]);
                w.signaled = false;
                v.post_send(qp, w).unwrap();
                for i in 0..self.1 {
                    let mut w = SendWr::new(
                        i,
                        SendOp::Write,
                        vec![Sge {
                            addr: l.addr,
                            length: 16,
                            lkey: l.lkey,
                        }],
                    );
                    w.remote_addr = smr.addr;
                    w.rkey = smr.rkey;
                    w.signaled = i + 1 == self.1;
                    v.post_send(qp, w).unwrap();
                }
            }
            Event::Completion(cq) => {
                let mut out = Vec::new();
                poll_and_rearm(v, cq, &mut out).unwrap();
                for wc in out {
                    assert_eq!(wc.status, WcStatus::Success);
                    if wc.wr_id + 1 == self.1 {
                        self.0.borrow_mut().done = Some(v.now());
                    }
                }
            }
            _ => {}
        }
    }
}

/// Picoseconds from the server's release to the completion of the last of `n` WRITEs held
/// 30 µs behind a WAIT.
fn held_time(nic: Value, n: u64) -> f64 {
    let h: H = Default::default();
    let scenario = json!({
        "duration": "1ms",
        "topology": dumbbell(1, 1, link("100Gbps", "1us"), link("100Gbps", "1us")),
        "nic": nic,
        "transport": {"kind": "none"},
    });
    let mut sim = build(&scenario);
    sim.add_app(1, Box::new(Releaser(h.clone(), 30_000_000)), vec![])
        .unwrap();
    sim.add_app(0, Box::new(HeldClient(h.clone(), n)), vec![])
        .unwrap();
    sim.run();
    let s = h.borrow();
    (s.done.expect("the last WRITE completed") - s.released) as f64
}

#[test]
fn wqes_behind_a_blocked_wait_keep_their_qps_message_rate() {
    // 100 WRITEs wait 30 µs behind a WAIT. The engine cannot have processed them meanwhile, so
    // after the release they start 1/12.4 MHz apart: 99 gaps = 7.98 µs more than without the
    // message rates (the SEND's trip, the WRITEs' wire time, the last one's ACK). Spaced from
    // the WAIT's own start instead, 30 µs of slots would have accrued and the WRITEs gone out
    // at wire speed.
    let n = 100;
    let free = held_time(json!({"max_qp_msg_rate": 0, "max_msg_rate": 0}), n);
    let t = held_time(json!({}), n);
    let gaps = (n - 1) as f64 / 12.4e6 * 1e12;
    eprintln!(
        "release to last completion: {} µs, {} µs without message rates",
        t / 1e6,
        free / 1e6
    );
    // Without the rates the WRITEs follow each other at wire speed (16 B + 62 B of headers,
    // 6.24 ns at 100 Gbit/s): the gaps replace that.
    let want = gaps - (n - 1) as f64 * 78.0 * 8.0 * 1000.0 / 100.0;
    assert!(
        (t - free - want).abs() < 0.02 * want,
        "{} µs, want {} + {} µs",
        t / 1e6,
        free / 1e6,
        want / 1e6
    );
}

// ------------------------------------------------------------------- perftest -l

/// (ibv_post_send calls of the client tenant, messages per second) of one write_bw QP of 16 B
/// at depth 128 posting lists of `list`.
fn post_list_run(list: u32) -> (u64, f64) {
    let n = 32_000u64;
    let s = json!({
        "duration": "50ms",
        "topology": dumbbell(1, 1, link("100Gbps", "1us"), link("100Gbps", "1us")),
        "transport": {"kind": "none"},
        "apps": [{"kind": "write_bw", "src": 0, "dst": 1, "size": "16B", "tx_depth": 128,
                  "post_list": list, "iterations": n}],
    });
    let (_, r) = run(&s);
    assert!(
        ints(&r.tables["flows"], "finish_ps")[0] > 0,
        "the app finished"
    );
    let labels = match r.tables["tenants"].get("label").unwrap() {
        braid_sim::Column::Str(v) => v.clone(),
        _ => panic!("label"),
    };
    let row = labels.iter().position(|l| l.ends_with(".client")).unwrap();
    let posts = ints(&r.tables["tenants"], "posts")[row] as u64;
    let fct = ints(&r.tables["flows"], "fct_ps")[0] as f64 / 1e12;
    (posts, n as f64 / fct)
}

#[test]
fn post_lists_post_32_wrs_per_call_and_run_at_the_per_qp_ceiling() {
    let (single_posts, single_rate) = post_list_run(1);
    let (list_posts, list_rate) = post_list_run(32);
    // perftest -l 32: 32,000 WRs in 1,000 calls (one doorbell each), against 32,000 single posts.
    assert_eq!(list_posts, 1000, "single posts: {single_posts}");
    assert_eq!(single_posts, 32_000);
    // Either way the QP's message rate is the NIC's to give: 12.4 Mmsg/s.
    for r in [single_rate, list_rate] {
        assert!((r - 12.4e6).abs() / 12.4e6 < 0.02, "{r} msg/s");
    }
}

#[test]
fn a_bad_post_list_is_refused_naming_the_key() {
    for (app, key) in [
        (
            json!({"kind": "write_bw", "post_list": 0}),
            "apps[0].post_list",
        ),
        (
            json!({"kind": "write_lat", "post_list": 4}),
            "apps[0].post_list",
        ),
        (
            json!({"kind": "write_bw", "post_list": 64, "tx_depth": 32}),
            "apps[0].post_list",
        ),
        (
            json!({"kind": "write_bw", "post_list": 8, "cq_mod": 4}),
            "apps[0].cq_mod",
        ),
    ] {
        let mut a = json!({"src": 0, "dst": 1, "size": "16B"});
        for (k, v) in app.as_object().unwrap() {
            a[k] = v.clone();
        }
        let s = json!({
            "duration": "1ms",
            "topology": dumbbell(1, 1, link("100Gbps", "1us"), link("100Gbps", "1us")),
            "apps": [a],
        });
        let e = braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
            .err()
            .unwrap_or_else(|| panic!("accepted {app}"));
        assert!(e.to_string().contains(key), "{app}: {e}");
    }
}
