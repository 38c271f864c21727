//! The host as the unit of middleware: tenants with stacks of their own on one host, an agent
//! slot shared by them, wakes, isolation (ownership) between tenants, per-tenant results.

mod common;
use braid_verbs::*;
use common::*;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;

fn strs(t: &braid_sim::Table, name: &str) -> Vec<String> {
    match t.get(name).unwrap_or_else(|| panic!("no column {name}")) {
        braid_sim::Column::Str(v) => v.clone(),
        _ => panic!("{name} is not a string column"),
    }
}

/// Two tenants on host 0 with different stacks: a latency tenant and a bandwidth tenant. The
/// results report each one's stack, latency percentiles, goodput, message rate and CPU time.
#[test]
fn two_tenants_on_one_host_have_their_own_stacks_and_results() {
    let s = json!({
        "duration": "2ms",
        "topology": dumbbell(2, 2, link("100Gbps", "1us"), link("100Gbps", "1us")),
        "apps": [
            {"kind": "write_lat", "src": 0, "dst": 2, "size": "16B", "iterations": 200},
            {"kind": "write_bw", "src": 0, "dst": 3, "size": "64KB", "iterations": 200,
             "middleware": ["raw", "raw"]},
        ],
    });
    let (sim, r) = run(&s);
    assert_eq!(
        sim.stacks()[0],
        vec![vec!["raw"], vec!["raw", "raw"]],
        "host 0's two client tenants"
    );
    let t = &r.tables["tenants"];
    let labels = strs(t, "label");
    let row = |l: &str| labels.iter().position(|x| x == l).unwrap();
    let (lat, bw) = (row("apps[0].client"), row("apps[1].client"));
    assert_eq!(strs(t, "stack")[lat], "raw");
    assert_eq!(strs(t, "stack")[bw], "raw,raw");
    assert_eq!(ints(t, "host")[lat], 0);
    let p50 = common::numbers(t, "lat_p50_us");
    let p99 = common::numbers(t, "lat_p99_us");
    assert!(
        p50[lat] > 1.0 && p50[lat] < 20.0,
        "write_lat p50 {}",
        p50[lat]
    );
    assert!(p99[lat] >= p50[lat]);
    assert!(p50[bw].is_nan(), "write_bw measures no round trips");
    let gp = common::numbers(t, "goodput_gbps");
    assert!(
        gp[bw] > 50.0 && gp[bw] <= 100.0,
        "write_bw goodput {}",
        gp[bw]
    );
    let mr = common::numbers(t, "msg_rate_mps");
    assert!(
        (mr[bw] - gp[bw] * 1e3 / 8.0 / 64_000.0).abs() / mr[bw] < 0.01,
        "{} vs {}",
        mr[bw],
        gp[bw]
    );
    // CPU: every post and poll is accounted to the tenant that made it.
    let cpu = common::numbers(t, "cpu_ns");
    let posts = ints(t, "posts");
    assert!(posts[bw] >= 200 && posts[lat] >= 200, "{posts:?}");
    let cost = braid_verbs::CpuCost::default();
    assert!(cpu[bw] >= posts[bw] as f64 * cost.post_ns, "{} ns", cpu[bw]);
    assert_eq!(common::numbers(t, "cpu_ns_verbs")[bw], cpu[bw]);
    assert!(common::numbers(t, "cpu_ns_per_msg")[bw] > cost.post_ns);
}

