//! DRUM's shared QPs in the simulator, against raw RDMA: every byte of every tenant delivered
//! once, at its place, with the applications' immediate values, through shared QPs over a lossy
//! link; and a dead peer failing every connection of a shared QP, each WR completing exactly
//! once (docs/drum-agent.md, "Failures", "Memory", "Immediate data").
//!
//! The tenants are test apps added to a two-host run (`Simulation::add_app`) over the drum (or
//! share, or raw) layers built here with a `HostCtx` per host, the agents in the agent slots.

mod common;
use braid_middleware::{DrumConfig, RawConfig, ShareConfig};
use braid_verbs::rendezvous::{board, Endpoint, SharedBoard, Side};
use braid_verbs::*;
use common::*;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Messages per connection (SENDs, WRITEs, every third SEND with immediate data), then one
/// WRITE_WITH_IMM that ends the connection's run.
const M: u64 = 8;
const REGION: u64 = 4 << 20;
const PART: u64 = 512 << 10;

fn base(tenant: TenantId) -> u64 {
    0x1000_0000 * tenant as u64
}

fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as u8
        })
        .collect()
}

fn seed(t: TenantId, c: u32) -> u64 {
    1000 * t as u64 + c as u64 + 1
}

fn msg_len(t: TenantId, c: u32, k: u64) -> u64 {
    300 + 901 * k + 37 * c as u64 + 11 * t as u64
}

fn imm_of(t: TenantId, c: u32, k: u64) -> u32 {
    (0xA5C3_0000 | (t << 12) | (c << 4) | k as u32).rotate_left(k as u32 * 5)
}

/// What the receivers saw, per (tenant, connection): completions (wr_id, status, byte_len,
/// imm) and, once the last WRITE_WITH_IMM arrived, the bytes of the connection's part.
/// A receive completion as logged: (wr_id, status, byte_len, imm).
type Recv = (u64, WcStatus, u64, Option<u32>);

#[derive(Default, Debug, PartialEq)]
struct Log {
    recv: BTreeMap<(TenantId, u32), Vec<Recv>>,
    bytes: BTreeMap<(TenantId, u32), Vec<u8>>,
    sent: BTreeMap<(TenantId, u32), Vec<(u64, WcStatus)>>,
    posted: BTreeMap<(TenantId, u32), u64>,
    states: BTreeMap<(TenantId, u32), QpState>,
}

type Shared = Rc<RefCell<Log>>;

const T_POLL: u64 = 1;

/// One tenant's end of `conns` connections.
struct Tenant {
    send: bool,
    conns: u32,
    /// WRITEs per connection in the failure test (0: the data test).
    writes: u64,
    board: SharedBoard,
    log: Shared,
    me: TenantId,
    cq: CqId,
    mr: Option<MemoryRegion>,
    qps: Vec<QpNum>,
    peers: Vec<Option<Endpoint>>,
    started: bool,
}

impl Tenant {
    fn new(send: bool, conns: u32, writes: u64, board: SharedBoard, log: Shared) -> Self {
        Tenant {
            send,
            conns,
            writes,
            board,
            log,
            me: 0,
            cq: 0,
            mr: None,
            qps: Vec::new(),
            peers: Vec::new(),
            started: false,
        }
    }

    fn key(&self, c: u32) -> u64 {
        (self.me as u64) << 16 | c as u64
    }

    fn sge(&self, off: u64, len: u64) -> Vec<Sge> {
        let mr = self.mr.expect("registered");
        vec![Sge {
            addr: mr.addr + off,
            length: len as u32,
            lkey: mr.lkey,
        }]
    }

    fn post_all(&mut self, v: &mut dyn Verbs) {
        for c in 0..self.conns {
            let qp = self.qps[c as usize];
            let peer = self.peers[c as usize].expect("connected");
            let part = c as u64 * PART;
            let mut n = 0;
            let mut wrs = Vec::new();
            if self.writes > 0 {
                for k in 0..self.writes {
                    let mut w = SendWr::new(k, SendOp::Write, self.sge(part, 4096));
                    w.remote_addr = peer.addr + part;
                    w.rkey = peer.rkey;
                    wrs.push(w);
                }
            } else {
                for k in 0..M {
                    let len = msg_len(self.me, c, k);
                    let op = if k % 3 == 0 {
                        SendOp::SendWithImm(imm_of(self.me, c, k))
                    } else {
                        SendOp::Send
                    };
                    wrs.push(SendWr::new(2 * k, op, self.sge(part + k * 16384, len)));
                    let mut w = SendWr::new(
                        2 * k + 1,
                        SendOp::Write,
                        self.sge(part + 256 * 1024 + k * 16384, len),
                    );
                    w.remote_addr = peer.addr + part + 256 * 1024 + k * 16384;
                    w.rkey = peer.rkey;
                    wrs.push(w);
                }
                let mut last = SendWr::new(
                    99,
                    SendOp::WriteWithImm(imm_of(self.me, c, 99)),
                    self.sge(part + 400 * 1024, 100),
                );
                last.remote_addr = peer.addr + part + 400 * 1024;
                last.rkey = peer.rkey;
                wrs.push(last);
            }
            for w in wrs {
                v.post_send(qp, w).expect("post");
                n += 1;
            }
            *self
                .log
                .borrow_mut()
                .posted
                .entry((self.me, c))
                .or_default() += n;
        }
    }

