//! RNIC features through the verbs seam: cross-channel WAIT and SEND_ENABLE on managed QPs,
//! zero-byte work requests, completion semantics.

mod common;
use braid_verbs::*;
use common::*;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;

/// What the two sides of a test share out of band.
#[derive(Default)]
struct Shared {
    /// Server QPs and memory.
    server_qps: Vec<QpNum>,
    server_mr: Option<MemoryRegion>,
    server_host: u32,
    client_qps: Vec<QpNum>,
    client_host: u32,
    /// Completions seen: (time, side, wr_id, opcode, byte_len).
    log: Vec<(u64, &'static str, u64, WcOpcode, u64)>,
}

type S = Rc<RefCell<Shared>>;

/// The server: `n` plain RC QPs, a memory region and `recvs` RECVs per QP.
struct Server {
    s: S,
    n: usize,
    recvs: u32,
}

impl App for Server {
    fn start(&mut self, v: &mut dyn Verbs) {
        let cq = v.create_cq(1024).unwrap();
        v.req_notify_cq(cq).unwrap();
        let mr = v.reg_mr(0x1000_0000, 4 << 20, Access::ALL).unwrap();
        let mut s = self.s.borrow_mut();
        s.server_host = v.local_host();
        s.server_mr = Some(mr);
        for _ in 0..self.n {
            let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
            for i in 0..self.recvs {
                v.post_recv(
                    qp,
                    RecvWr {
                        wr_id: i as u64,
                        sg_list: vec![Sge {
                            addr: mr.addr,
                            length: 1 << 20,
                            lkey: mr.lkey,
                        }],
                    },
                )
                .unwrap();
            }
            s.server_qps.push(qp);
        }
        v.set_timer(v.now(), 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(1) => {
                let s = self.s.borrow();
                for (i, &qp) in s.server_qps.iter().enumerate() {
                    v.connect_qp(
                        qp,
                        RemoteQp {
                            host: s.client_host,
                            qpn: s.client_qps[i],
                            udp_sport: None,
                        },
                    )
                    .unwrap();
                }
            }
            Event::Completion(cq) => {
                let mut out = Vec::new();
                braid_verbs::poll_and_rearm(v, cq, &mut out).unwrap();
                let now = v.now();
                for wc in out {
                    self.s
                        .borrow_mut()
                        .log
                        .push((now, "server", wc.wr_id, wc.opcode, wc.byte_len));
                }
            }
            _ => {}
        }
    }
}

/// The client: QPs described by `inits`, then a script run once connected.
struct Client {
    s: S,
    inits: Vec<QpInit>,
    script: fn(&mut dyn Verbs, &[QpNum], &[CqId], &MemoryRegion, &MemoryRegion),
    cqs: Vec<CqId>,
    mr: Option<MemoryRegion>,
}

impl App for Client {
    fn start(&mut self, v: &mut dyn Verbs) {
        self.cqs = (0..self.inits.len())
            .map(|_| {
                let cq = v.create_cq(1024).unwrap();
                v.req_notify_cq(cq).unwrap();
                cq
            })
            .collect();
        self.mr = Some(v.reg_mr(0x2000_0000, 4 << 20, Access::ALL).unwrap());
        let mut s = self.s.borrow_mut();
        s.client_host = v.local_host();
        for (i, init) in self.inits.iter().enumerate() {
            let init = QpInit {
                send_cq: self.cqs[i],
                recv_cq: self.cqs[i],
                ..init.clone()
            };
            s.client_qps.push(v.create_qp(&init).unwrap());
        }
        v.set_timer(v.now(), 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(1) => {
                let (qps, server_qps, host, smr) = {
                    let s = self.s.borrow();
                    (
                        s.client_qps.clone(),
                        s.server_qps.clone(),
                        s.server_host,
                        s.server_mr.unwrap(),
                    )
                };
                for (i, &qp) in qps.iter().enumerate() {
                    v.connect_qp(
                        qp,
                        RemoteQp {
                            host,
                            qpn: server_qps[i],
                            udp_sport: None,
                        },
                    )
                    .unwrap();
                }
                (self.script)(v, &qps, &self.cqs, &self.mr.unwrap(), &smr);
            }
            Event::Completion(cq) => {
                let mut out = Vec::new();
                braid_verbs::poll_and_rearm(v, cq, &mut out).unwrap();
                let now = v.now();
                for wc in out {
                    assert_eq!(wc.status, WcStatus::Success);
                    self.s
                        .borrow_mut()
                        .log
                        .push((now, "client", wc.wr_id, wc.opcode, wc.byte_len));
                }
            }
            _ => {}
        }
    }
}

fn write(wr_id: u64, len: u32, lmr: &MemoryRegion, rmr: &MemoryRegion) -> SendWr {
    let sg = if len == 0 {
        vec![]
    } else {
        vec![Sge {
            addr: lmr.addr,
            length: len,
            lkey: lmr.lkey,
        }]
    };
    let mut wr = SendWr::new(wr_id, SendOp::Write, sg);
    wr.remote_addr = rmr.addr;
    wr.rkey = rmr.rkey;
    wr
}

fn run_script(
    inits: Vec<QpInit>,
    recvs: u32,
    script: fn(&mut dyn Verbs, &[QpNum], &[CqId], &MemoryRegion, &MemoryRegion),
) -> Vec<(u64, &'static str, u64, WcOpcode, u64)> {
    let s: S = Default::default();
    let scenario = json!({"duration": "10ms", "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let mut sim = build(&scenario);
    let n = inits.len();
    sim.add_app(
        1,
        Box::new(Server {
            s: s.clone(),
            n,
            recvs,
        }),
        vec![Box::new(Raw)],
    )
    .unwrap();
    sim.add_app(
        0,
        Box::new(Client {
            s: s.clone(),
            inits,
            script,
            cqs: vec![],
            mr: None,
        }),
        vec![Box::new(Raw)],
    )
    .unwrap();
    sim.run();
    let log = s.borrow().log.clone();
    log
}

fn time_of(log: &[(u64, &str, u64, WcOpcode, u64)], side: &str, wr_id: u64) -> u64 {
    log.iter()
        .find(|e| e.1 == side && e.2 == wr_id)
        .unwrap_or_else(|| panic!("no completion {side}/{wr_id} in {log:?}"))
        .0
}

#[test]
fn wait_blocks_a_queue_until_another_cq_completes() {
    // QP0 sends 1 MB (200 µs at 40G); QP1 holds a tiny WRITE behind WAIT(cq0, 1).
    let log = run_script(
        vec![QpInit::rc(0), QpInit::rc(0)],
        0,
        |v, qps, cqs, l, r| {
            v.post_send(qps[0], write(1, 1_000_000, l, r)).unwrap();
            let mut wait = SendWr::new(
                2,
                SendOp::Wait {
                    cq: cqs[0],
                    count: 1,
                },
                vec![],
            );
            wait.signaled = true;
            v.post_send(qps[1], wait).unwrap();
            v.post_send(qps[1], write(3, 8, l, r)).unwrap();
        },
    );
    let big = time_of(&log, "client", 1);
    let waited = time_of(&log, "client", 2);
    let small = time_of(&log, "client", 3);
    assert!(
        waited >= big,
        "WAIT finished before the CQ had a completion"
    );
    assert!(
        small > big,
        "the WRITE behind WAIT completed before the awaited one: {small} <= {big}"
    );

    // Control: without the WAIT the small WRITE finishes long before the big one.
    let log = run_script(vec![QpInit::rc(0), QpInit::rc(0)], 0, |v, qps, _, l, r| {
        v.post_send(qps[0], write(1, 1_000_000, l, r)).unwrap();
        v.post_send(qps[1], write(3, 8, l, r)).unwrap();
    });
    assert!(time_of(&log, "client", 3) < time_of(&log, "client", 1));
}

#[test]
fn managed_queue_runs_only_what_was_enabled() {
    let managed = QpInit {
        managed_send: true,
        ..QpInit::rc(0)
    };
    let log = run_script(
        vec![QpInit::rc(0), managed, QpInit::rc(0)],
        0,
        |v, qps, cqs, l, r| {
            // Two WRITEs on the managed QP; only one gets enabled, after QP0's big WRITE completes.
            v.post_send(qps[1], write(10, 100, l, r)).unwrap();
            v.post_send(qps[1], write(11, 100, l, r)).unwrap();
            v.post_send(qps[0], write(1, 1_000_000, l, r)).unwrap();
            v.post_send(
                qps[2],
                SendWr::new(
                    20,
                    SendOp::Wait {
                        cq: cqs[0],
                        count: 1,
                    },
                    vec![],
                ),
            )
            .unwrap();
            v.post_send(
                qps[2],
                SendWr::new(
                    21,
                    SendOp::SendEnable {
                        qp: qps[1],
                        count: 1,
                    },
                    vec![],
                ),
            )
            .unwrap();
        },
    );
    let big = time_of(&log, "client", 1);
    assert!(
        time_of(&log, "client", 10) > big,
        "managed WR ran before it was enabled"
    );
    assert!(
        log.iter().all(|e| e.2 != 11),
        "the second managed WR was never enabled yet completed"
    );
    assert!(time_of(&log, "client", 21) >= big);
}

#[test]
fn zero_byte_work_requests_complete() {
    let log = run_script(vec![QpInit::rc(0)], 4, |v, qps, _, l, r| {
        v.post_send(qps[0], write(1, 0, l, r)).unwrap();
        v.post_send(qps[0], SendWr::new(2, SendOp::Send, vec![]))
            .unwrap();
        v.post_send(qps[0], SendWr::new(3, SendOp::SendWithImm(7), vec![]))
            .unwrap();
        v.post_send(qps[0], SendWr::new(4, SendOp::Nop, vec![]))
            .unwrap();
    });
    for id in 1..=4 {
        time_of(&log, "client", id);
    }
    // The two zero-byte SENDs each consumed a RECV, with byte_len 0; the second carried an immediate.
    let recvs: Vec<_> = log.iter().filter(|e| e.1 == "server").collect();
    assert_eq!(recvs.len(), 2, "{log:?}");
    assert!(recvs.iter().all(|e| e.4 == 0));
    assert_eq!(recvs[1].3, WcOpcode::RecvWithImm);
}

#[test]
fn completions_arrive_in_posting_order_and_unsignaled_ones_are_silent() {
    let log = run_script(vec![QpInit::rc(0)], 0, |v, qps, _, l, r| {
        for i in 0..10u64 {
            let mut wr = write(i, 3000, l, r);
            wr.signaled = i % 3 == 2;
            v.post_send(qps[0], wr).unwrap();
        }
    });
    let ids: Vec<u64> = log
        .iter()
        .filter(|e| e.1 == "client")
        .map(|e| e.2)
        .collect();
    assert_eq!(ids, vec![2, 5, 8]);
}

#[test]
fn send_without_posted_recv_never_completes_while_receiver_is_not_ready() {
    // Receiver-not-ready: the server posts no RECV at first; the SEND is NAK'd and retried.
    let log = run_script(vec![QpInit::rc(0)], 0, |v, qps, _, l, _| {
        v.post_send(
            qps[0],
            SendWr::new(
                1,
                SendOp::Send,
                vec![Sge {
                    addr: l.addr,
                    length: 100,
                    lkey: l.lkey,
                }],
            ),
        )
        .unwrap();
    });
    // No RECV is ever posted: the SEND is NAKed (RNR) and retried forever, as with rnr_retry = 7.
    assert!(log.iter().all(|e| e.2 != 1 || e.1 != "client"));
}

#[test]
fn bad_work_requests_are_rejected_at_post_time() {
    let s: S = Default::default();
    struct Bad(S);
    impl App for Bad {
        fn start(&mut self, v: &mut dyn Verbs) {
            let cq = v.create_cq(16).unwrap();
            v.req_notify_cq(cq).unwrap();
            let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
            // Not connected yet.
            assert!(matches!(
                v.post_send(qp, SendWr::new(1, SendOp::Nop, vec![])),
                Err(VerbsError::InvalidState(_))
            ));
            v.connect_qp(
                qp,
                RemoteQp {
                    host: 0,
                    qpn: 0,
                    udp_sport: None,
                },
            )
            .unwrap();
            // Unknown lkey.
            let wr = SendWr::new(
                2,
                SendOp::Write,
                vec![Sge {
                    addr: 0,
                    length: 10,
                    lkey: 0xdead,
                }],
            );
            assert!(matches!(
                v.post_send(qp, wr),
                Err(VerbsError::BadKey(0xdead))
            ));
            assert!(matches!(
                v.create_qp(&QpInit::rc(99)),
                Err(VerbsError::NoSuchCq(99))
            ));
            self.0.borrow_mut().client_host = 1;
        }
        fn on_event(&mut self, _: &mut dyn Verbs, _: Event) {}
    }
    let scenario = json!({"duration": "1ms", "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let mut sim = build(&scenario);
    sim.add_app(0, Box::new(Bad(s.clone())), vec![]).unwrap();
    sim.run();
    assert_eq!(s.borrow().client_host, 1, "the app ran");
}

/// UD and UC: unreliable transports complete sends once on the wire; UD delivers datagrams with
/// the sender's address, UC carries one-sided WRITEs without acknowledgements.
#[test]
fn ud_datagrams_and_uc_writes() {
    #[derive(Default)]
    struct St {
        ud_server: Option<(u32, QpNum)>,
        uc_server: Option<(u32, QpNum, MemoryRegion)>,
        uc_client: Option<(u32, QpNum)>,
        server_wcs: Vec<WorkCompletion>,
        client_wcs: Vec<WorkCompletion>,
        data: Vec<u8>,
    }
    type T = Rc<RefCell<St>>;
    struct Srv(T, Option<(QpNum, QpNum)>);
    impl App for Srv {
        fn start(&mut self, v: &mut dyn Verbs) {
            let cq = v.create_cq(64).unwrap();
            v.req_notify_cq(cq).unwrap();
            let mr = v.reg_mr(0x1000, 4096, Access::ALL).unwrap();
            let ud = v
                .create_qp(&QpInit {
                    qp_type: QpType::Ud,
                    ..QpInit::rc(cq)
                })
                .unwrap();
            v.connect_qp(
                ud,
                RemoteQp {
                    host: 0,
                    qpn: 0,
                    udp_sport: None,
                },
            )
            .unwrap();
            for i in 0..3 {
                v.post_recv(
                    ud,
                    RecvWr {
                        wr_id: i,
                        sg_list: vec![Sge {
                            addr: 0x1000,
                            length: 512,
                            lkey: mr.lkey,
                        }],
                    },
                )
                .unwrap();
            }
            let uc = v
                .create_qp(&QpInit {
                    qp_type: QpType::Uc,
                    ..QpInit::rc(cq)
                })
                .unwrap();
            let mut s = self.0.borrow_mut();
            s.ud_server = Some((v.local_host(), ud));
            s.uc_server = Some((v.local_host(), uc, mr));
            self.1 = Some((ud, uc));
            v.set_timer(v.now(), 1);
        }
        fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
            match ev {
                Event::Timer(1) => {
                    let (h, q) = self.0.borrow().uc_client.unwrap();
                    v.connect_qp(
                        self.1.unwrap().1,
                        RemoteQp {
                            host: h,
                            qpn: q,
                            udp_sport: None,
                        },
                    )
                    .unwrap();
                }
                Event::Timer(2) => {
                    let d = v.read_local(0x1800, 4).unwrap();
                    self.0.borrow_mut().data = d;
                }
                Event::Completion(cq) => {
                    let mut out = Vec::new();
                    braid_verbs::poll_and_rearm(v, cq, &mut out).unwrap();
                    self.0.borrow_mut().server_wcs.extend(out);
                    v.set_timer(v.now() + 1_000_000, 2);
                }
                _ => {}
            }
        }
    }
    struct Cli(T);
    impl App for Cli {
        fn start(&mut self, v: &mut dyn Verbs) {
            let cq = v.create_cq(64).unwrap();
            v.req_notify_cq(cq).unwrap();
            let mr = v.reg_mr(0x9000, 4096, Access::ALL).unwrap();
            v.write_local(0x9000, &[1, 2, 3, 4]).unwrap();
            let ud = v
                .create_qp(&QpInit {
                    qp_type: QpType::Ud,
                    sq_sig_all: true,
                    ..QpInit::rc(cq)
                })
                .unwrap();
            let uc = v
                .create_qp(&QpInit {
                    qp_type: QpType::Uc,
                    sq_sig_all: true,
                    ..QpInit::rc(cq)
                })
                .unwrap();
            self.0.borrow_mut().uc_client = Some((v.local_host(), uc));
            v.connect_qp(
                ud,
                RemoteQp {
                    host: 0,
                    qpn: 0,
                    udp_sport: None,
                },
            )
            .unwrap();
            let (dh, dq) = self.0.borrow().ud_server.unwrap();
            for i in 0..2u64 {
                let mut wr = SendWr::new(
                    i,
                    SendOp::Send,
                    vec![Sge {
                        addr: 0x9000,
                        length: 100,
                        lkey: mr.lkey,
                    }],
                );
                wr.ud_dest = Some(RemoteQp {
                    host: dh,
                    qpn: dq,
                    udp_sport: None,
                });
                v.post_send(ud, wr).unwrap();
            }
            // A datagram larger than the MTU is refused at post time.
            let mut big = SendWr::new(
                9,
                SendOp::Send,
                vec![Sge {
                    addr: 0x9000,
                    length: 2000,
                    lkey: mr.lkey,
                }],
            );
            big.ud_dest = Some(RemoteQp {
                host: dh,
                qpn: dq,
                udp_sport: None,
            });
            assert!(v.post_send(ud, big).is_err());
            let (sh, sq, smr) = self.0.borrow().uc_server.unwrap();
            v.connect_qp(
                uc,
                RemoteQp {
                    host: sh,
                    qpn: sq,
                    udp_sport: None,
                },
            )
            .unwrap();
            let mut w = SendWr::new(
                5,
                SendOp::Write,
                vec![Sge {
                    addr: 0x9000,
                    length: 4,
                    lkey: mr.lkey,
                }],
            );
            w.remote_addr = 0x1800;
            w.rkey = smr.rkey;
            v.post_send(uc, w).unwrap();
            // READ is not a UC operation.
            assert!(v
                .post_send(uc, SendWr::new(6, SendOp::Read, vec![]))
                .is_err());
        }
        fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
            if let Event::Completion(cq) = ev {
                let mut out = Vec::new();
                braid_verbs::poll_and_rearm(v, cq, &mut out).unwrap();
                self.0.borrow_mut().client_wcs.extend(out);
            }
        }
    }
    let st: T = Default::default();
    let scenario = json!({"duration": "1ms", "nic": {"data_check": true},
                          "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let mut sim = build(&scenario);
    sim.add_app(1, Box::new(Srv(st.clone(), None)), vec![])
        .unwrap();
    sim.add_app(0, Box::new(Cli(st.clone())), vec![]).unwrap();
    sim.run();
    let s = st.borrow();
    let recvs: Vec<_> = s
        .server_wcs
        .iter()
        .filter(|w| w.opcode == WcOpcode::Recv)
        .collect();
    assert_eq!(recvs.len(), 2, "{:?}", s.server_wcs);
    assert!(recvs
        .iter()
        .all(|w| w.byte_len == 100 && w.src_host == sim.host_address(0)));
    assert_eq!(
        s.client_wcs.len(),
        3,
        "two datagrams and one UC WRITE completed: {:?}",
        s.client_wcs
    );
    assert_eq!(s.data, vec![1, 2, 3, 4], "the UC WRITE landed");
    assert_eq!(
        sim.results().counters["acks"],
        0,
        "unreliable transports send no ACKs"
    );
}

/// RECV_ENABLE: a managed receive queue holds its posted RECVs back (the SEND meets
/// receiver-not-ready) until another queue of the same host enables them.
#[test]
fn recv_enable_releases_a_managed_receive_queue() {
    #[derive(Default)]
    struct St {
        srv: Option<(u32, QpNum)>,
        cli: Option<(u32, QpNum)>,
        recv_at: Option<u64>,
        enabled_at: Option<u64>,
    }
    type T = Rc<RefCell<St>>;
    struct Srv(T, QpNum, QpNum);
    impl App for Srv {
        fn start(&mut self, v: &mut dyn Verbs) {
            let cq = v.create_cq(64).unwrap();
            v.req_notify_cq(cq).unwrap();
            let mr = v.reg_mr(0x1000, 4096, Access::ALL).unwrap();
            self.1 = v
                .create_qp(&QpInit {
                    managed_recv: true,
                    ..QpInit::rc(cq)
                })
                .unwrap();
            v.post_recv(
                self.1,
                RecvWr {
                    wr_id: 1,
                    sg_list: vec![Sge {
                        addr: 0x1000,
                        length: 512,
                        lkey: mr.lkey,
                    }],
                },
            )
            .unwrap();
            // A helper QP (connected to itself, as cross-channel QPs often are) posts the ENABLE.
            self.2 = v.create_qp(&QpInit::rc(cq)).unwrap();
            v.connect_qp(
                self.2,
                RemoteQp {
                    host: v.local_host(),
                    qpn: self.2,
                    udp_sport: None,
                },
            )
            .unwrap();
            self.0.borrow_mut().srv = Some((v.local_host(), self.1));
            v.set_timer(v.now(), 1);
            v.set_timer(50_000_000, 2);
        }
        fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
            match ev {
                Event::Timer(1) => {
                    let (h, q) = self.0.borrow().cli.unwrap();
                    v.connect_qp(
                        self.1,
                        RemoteQp {
                            host: h,
                            qpn: q,
                            udp_sport: None,
                        },
                    )
                    .unwrap();
                }
                Event::Timer(2) => {
                    // At 50 µs: enable one RECV.
                    v.post_send(
                        self.2,
                        SendWr::new(
                            9,
                            SendOp::RecvEnable {
                                qp: self.1,
                                count: 1,
                            },
                            vec![],
                        ),
                    )
                    .unwrap();
                    self.0.borrow_mut().enabled_at = Some(v.now());
                }
                Event::Completion(cq) => {
                    let mut out = Vec::new();
                    braid_verbs::poll_and_rearm(v, cq, &mut out).unwrap();
                    for w in out {
                        if w.opcode == WcOpcode::Recv {
                            self.0.borrow_mut().recv_at = Some(v.now());
                        }
                    }
                }
                _ => {}
            }
        }
    }
    struct Cli(T);
    impl App for Cli {
        fn start(&mut self, v: &mut dyn Verbs) {
            let cq = v.create_cq(64).unwrap();
            v.req_notify_cq(cq).unwrap();
            let mr = v.reg_mr(0x9000, 4096, Access::ALL).unwrap();
            let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
            self.0.borrow_mut().cli = Some((v.local_host(), qp));
            let (h, sq) = self.0.borrow().srv.unwrap();
            v.connect_qp(
                qp,
                RemoteQp {
                    host: h,
                    qpn: sq,
                    udp_sport: None,
                },
            )
            .unwrap();
            v.post_send(
                qp,
                SendWr::new(
                    1,
                    SendOp::Send,
                    vec![Sge {
                        addr: 0x9000,
                        length: 100,
                        lkey: mr.lkey,
                    }],
                ),
            )
            .unwrap();
        }
        fn on_event(&mut self, _: &mut dyn Verbs, _: Event) {}
    }
    let st: T = Default::default();
    let scenario = json!({"duration": "1ms", "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let mut sim = build(&scenario);
    sim.add_app(1, Box::new(Srv(st.clone(), 0, 0)), vec![])
        .unwrap();
    sim.add_app(0, Box::new(Cli(st.clone())), vec![]).unwrap();
    sim.run();
    let s = st.borrow();
    let (recv, enabled) = (
        s.recv_at.expect("the SEND was received"),
        s.enabled_at.unwrap(),
    );
    assert!(
        recv > enabled,
        "received at {recv} before RECV_ENABLE at {enabled}"
    );
    assert!(
        sim.results().counters["rnr_naks"] > 0,
        "the SEND met a not-ready receiver first"
    );
}