/// A `[[traffic]]` table is a tenant of its own on every host it uses, with its own stack.
#[test]
fn traffic_tables_are_tenants_with_their_own_middleware() {
    let f = |s: u32, d: u32| json!({"pattern": "flows", "flows": [{"src": s, "dst": d, "size": "10KB"}]});
    let mut t1 = f(0, 2);
    t1["middleware"] = json!(["raw", "raw"]);
    let s = json!({
        "duration": "1ms",
        "topology": dumbbell(2, 2, link("40Gbps", "1us"), link("40Gbps", "1us")),
        "traffic": [f(0, 2), t1],
    });
    let (sim, r) = run(&s);
    // Host 0 sends for both tables: two sender tenants, each with its table's stack.
    assert_eq!(sim.stacks()[0], vec![vec!["raw"], vec!["raw", "raw"]]);
    let labels = strs(&r.tables["tenants"], "label");
    assert!(labels.contains(&"traffic[0].sender".to_string()));
    assert!(labels.contains(&"traffic[1].sink".to_string()));
}

/// What the tests' tenants share: handles of tenant A's objects, what B's attempts returned.
#[derive(Default)]
struct Board {
    a_qp: Option<QpNum>,
    a_cq: Option<CqId>,
    a_mr: Option<MemoryRegion>,
    b_results: Vec<(&'static str, bool)>,
    /// The wr_ids A found in its CQ (when it polled it, after B's attempts).
    a_completions: Vec<u64>,
    b_completions: Vec<u64>,
    woken: Vec<(TenantId, u64)>,
}
type B = Rc<RefCell<Board>>;

/// A connected pair of RC QPs on this host (each the other's peer), on CQ `cq`.
fn loopback_pair(v: &mut dyn Verbs, cq: CqId) -> (QpNum, QpNum) {
    let q1 = v.create_qp(&QpInit::rc(cq)).unwrap();
    let q2 = v.create_qp(&QpInit::rc(cq)).unwrap();
    let host = v.local_host();
    let to = |qpn| RemoteQp {
        host,
        qpn,
        udp_sport: None,
    };
    v.connect_qp(q1, to(q2)).unwrap();
    v.connect_qp(q2, to(q1)).unwrap();
    (q1, q2)
}

/// Tenant A: a connected QP (so that a post on it would run), a completion of its own left in
/// its CQ unpolled while B tries (so that a poll by B would find it), then it polls at 50 us.
struct TenantA(B);
impl App for TenantA {
    fn start(&mut self, v: &mut dyn Verbs) {
        let cq = v.create_cq(16).unwrap();
        let (qp, _) = loopback_pair(v, cq);
        let mr = v.reg_mr(0x1000, 4096, Access::ALL).unwrap();
        v.post_send(qp, SendWr::new(100, SendOp::Nop, vec![]))
            .unwrap();
        v.set_timer(v.now() + 50_000_000, 1);
        let mut b = self.0.borrow_mut();
        b.a_qp = Some(qp);
        b.a_cq = Some(cq);
        b.a_mr = Some(mr);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if ev == Event::Timer(1) {
            let cq = self.0.borrow().a_cq.unwrap();
            let mut out = Vec::new();
            while v.poll_cq(cq, 16, &mut out) > 0 {}
            self.0
                .borrow_mut()
                .a_completions
                .extend(out.iter().map(|w| w.wr_id));
        }
    }
}

/// Tenant B tries every verb on A's objects at 10 us (when A's NOP has completed and waits in
/// A's CQ), and names A's lkey in a WR on a connected QP of its own.
struct TenantB(B);
impl App for TenantB {
    fn start(&mut self, v: &mut dyn Verbs) {
        v.set_timer(v.now() + 10_000_000, 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(1) => {
                let (qp, cq, mr) = {
                    let b = self.0.borrow();
                    (b.a_qp.unwrap(), b.a_cq.unwrap(), b.a_mr.unwrap())
                };
                let mut r = Vec::new();
                let nop = SendWr::new(5, SendOp::Nop, vec![]);
                r.push(("post on A's QP", v.post_send(qp, nop.clone()).is_err()));
                let mut out = Vec::new();
                r.push(("poll A's CQ", v.poll_cq(cq, 8, &mut out) == 0));
                r.push(("arm A's CQ", v.req_notify_cq(cq).is_err()));
                r.push((
                    "modify A's QP",
                    v.modify_qp(qp, QpModify::UdpSport(5)).is_err(),
                ));
                r.push(("query A's QP", v.query_qp(qp).is_err()));
                r.push(("destroy A's QP", v.destroy_qp(qp).is_err()));
                r.push(("destroy A's CQ", v.destroy_cq(cq).is_err()));
                r.push(("dereg A's MR", v.dereg_mr(&mr).is_err()));
                r.push(("QP on A's CQ", v.create_qp(&QpInit::rc(cq)).is_err()));
                // A's lkey in B's own WR, on a connected QP (the post would otherwise run).
                let own_cq = v.create_cq(16).unwrap();
                v.req_notify_cq(own_cq).unwrap();
                let (own, peer) = loopback_pair(v, own_cq);
                v.post_recv(
                    peer,
                    RecvWr {
                        wr_id: 7,
                        sg_list: vec![],
                    },
                )
                .unwrap();
                let mut w = SendWr::new(
                    6,
                    SendOp::Send,
                    vec![Sge {
                        addr: mr.addr,
                        length: 8,
                        lkey: mr.lkey,
                    }],
                );
                w.signaled = true;
                r.push(("A's lkey in B's WR", v.post_send(own, w).is_err()));
                self.0.borrow_mut().b_results = r;
            }
            Event::Completion(cq) => {
                let mut out = Vec::new();
                poll_and_rearm(v, cq, &mut out).unwrap();
                self.0
                    .borrow_mut()
                    .b_completions
                    .extend(out.iter().map(|w| w.wr_id));
            }
            _ => {}
        }
    }
}

/// Every check here can fail: A's QP is connected (a post by B would run and complete in A's
/// CQ), A's CQ holds A's own completion while B polls it, and B's QP is connected (a WR naming
/// A's lkey would be sent). Removing the ownership check of post_send, poll_cq or the lkey
/// check makes it fail (see the protection section of docs/middleware.md).
#[test]
fn a_tenant_cannot_touch_another_tenants_objects() {
    let s = json!({"duration": "100us", "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let mut sim = build(&s);
    let b: B = Default::default();
    sim.add_app(0, Box::new(TenantA(b.clone())), vec![])
        .unwrap();
    sim.add_app(0, Box::new(TenantB(b.clone())), vec![])
        .unwrap();
    sim.run();
    let r = &b.borrow().b_results;
    assert_eq!(r.len(), 10, "{r:?}");
    for (what, refused) in r {
        assert!(refused, "tenant B could {what}");
    }
    assert_eq!(
        b.borrow().a_completions,
        vec![100],
        "A finds its own completion, and nothing of B's attempts"
    );
    assert_eq!(
        b.borrow().b_completions,
        Vec::<u64>::new(),
        "nothing of B's refused WR ran"
    );
}

/// The host agent (tenant 0) wakes a tenant; the wake reaches that tenant only, through its
/// stack, and a layer of that tenant that owns the token consumes it.
struct Waker;
impl Middleware for Waker {
    fn name(&self) -> &'static str {
        "waker"
    }
    fn start(&mut self, below: &mut dyn Verbs) {
        below.set_timer(below.now() + 5_000_000, 9);
    }
    fn on_event(&mut self, below: &mut dyn Verbs, ev: Event, up: &mut Vec<Event>) {
        match ev {
            Event::Timer(9) => {
                below.wake(2, 77);
                below.wake(2, 78);
            }
            e => up.push(e),
        }
    }
}
/// Consumes wake 78 (its own token); lets the rest through.
struct Eats78(Rc<RefCell<u32>>);
impl Middleware for Eats78 {
    fn name(&self) -> &'static str {
        "eats78"
    }
    fn on_event(&mut self, _: &mut dyn Verbs, ev: Event, up: &mut Vec<Event>) {
        match ev {
            Event::Wake(78) => *self.0.borrow_mut() += 1,
            e => up.push(e),
        }
    }
}

/// Records the wakes it gets.
struct Sleeper(B);
impl App for Sleeper {
    fn start(&mut self, _: &mut dyn Verbs) {}
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if let Event::Wake(t) = ev {
            self.0.borrow_mut().woken.push((v.tenant(), t));
        }
    }
}