    fn record(&mut self, v: &mut dyn Verbs, wcs: Vec<WorkCompletion>) {
        for w in wcs {
            let Some(c) = self.qps.iter().position(|&q| q == w.qp_num) else {
                continue;
            };
            let c = c as u32;
            if !self.send || w.opcode == WcOpcode::Recv || w.opcode == WcOpcode::RecvWithImm {
                let mut log = self.log.borrow_mut();
                log.recv
                    .entry((self.me, c))
                    .or_default()
                    .push((w.wr_id, w.status, w.byte_len, w.imm));
                if w.wr_id == 99 && w.status == WcStatus::Success {
                    let mr = self.mr.expect("registered");
                    let got = v
                        .read_local(mr.addr + c as u64 * PART, PART)
                        .expect("tracked");
                    log.bytes.insert((self.me, c), got);
                }
            } else {
                self.log
                    .borrow_mut()
                    .sent
                    .entry((self.me, c))
                    .or_default()
                    .push((w.wr_id, w.status));
            }
            if w.status != WcStatus::Success {
                let st = v.query_qp(w.qp_num).map(|a| a.state).ok();
                if let Some(st) = st {
                    self.log.borrow_mut().states.insert((self.me, c), st);
                }
            }
        }
    }
}

impl App for Tenant {
    fn start(&mut self, v: &mut dyn Verbs) {
        self.me = v.tenant();
        self.cq = v.create_cq(1 << 14).expect("cq");
        v.req_notify_cq(self.cq).expect("arm");
        let mr = v
            .reg_mr(base(self.me), REGION, Access::ALL.tracked())
            .expect("tracked region");
        self.mr = Some(mr);
        if self.send {
            for c in 0..self.conns {
                let s = seed(self.me, c);
                v.write_local(mr.addr + c as u64 * PART, &pattern(s, PART as usize))
                    .expect("fill");
            }
        }
        let side = if self.send {
            Side::Client
        } else {
            Side::Server
        };
        for c in 0..self.conns {
            let qp = v.create_qp(&QpInit::rc(self.cq)).expect("qp");
            self.qps.push(qp);
            self.peers.push(None);
            let ep = Endpoint {
                host: v.local_host(),
                qpn: qp,
                addr: mr.addr,
                rkey: mr.rkey,
            };
            self.board.borrow_mut().publish(self.key(c), side, ep);
        }
        v.set_timer(v.now() + 1_000_000, T_POLL);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(T_POLL) => {
                let side = if self.send {
                    Side::Client
                } else {
                    Side::Server
                };
                let mut waiting = false;
                for c in 0..self.conns {
                    if self.peers[c as usize].is_some() {
                        continue;
                    }
                    let found = self.board.borrow().lookup(self.key(c), side.peer());
                    match found {
                        Some(ep) => {
                            let qp = self.qps[c as usize];
                            if !self.send {
                                for k in 0..M {
                                    let off = c as u64 * PART + 128 * 1024 + k * 8192;
                                    let r = RecvWr {
                                        wr_id: k,
                                        sg_list: self.sge(off, 8192),
                                    };
                                    v.post_recv(qp, r).expect("recv");
                                }
                                // The last WRITE_WITH_IMM's receive.
                                let r = RecvWr {
                                    wr_id: 99,
                                    sg_list: Vec::new(),
                                };
                                v.post_recv(qp, r).expect("recv");
                            }
                            v.connect_qp(qp, ep.remote()).expect("connect");
                            self.peers[c as usize] = Some(ep);
                            if !self.send {
                                self.board.borrow_mut().publish(
                                    self.key(c) | 1 << 40,
                                    Side::Server,
                                    ep,
                                );
                            }
                        }
                        None => waiting = true,
                    }
                }
                let ready = !waiting
                    && (0..self.conns).all(|c| {
                        self.board
                            .borrow()
                            .lookup(self.key(c) | 1 << 40, Side::Server)
                            .is_some()
                    });
                if self.send && ready && !self.started {
                    self.started = true;
                    self.post_all(v);
                } else if waiting || (self.send && !self.started) {
                    v.set_timer(v.now() + 1_000_000, T_POLL);
                }
            }
            Event::Completion(cq) => {
                let mut wcs = Vec::new();
                poll_and_rearm(v, cq, &mut wcs).expect("poll");
                self.record(v, wcs);
            }
            _ => {}
        }
    }
}