#[test]
fn the_host_agent_wakes_the_named_tenant_through_its_stack() {
    let s = json!({"duration": "100us", "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let mut sim = build(&s);
    let b1: B = Default::default();
    let b2: B = Default::default();
    let eaten = Rc::new(RefCell::new(0));
    sim.add_app(0, Box::new(Sleeper(b1.clone())), vec![])
        .unwrap(); // tenant 1
    sim.add_app(
        0,
        Box::new(Sleeper(b2.clone())),
        vec![Box::new(Eats78(eaten.clone()))],
    )
    .unwrap(); // tenant 2
    sim.set_agent(0, vec![Box::new(Waker)]).unwrap();
    sim.run();
    assert_eq!(b2.borrow().woken, vec![(2, 77)]);
    assert!(b1.borrow().woken.is_empty());
    assert_eq!(*eaten.borrow(), 1);
}

#[test]
fn middleware_entries_are_checked_by_key() {
    let base = json!({
        "duration": "1ms",
        "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us")),
        "apps": [{"kind": "write_bw", "src": 0, "dst": 1, "size": "1KB", "iterations": 10}],
    });
    let mut bad = base.clone();
    bad["apps"][0]["middleware"] = json!(["nope"]);
    let e = braid_sim::Simulation::from_json(&bad.to_string(), std::path::Path::new("."), None)
        .err()
        .unwrap();
    assert_eq!(e.path, "apps[0].middleware[0]", "{e}");
    assert!(e.message.contains("unknown middleware"), "{e}");
    let mut bad = base.clone();
    bad["middleware"] = json!({"default": [{"kind": "raw", "x": 1}]});
    let e = braid_sim::Simulation::from_json(&bad.to_string(), std::path::Path::new("."), None)
        .err()
        .unwrap();
    assert!(e.path.starts_with("middleware.default[0]"), "{e}");
    let mut bad = base;
    bad["host"] = json!({"cpu": {"post_ns": -1.0}});
    let e = braid_sim::Simulation::from_json(&bad.to_string(), std::path::Path::new("."), None)
        .err()
        .unwrap();
    assert_eq!(e.path, "host.cpu.post_ns", "{e}");
}

/// A mechanism that needs a NIC capability the host's NIC lacks is refused when the run is
/// built, with the key of the stack entry; a parameter out of range names its key.
#[test]
fn a_mechanism_without_its_capability_or_with_a_bad_parameter_is_refused_by_key() {
    let mut s = json!({
        "duration": "1ms",
        "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us")),
        "nic": {"cross_channel": false},
        "apps": [{"kind": "write_bw", "src": 0, "dst": 1, "size": "1KB", "iterations": 10,
                  "middleware": ["perf"]}],
    });
    let e = braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
        .err()
        .expect("perf needs cross-channel WAIT/ENABLE");
    assert!(e.path.starts_with("apps[0].middleware[0]"), "{e}");
    assert!(e.message.contains("cross-channel"), "{e}");
    s["nic"]["cross_channel"] = json!(true);
    s["apps"][0]["middleware"] = json!([{"kind": "perf", "sub_wr": "0B"}]);
    let e = braid_sim::Simulation::from_json(&s.to_string(), std::path::Path::new("."), None)
        .err()
        .expect("a zero sub-WR size is refused");
    assert_eq!(e.path, "apps[0].middleware[0].sub_wr", "{e}");
}

/// A multipath-like layer: one extra QP for every application QP (made inside its `create_qp`),
/// one more when the application connects, and one of its own at start.
#[derive(Default)]
struct Twin {
    cq: CqId,
    own: Rc<RefCell<Vec<QpNum>>>,
}
impl Middleware for Twin {
    fn name(&self) -> &'static str {
        "twin"
    }
    fn start(&mut self, below: &mut dyn Verbs) {
        self.cq = below.create_cq(16).unwrap();
        let q = below.create_qp(&QpInit::rc(self.cq)).unwrap();
        self.own.borrow_mut().push(q);
    }
    fn create_qp(&mut self, below: &mut dyn Verbs, init: &QpInit) -> Result<QpNum, VerbsError> {
        let a = below.create_qp(init)?;
        let b = below.create_qp(init)?;
        self.own.borrow_mut().push(b);
        Ok(a)
    }
    fn connect_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        below.connect_qp(qp, remote)?;
        let c = below.create_qp(&QpInit::rc(self.cq))?;
        self.own.borrow_mut().push(c);
        Ok(())
    }
}