/// Two hosts on a switch; `tenants` tenants on each, tenant t of host 0 with `conns`
/// connections to tenant t of host 1, all under `mw`.
fn run_tenants(mw: &str, tenants: u32, conns: u32, writes: u64, extra: Value) -> Log {
    let mut s = json!({
        "duration": "30ms",
        "nic": {"mtu": 1024, "rto": "100us"},
        "topology": {"kind": "edges", "nodes": ["h0", "h1", "sw"], "switches": ["sw"],
            "links": [{"a": "h0", "b": "sw", "rate": "40Gbps", "delay": "1us", "loss": 0.01},
                      {"a": "h1", "b": "sw", "rate": "40Gbps", "delay": "1us", "loss": 0.01}]},
    });
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    let mut sim = build(&s);
    let apps_board = board();
    let agents_board = board();
    let log: Shared = Rc::default();
    let drum: DrumConfig =
        serde_json::from_value(json!({"bounce_size": "16KB", "recvs_per_pipe": 32})).unwrap();
    let drum_ud: DrumConfig =
        serde_json::from_value(json!({"pipe": "ud", "ud_rto": "50us"})).unwrap();
    let share = ShareConfig::default();
    let raw = RawConfig::default();
    let f: &dyn MiddlewareFactory = match mw {
        "drum" => &drum,
        "drum_ud" => &drum_ud,
        "share" => &share,
        _ => &raw,
    };
    for h in 0..2u32 {
        let caps = sim.world().hosts[h as usize].caps.clone();
        // The simulated host's agent-memory shares, as the scenario builder gives them.
        let shares = sim.world().hosts[h as usize].nic.mem.shares.clone();
        let mut ctx = HostCtx::new(h, caps)
            .with_board(agents_board.clone())
            .with_shares(shares);
        let layers: Vec<Box<dyn Middleware>> = (1..=tenants)
            .map(|t| f.build(&mut ctx, t).expect("build"))
            .collect();
        let agents = ctx.take_agents();
        if !agents.is_empty() {
            sim.set_agent(h, agents).unwrap();
        }
        for l in layers {
            let app = Tenant::new(h == 0, conns, writes, apps_board.clone(), log.clone());
            sim.add_app(h, Box::new(app), vec![l]).unwrap();
        }
    }
    sim.run();
    let out = std::mem::take(&mut *log.borrow_mut());
    out
}

#[test]
fn every_byte_and_immediate_value_of_every_tenant_arrives_once_through_shared_qps_under_loss() {
    let (tenants, conns) = (3, 4);
    for mw in ["raw", "drum", "share", "drum_ud"] {
        let log = run_tenants(mw, tenants, conns, 0, json!({}));
        for t in 1..=tenants {
            for c in 0..conns {
                let recv = &log.recv[&(t, c)];
                // Every SEND once, in order, with its length and immediate value, then the
                // WRITE_WITH_IMM with its own.
                let want: Vec<(u64, WcStatus, u64, Option<u32>)> = (0..M)
                    .map(|k| {
                        let imm = (k % 3 == 0).then(|| imm_of(t, c, k));
                        (k, WcStatus::Success, msg_len(t, c, k), imm)
                    })
                    .chain([(99, WcStatus::Success, 100, Some(imm_of(t, c, 99)))])
                    .collect();
                assert_eq!(recv, &want, "{mw}: tenant {t} connection {c}");
                let sent = &log.sent[&(t, c)];
                assert_eq!(sent.len() as u64, 2 * M + 1, "{mw}");
                assert!(sent.iter().all(|s| s.1 == WcStatus::Success), "{mw}");
                // The bytes: each SEND in its receive, each WRITE at its place, nothing else.
                let src = pattern(seed(t, c), PART as usize);
                let got = &log.bytes[&(t, c)];
                for k in 0..M as usize {
                    let len = msg_len(t, c, k as u64) as usize;
                    let r = 128 * 1024 + k * 8192;
                    assert_eq!(
                        &got[r..r + len],
                        &src[k * 16384..k * 16384 + len],
                        "{mw}: SEND {k} of {t}/{c}"
                    );
                    assert!(got[r + len..r + 8192].iter().all(|&b| b == 0));
                    let w = 256 * 1024 + k * 16384;
                    assert_eq!(&got[w..w + len], &src[w..w + len], "{mw}: WRITE {k}");
                    assert!(got[w + len..w + 16384].iter().all(|&b| b == 0));
                }
                let w = 400 * 1024;
                assert_eq!(&got[w..w + 100], &src[w..w + 100], "{mw}: WRITE_WITH_IMM");
            }
        }
        if mw.starts_with("drum") {
            // Same scenario, same seed: the same completions and bytes.
            assert_eq!(run_tenants(mw, tenants, conns, 0, json!({})), log);
        }
    }
}