/// Creates two QPs and connects the first.
struct TwoQps(u32, Rc<RefCell<Vec<QpNum>>>);
impl App for TwoQps {
    fn start(&mut self, v: &mut dyn Verbs) {
        let cq = v.create_cq(16).unwrap();
        let a = v.create_qp(&QpInit::rc(cq)).unwrap();
        let b = v.create_qp(&QpInit::rc(cq)).unwrap();
        let remote = RemoteQp {
            host: self.0,
            qpn: 1,
            udp_sport: None,
        };
        v.connect_qp(a, remote).unwrap();
        self.1.borrow_mut().extend([a, b]);
    }
    fn on_event(&mut self, _: &mut dyn Verbs, _: Event) {}
}

#[test]
fn qps_a_layer_creates_inside_an_application_call_count_for_that_application_qp() {
    let s = json!({"duration": "10us", "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let mut sim = build(&s);
    let (apps, layer) = (Rc::new(RefCell::new(vec![])), Rc::new(RefCell::new(vec![])));
    let peer = sim.host_address(1);
    let twin = Twin {
        cq: 0,
        own: layer.clone(),
    };
    sim.add_app(
        0,
        Box::new(TwoQps(peer, apps.clone())),
        vec![Box::new(twin)],
    )
    .unwrap();
    sim.run();
    let (apps, layer) = (apps.borrow(), layer.borrow());
    // layer: [its own (start), twin of a, twin of b, made at a's connect]
    assert_eq!((apps.len(), layer.len()), (2, 4));
    let owners = &sim.world().hosts[0].owners;
    assert_eq!(owners.family_head(layer[1]), apps[0]);
    assert_eq!(owners.family_head(layer[2]), apps[1]);
    assert_eq!(owners.family_head(layer[3]), apps[0]);
    // The layer's own QP, made outside any application call, serves no application QP.
    assert_eq!(owners.family_head(layer[0]), layer[0]);
    assert_eq!(owners.family_head(apps[0]), apps[0]);
    assert_eq!(owners.family.len(), 3);
}

/// Posts three NOPs as one list on a connected QP.
struct Lister;
impl App for Lister {
    fn start(&mut self, v: &mut dyn Verbs) {
        let cq = v.create_cq(16).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        let remote = RemoteQp {
            host: v.local_host(),
            qpn: qp,
            udp_sport: None,
        };
        v.connect_qp(qp, remote).unwrap();
        let wrs = (0..3)
            .map(|i| SendWr::new(i, SendOp::Nop, vec![]))
            .collect();
        v.post_send_list(qp, wrs).unwrap();
    }
    fn on_event(&mut self, _: &mut dyn Verbs, _: Event) {}
}

#[test]
fn an_applications_post_list_reaches_the_nic_as_one_doorbell() {
    let s = json!({"duration": "10us", "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let mut sim = build(&s);
    sim.add_app(0, Box::new(Lister), vec![]).unwrap();
    sim.run();
    let slot = sim.world().hosts[0].apps.last().unwrap();
    assert_eq!(slot.cpu.posts, 1);
}