#[test]
fn a_dead_peer_fails_every_connection_of_its_shared_qps_each_wr_once() {
    // Host 1's link goes down for good at 300 µs, with WRITEs of 10 connections under way.
    let events = json!({"link_events": [{"a": "h1", "b": "sw", "down": "300us"}]});
    for mw in ["raw", "drum"] {
        let log = run_tenants(mw, 2, 5, 100, events.clone());
        let mut retry = 0;
        for t in 1..=2 {
            for c in 0..5 {
                let sent = &log.sent[&(t, c)];
                // Every WR completed exactly once, in posting order: successes, then errors.
                let ids: Vec<u64> = sent.iter().map(|s| s.0).collect();
                assert_eq!(ids, (0..100).collect::<Vec<_>>(), "{mw} {t}/{c}");
                let first_err = sent
                    .iter()
                    .position(|s| s.1 != WcStatus::Success)
                    .unwrap_or_else(|| panic!("{mw} {t}/{c}: no error"));
                assert!(first_err > 0, "{mw}: some WRITEs went through before");
                assert!(sent[first_err + 1..]
                    .iter()
                    .all(|s| s.1 == WcStatus::Flushed));
                retry += (sent[first_err].1 == WcStatus::RetryExceeded) as u32;
                assert!(matches!(
                    sent[first_err].1,
                    WcStatus::RetryExceeded | WcStatus::Flushed
                ));
                assert_eq!(log.states[&(t, c)], QpState::Error, "{mw} {t}/{c}");
            }
        }
        if mw == "raw" {
            // Each connection's own QP gave up by itself.
            assert_eq!(retry, 10);
        } else {
            // 10 connections, 5 per shared QP: each shared QP names one WR's connection, the
            // others see their WRs flushed.
            assert_eq!(retry, 2, "{mw}");
        }
    }
}

/// What the shared carriers cost a SEND workload: `send_bw` of `size` messages on `qps`
/// connections from host 0 to host 1 (tx_depth 16), goodput in Gbit/s and the agent's counters,
/// under raw, drum with RC pipes, drum with the UD carrier, and the same with every SEND
/// carrying immediate data... (printed; `cargo test -p braid-sim --test drum_iso carriers --
/// --ignored --nocapture`).
#[test]
#[ignore]
fn carriers() {
    for size in ["256B", "1KB", "4KB", "16KB"] {
        for (name, mw) in [
            ("raw", json!("raw")),
            ("drum rc", json!({"kind": "drum"})),
            ("drum ud", json!({"kind": "drum", "pipe": "ud"})),
            ("share", json!("share")),
        ] {
            let s = json!({
                "duration": "2ms",
                "nic": {"mtu": 1024},
                "topology": {"kind": "edges", "nodes": ["h0", "h1", "sw"], "switches": ["sw"],
                    "links": [{"a": "h0", "b": "sw", "rate": "40Gbps", "delay": "1us"},
                              {"a": "h1", "b": "sw", "rate": "40Gbps", "delay": "1us"}]},
                "middleware": {"default": [mw]},
                "apps": [{"kind": "send_bw", "src": 0, "dst": 1, "size": size, "qps": 8,
                          "tx_depth": 16, "duration": "1ms", "start": "50us"}],
            });
            let mut sim = build(&s);
            sim.run();
            let r = sim.results();
            let t = &r.tables["tenants"];
            let label = match t.get("label") {
                Some(braid_sim::Column::Str(l)) => l.clone(),
                _ => Vec::new(),
            };
            let f = |k: &str| match t.get(k) {
                Some(braid_sim::Column::F64(v)) => v.clone(),
                _ => Vec::new(),
            };
            let gbps = f("goodput_gbps");
            let app = label.iter().position(|l| l.ends_with("client"));
            let agent = label.iter().position(|l| l == "agent");
            let at = |k: &str| agent.and_then(|i| f(k).get(i).copied()).unwrap_or(f64::NAN);
            println!(
                "{size:>5} {name:8} goodput {:6.2} Gbit/s  segments {:8} retransmits {:5} acks {:8}",
                app.and_then(|i| gbps.get(i).copied()).unwrap_or(f64::NAN),
                at("drum_ud_segments"),
                at("drum_ud_retransmits"),
                at("drum_ud_acks"),
            );
        }
    }
}
