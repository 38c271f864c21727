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
    // QP0 sends 1 MB (200 µs at 40G); QP1 holds a tiny WRITE behind WAIT(cq0, 1). (QP1 is
    // created cross-channel: only such a QP may post WAIT.)
    let cross = QpInit {
        cross_channel: true,
        ..QpInit::rc(0)
    };
    let log = run_script(vec![QpInit::rc(0), cross], 0, |v, qps, cqs, l, r| {
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
    });
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
    // QP2 posts WAIT and SEND_ENABLE: it must be cross-channel.
    let cross = QpInit {
        cross_channel: true,
        ..QpInit::rc(0)
    };
    let log = run_script(
        vec![QpInit::rc(0), managed, cross],
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
            // A helper QP (connected to itself, as cross-channel QPs often are) posts the ENABLE;
            // it must be created cross-channel.
            self.2 = v
                .create_qp(&QpInit {
                    cross_channel: true,
                    ..QpInit::rc(cq)
                })
                .unwrap();
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

// ------------------------------------------------------------------ QP states, errors, addresses

/// One end of the scripted tests below: its CQs (send and receive apart), QPs, memory, and the
/// other end as it published itself.
#[derive(Default, Clone)]
struct Me {
    scq: CqId,
    /// With `Peer::cq_per_qp`: each QP's own send CQ.
    qcqs: Vec<CqId>,
    qps: Vec<QpNum>,
    mr: Option<MemoryRegion>,
    /// Extra regions (registered by `Peer::regions`).
    mrs: Vec<MemoryRegion>,
    peer: Ep,
}

/// What an end publishes out of band.
#[derive(Default, Clone, Debug)]
struct Ep {
    /// Its send and receive CQs.
    cqs: (CqId, CqId),
    qps: Vec<QpNum>,
    /// Each QP's source address (query_qp), what the peer connects to.
    addrs: Vec<u32>,
    mr: Option<MemoryRegion>,
    mrs: Vec<MemoryRegion>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Both ends exist and this one connected its QPs (if it connects at all).
    Connected,
    Timer(u64),
    /// New completions were logged.
    Completions,
}

#[derive(Default)]
struct Board {
    eps: [Ep; 2],
    /// Completions per side: (time, CQ, completion).
    wcs: [Vec<(u64, CqId, WorkCompletion)>; 2],
    /// Free-form facts a script records for the test to check.
    notes: Vec<String>,
    /// Per side: completion events received.
    events: [u32; 2],
    /// A number scripts may share (e.g. a source port chosen by the test).
    value: u64,
}

type B = Rc<RefCell<Board>>;

type Script = fn(&mut dyn Verbs, &mut Me, &B, Step);

/// A scripted end: creates its CQs, QPs (from `inits`, CQs replaced by its own), one region of
/// `len` bytes at `base` with `access` (plus `regions`), posts `recvs` RECVs per QP, publishes
/// itself, connects its QPs index by index to the other end's at t = 0 (if `connect`), then
/// runs `script` on every step.
struct Peer {
    b: B,
    side: usize,
    inits: Vec<QpInit>,
    base: u64,
    len: u64,
    access: Access,
    regions: Vec<(u64, u64, Access)>,
    recvs: u32,
    connect: bool,
    /// Give each QP a send CQ of its own (else all share one).
    cq_per_qp: bool,
    script: Script,
    me: Me,
}

impl Peer {
    fn new(b: &B, side: usize, inits: Vec<QpInit>, script: Script) -> Self {
        Peer {
            b: b.clone(),
            side,
            inits,
            base: 0x1000_0000 * (side as u64 + 1),
            len: 1 << 20,
            access: Access::ALL,
            regions: vec![],
            recvs: 0,
            connect: true,
            cq_per_qp: false,
            script,
            me: Me::default(),
        }
    }
}

impl App for Peer {
    fn start(&mut self, v: &mut dyn Verbs) {
        let scq = v.create_cq(4096).unwrap();
        let rcq = v.create_cq(4096).unwrap();
        v.req_notify_cq(scq).unwrap();
        v.req_notify_cq(rcq).unwrap();
        let mr = v.reg_mr(self.base, self.len, self.access).unwrap();
        let mrs: Vec<_> = self
            .regions
            .iter()
            .map(|&(a, l, acc)| v.reg_mr(a, l, acc).unwrap())
            .collect();
        let mut qps = vec![];
        let mut addrs = vec![];
        let mut qcqs = vec![];
        for init in &self.inits {
            let qcq = if self.cq_per_qp {
                let c = v.create_cq(4096).unwrap();
                v.req_notify_cq(c).unwrap();
                qcqs.push(c);
                c
            } else {
                scq
            };
            let qp = v
                .create_qp(&QpInit {
                    send_cq: qcq,
                    recv_cq: rcq,
                    ..init.clone()
                })
                .unwrap();
            let a = v.query_qp(qp).unwrap();
            assert_eq!(a.state, QpState::Init, "a new QP is in Init");
            addrs.push(a.local_addr);
            for i in 0..self.recvs {
                v.post_recv(
                    qp,
                    RecvWr {
                        wr_id: 1000 + i as u64,
                        sg_list: vec![Sge {
                            addr: mr.addr,
                            length: 64 << 10,
                            lkey: mr.lkey,
                        }],
                    },
                )
                .unwrap();
            }
            qps.push(qp);
        }
        self.b.borrow_mut().eps[self.side] = Ep {
            cqs: (scq, rcq),
            qps: qps.clone(),
            addrs,
            mr: Some(mr),
            mrs: mrs.clone(),
        };
        self.me = Me {
            scq,
            qcqs,
            qps,
            mr: Some(mr),
            mrs,
            peer: Ep::default(),
        };
        v.set_timer(v.now(), 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(1) => {
                self.me.peer = self.b.borrow().eps[1 - self.side].clone();
                if self.connect {
                    for (i, &qp) in self.me.qps.iter().enumerate() {
                        let Some(&qpn) = self.me.peer.qps.get(i) else {
                            continue;
                        };
                        v.connect_qp(
                            qp,
                            RemoteQp {
                                host: self.me.peer.addrs[i],
                                qpn,
                                udp_sport: None,
                            },
                        )
                        .unwrap();
                        assert_eq!(v.query_qp(qp).unwrap().state, QpState::Rts);
                    }
                }
                (self.script)(v, &mut self.me, &self.b, Step::Connected);
            }
            Event::Timer(t) => (self.script)(v, &mut self.me, &self.b, Step::Timer(t)),
            Event::Completion(cq) => {
                let mut out = Vec::new();
                braid_verbs::poll_and_rearm(v, cq, &mut out).unwrap();
                let now = v.now();
                {
                    let mut b = self.b.borrow_mut();
                    b.events[self.side] += 1;
                    b.wcs[self.side].extend(out.iter().map(|w| (now, cq, *w)));
                }
                (self.script)(v, &mut self.me, &self.b, Step::Completions);
            }
            _ => {}
        }
    }
}

fn nothing(_: &mut dyn Verbs, _: &mut Me, _: &B, _: Step) {}

fn sge(mr: &MemoryRegion, off: u64, len: u32) -> Vec<Sge> {
    vec![Sge {
        addr: mr.addr + off,
        length: len,
        lkey: mr.lkey,
    }]
}

/// A WRITE of `len` bytes from the start of `l` to `raddr` with `rkey`.
fn write_to(wr_id: u64, l: &MemoryRegion, len: u32, raddr: u64, rkey: u32) -> SendWr {
    let mut wr = SendWr::new(wr_id, SendOp::Write, sge(l, 0, len));
    wr.remote_addr = raddr;
    wr.rkey = rkey;
    wr
}

fn note(b: &B, s: impl Into<String>) {
    b.borrow_mut().notes.push(s.into());
}

/// (wr_id, status, opcode) of one side's completions on one CQ, in order.
fn wcs_on(b: &B, side: usize, cq: CqId) -> Vec<(u64, WcStatus, WcOpcode)> {
    b.borrow().wcs[side]
        .iter()
        .filter(|e| e.1 == cq)
        .map(|e| (e.2.wr_id, e.2.status, e.2.opcode))
        .collect()
}

fn dumbbell_scenario(extra: serde_json::Value) -> serde_json::Value {
    let mut s = json!({"duration": "10ms",
                       "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

#[test]
fn modify_qp_to_error_flushes_in_order_and_reset_allows_reconnecting() {
    let b: B = Default::default();
    let mut sim = build(&dumbbell_scenario(json!({})));
    // Server: one QP; it resets and reconnects at 140 µs (both ends start PSNs afresh).
    fn server(v: &mut dyn Verbs, me: &mut Me, _: &B, st: Step) {
        match st {
            Step::Connected => v.set_timer(140_000_000, 2),
            Step::Timer(2) => {
                v.modify_qp(me.qps[0], QpModify::Reset).unwrap();
                v.connect_qp(
                    me.qps[0],
                    RemoteQp {
                        host: me.peer.addrs[0],
                        qpn: me.peer.qps[0],
                        udp_sport: None,
                    },
                )
                .unwrap();
            }
            _ => {}
        }
    }
    fn client(v: &mut dyn Verbs, me: &mut Me, b: &B, st: Step) {
        let (qp, l, r) = (me.qps[0], me.mr.unwrap(), me.peer.mr.unwrap());
        match st {
            Step::Connected => {
                let a = v.query_qp(qp).unwrap();
                assert_eq!(
                    (a.retry_cnt, a.rnr_retry, a.cross_channel, a.local_addr),
                    (5, 3, true, v.caps().local_addrs[0])
                );
                // Connecting twice is an error: only Init or Reset connect.
                let again = RemoteQp {
                    host: me.peer.addrs[0],
                    qpn: me.peer.qps[0],
                    udp_sport: None,
                };
                assert!(matches!(
                    v.connect_qp(qp, again),
                    Err(VerbsError::InvalidState(_))
                ));
                // 1 MB (200 µs at 40G), an unsignaled WRITE, a SEND; two RECVs.
                v.post_send(qp, write_to(1, &l, 1 << 20, r.addr, r.rkey))
                    .unwrap();
                let mut w2 = write_to(2, &l, 100, r.addr, r.rkey);
                w2.signaled = false;
                v.post_send(qp, w2).unwrap();
                v.post_send(qp, SendWr::new(3, SendOp::Send, sge(&l, 0, 100)))
                    .unwrap();
                for id in [10, 11] {
                    v.post_recv(
                        qp,
                        RecvWr {
                            wr_id: id,
                            sg_list: sge(&l, 0, 100),
                        },
                    )
                    .unwrap();
                }
                v.set_timer(50_000_000, 2);
            }
            Step::Timer(2) => {
                v.modify_qp(qp, QpModify::Error).unwrap();
                let a = v.query_qp(qp).unwrap();
                assert_eq!((a.state, a.send_outstanding), (QpState::Error, 0));
                // Posting in Error completes at once, flushed (signaled or not).
                let mut w4 = write_to(4, &l, 100, r.addr, r.rkey);
                w4.signaled = false;
                v.post_send(qp, w4).unwrap();
                v.post_recv(
                    qp,
                    RecvWr {
                        wr_id: 12,
                        sg_list: sge(&l, 0, 100),
                    },
                )
                .unwrap();
                let again = RemoteQp {
                    host: me.peer.addrs[0],
                    qpn: me.peer.qps[0],
                    udp_sport: None,
                };
                assert!(matches!(
                    v.connect_qp(qp, again),
                    Err(VerbsError::InvalidState(_))
                ));
                v.set_timer(150_000_000, 3);
            }
            Step::Timer(3) => {
                // Everything flushed so far was polled by now; Reset empties and forgets.
                v.modify_qp(qp, QpModify::Reset).unwrap();
                let a = v.query_qp(qp).unwrap();
                assert_eq!((a.state, a.remote), (QpState::Reset, None));
                assert!(matches!(
                    v.post_send(qp, write_to(6, &l, 8, r.addr, r.rkey)),
                    Err(VerbsError::InvalidState(_))
                ));
                assert!(matches!(
                    v.post_recv(
                        qp,
                        RecvWr {
                            wr_id: 13,
                            sg_list: sge(&l, 0, 100)
                        }
                    ),
                    Err(VerbsError::InvalidState(_))
                ));
                v.connect_qp(
                    qp,
                    RemoteQp {
                        host: me.peer.addrs[0],
                        qpn: me.peer.qps[0],
                        udp_sport: None,
                    },
                )
                .unwrap();
                assert_eq!(v.query_qp(qp).unwrap().state, QpState::Rts);
                v.post_send(qp, write_to(5, &l, 8, r.addr, r.rkey)).unwrap();
                note(b, "reconnected");
            }
            _ => {}
        }
    }
    sim.add_app(
        1,
        Box::new(Peer::new(&b, 1, vec![QpInit::rc(0)], server)),
        vec![],
    )
    .unwrap();
    let init = QpInit {
        retry_cnt: 5,
        rnr_retry: 3,
        cross_channel: true,
        ..QpInit::rc(0)
    };
    sim.add_app(0, Box::new(Peer::new(&b, 0, vec![init], client)), vec![])
        .unwrap();
    // Transmission stops at the Error: what the server took by 60 µs is all it gets until the
    // reconnection (then 8 bytes more).
    sim.advance(60_000_000);
    let srv_qp = b.borrow().eps[1].qps[0];
    let rx = |sim: &braid_sim::Simulation| sim.world().hosts[1].nic.qp(srv_qp).unwrap().rx_bytes;
    let at_error = rx(&sim);
    assert!(
        at_error > 100_000 && at_error < 400_000,
        "part of the 1 MB WRITE went out before the Error: {at_error}"
    );
    sim.advance(140_000_000);
    assert_eq!(rx(&sim), at_error, "nothing was sent while in Error");
    sim.run();
    assert_eq!(rx(&sim), at_error + 8, "the reconnected QP works");
    assert_eq!(b.borrow().notes, vec!["reconnected"]);
    // Send CQ: every outstanding WR flushed in posting order (the unsignaled one too), then the
    // one posted in Error, then the WRITE after reconnecting.
    use WcOpcode as O;
    use WcStatus as S;
    let (scq, rcq) = b.borrow().eps[0].cqs;
    assert_eq!(
        wcs_on(&b, 0, scq),
        vec![
            (1, S::Flushed, O::Write),
            (2, S::Flushed, O::Write),
            (3, S::Flushed, O::Send),
            (4, S::Flushed, O::Write),
            (5, S::Success, O::Write),
        ]
    );
    // Receive CQ: the two RECVs, then the one posted in Error.
    assert_eq!(
        wcs_on(&b, 0, rcq),
        vec![
            (10, S::Flushed, O::Recv),
            (11, S::Flushed, O::Recv),
            (12, S::Flushed, O::Recv),
        ]
    );
    // The flush happened at the Error (50 µs), not later.
    let t_flush = b.borrow().wcs[0][0].0;
    assert_eq!(t_flush, 50_000_000);
}

#[test]
fn retry_exceeded_after_retry_cnt_timeouts_fails_the_head_and_flushes_the_rest() {
    // The server's host link goes down at 20 µs for good. At 30 µs the client posts three
    // WRITEs on an RC QP with retry_cnt = 3 and rto = 100 µs: the head WR is retransmitted
    // three times, and the fourth timeout (30 + 4 × 100 µs) gives up.
    let b: B = Default::default();
    let mut sim = build(&dumbbell_scenario(json!({
        "nic": {"rto": "100us"},
        "link_events": [{"a": "swR", "b": "h1", "down": "20us"}],
    })));
    fn client(v: &mut dyn Verbs, me: &mut Me, b: &B, st: Step) {
        let (qp, l, r) = (me.qps[0], me.mr.unwrap(), me.peer.mr.unwrap());
        match st {
            Step::Connected => v.set_timer(30_000_000, 2),
            Step::Timer(2) => {
                for id in 1..=3 {
                    let mut w = write_to(id, &l, 10_000, r.addr, r.rkey);
                    w.signaled = id != 2;
                    v.post_send(qp, w).unwrap();
                }
            }
            Step::Completions => {
                let st = v.query_qp(qp).unwrap().state;
                note(b, format!("{st:?}"));
            }
            _ => {}
        }
    }
    /// Another tenant of the client's host with a CQ of its own, armed: it must hear nothing.
    struct Bystander(B);
    impl App for Bystander {
        fn start(&mut self, v: &mut dyn Verbs) {
            let cq = v.create_cq(16).unwrap();
            v.req_notify_cq(cq).unwrap();
        }
        fn on_event(&mut self, _: &mut dyn Verbs, ev: Event) {
            if let Event::Completion(_) = ev {
                self.0.borrow_mut().value += 1;
            }
        }
    }
    sim.add_app(
        1,
        Box::new(Peer::new(&b, 1, vec![QpInit::rc(0)], nothing)),
        vec![],
    )
    .unwrap();
    sim.add_app(0, Box::new(Bystander(b.clone())), vec![])
        .unwrap();
    let init = QpInit {
        retry_cnt: 3,
        ..QpInit::rc(0)
    };
    sim.add_app(0, Box::new(Peer::new(&b, 0, vec![init], client)), vec![])
        .unwrap();
    sim.run();
    let bd = b.borrow();
    let got: Vec<_> = bd.wcs[0].iter().map(|e| (e.2.wr_id, e.2.status)).collect();
    assert_eq!(
        got,
        vec![
            (1, WcStatus::RetryExceeded),
            (2, WcStatus::Flushed),
            (3, WcStatus::Flushed)
        ],
        "the head WR fails, the rest (unsignaled too) are flushed"
    );
    let t = bd.wcs[0][0].0;
    let expect = 30_000_000 + 4 * 100_000_000;
    assert!(
        t >= expect && t < expect + 10_000_000,
        "gave up at {t} ps, expected about (retry_cnt + 1) x rto after the first send = {expect}"
    );
    assert!(bd.wcs[0].iter().all(|e| e.0 == t), "the rest flush at once");
    assert_eq!(
        bd.notes[0], "Error",
        "the QP is in Error when its owner hears of it"
    );
    assert_eq!(bd.value, 0, "the other tenant of the host heard nothing");
    assert!(bd.events[0] >= 1);
    let c = &sim.world().hosts[0].nic.stats;
    assert_eq!(c.timeouts, 4, "three retries, then the fatal timeout");
    assert_eq!(
        c.retx_pkts,
        3 * 30,
        "each retry resent the three WRITEs' 30 packets (go-back-N)"
    );
}

#[test]
fn rnr_retry_runs_out_unless_it_is_seven() {
    // The server posts no RECV: every SEND meets receiver-not-ready.
    for (rnr_retry, want) in [(2u8, Some(WcStatus::RnrRetryExceeded)), (7, None)] {
        let b: B = Default::default();
        let mut sim = build(&dumbbell_scenario(json!({"duration": "2ms"})));
        fn client(v: &mut dyn Verbs, me: &mut Me, _: &B, st: Step) {
            if st == Step::Connected {
                let l = me.mr.unwrap();
                v.post_send(me.qps[0], SendWr::new(1, SendOp::Send, sge(&l, 0, 100)))
                    .unwrap();
                v.post_send(me.qps[0], SendWr::new(2, SendOp::Send, sge(&l, 0, 100)))
                    .unwrap();
            }
        }
        sim.add_app(
            1,
            Box::new(Peer::new(&b, 1, vec![QpInit::rc(0)], nothing)),
            vec![],
        )
        .unwrap();
        let init = QpInit {
            rnr_retry,
            ..QpInit::rc(0)
        };
        sim.add_app(0, Box::new(Peer::new(&b, 0, vec![init], client)), vec![])
            .unwrap();
        sim.run();
        let got: Vec<_> = b.borrow().wcs[0]
            .iter()
            .map(|e| (e.2.wr_id, e.2.status, e.0))
            .collect();
        let naks = sim.world().hosts[1].nic.stats.rnr_naks;
        match want {
            Some(st) => {
                assert_eq!(
                    got.iter().map(|g| (g.0, g.1)).collect::<Vec<_>>(),
                    vec![(1, st), (2, WcStatus::Flushed)]
                );
                assert_eq!(naks, 3, "two RNR retries, the third NAK is fatal");
                assert!(
                    got[0].2 < 100_000_000,
                    "gave up after ~2 RNR delays: {}",
                    got[0].2
                );
            }
            None => {
                assert!(got.is_empty(), "rnr_retry = 7 retries forever: {got:?}");
                assert!(naks > 50, "{naks}");
            }
        }
    }
}

#[test]
fn remote_access_errors_change_no_byte_and_put_both_qps_in_error() {
    // Server memory: region A (remote read/write) and region B (local only), both filled with
    // a pattern. Each client QP tries one forbidden access; QP 4 does a good WRITE, a bad one
    // and another good one.
    let b: B = Default::default();
    let mut sim = build(&dumbbell_scenario(json!({"nic": {"data_check": true}})));
    const A: u64 = 0x5000_0000;
    const BB: u64 = 0x6000_0000;
    fn server(v: &mut dyn Verbs, me: &mut Me, _: &B, st: Step) {
        if st == Step::Connected {
            let pat: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
            v.write_local(A, &pat).unwrap();
            v.write_local(BB, &pat).unwrap();
            let _ = me;
        }
    }
    fn client(v: &mut dyn Verbs, me: &mut Me, _: &B, st: Step) {
        if st != Step::Connected {
            return;
        }
        let l = me.mr.unwrap();
        v.write_local(l.addr, &[0xEE; 16384]).unwrap();
        let (ra, rb) = (me.peer.mrs[0], me.peer.mrs[1]);
        let q = &me.qps;
        // Out of bounds: [3000, 5000) of a 4 KB region (its first packet would fit).
        v.post_send(q[0], write_to(10, &l, 2000, ra.addr + 3000, ra.rkey))
            .unwrap();
        // A bad rkey.
        v.post_send(q[1], write_to(20, &l, 100, ra.addr, ra.rkey ^ 0x10))
            .unwrap();
        // No remote-write permission.
        v.post_send(q[2], write_to(30, &l, 100, rb.addr, rb.rkey))
            .unwrap();
        // No remote-read permission.
        let mut rd = SendWr::new(40, SendOp::Read, sge(&l, 8192, 100));
        rd.remote_addr = rb.addr;
        rd.rkey = rb.rkey;
        v.post_send(q[3], rd).unwrap();
        // Good, bad, good.
        v.post_send(q[4], write_to(50, &l, 100, ra.addr, ra.rkey))
            .unwrap();
        v.post_send(q[4], write_to(51, &l, 100, ra.addr + 4090, ra.rkey))
            .unwrap();
        v.post_send(q[4], write_to(52, &l, 100, ra.addr + 200, ra.rkey))
            .unwrap();
    }
    let mut srv = Peer::new(&b, 1, vec![QpInit::rc(0); 5], server);
    srv.regions = vec![(A, 4096, Access::ALL), (BB, 4096, Access::LOCAL)];
    srv.recvs = 1;
    sim.add_app(1, Box::new(srv), vec![]).unwrap();
    sim.add_app(
        0,
        Box::new(Peer::new(&b, 0, vec![QpInit::rc(0); 5], client)),
        vec![],
    )
    .unwrap();
    sim.run();
    use WcStatus as S;
    let bd = b.borrow();
    let got: Vec<_> = bd.wcs[0].iter().map(|e| (e.2.wr_id, e.2.status)).collect();
    for want in [
        (10, S::RemoteAccessError),
        (20, S::RemoteAccessError),
        (30, S::RemoteAccessError),
        (40, S::RemoteAccessError),
        (50, S::Success),
        (51, S::RemoteAccessError),
        (52, S::Flushed),
    ] {
        assert!(got.contains(&want), "{want:?} missing from {got:?}");
    }
    assert_eq!(got.len(), 7, "{got:?}");
    let w = sim.world();
    let mem = &w.hosts[1].nic.mem;
    let pat: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    let a = mem.read(A, 4096).unwrap();
    assert_eq!(&a[..100], &[0xEE; 100][..], "the good WRITE landed");
    assert_eq!(
        &a[100..],
        &pat[100..],
        "no refused WRITE changed a byte of region A"
    );
    assert_eq!(mem.read(BB, 4096).unwrap(), pat, "region B is untouched");
    let cli = &w.hosts[0].nic.mem;
    assert_eq!(
        cli.read(0x1000_0000 + 8192, 100).unwrap(),
        vec![0xEE; 100],
        "the refused READ brought nothing back"
    );
    assert_eq!(w.hosts[1].nic.stats.access_errors, 5);
    // Both ends of every refused connection are in Error: the server's RECVs were flushed on
    // QPs 0-4, never on a good one (there is none left).
    let srv_flushed = bd.wcs[1]
        .iter()
        .filter(|e| e.2.status == S::Flushed && e.2.opcode == WcOpcode::Recv)
        .count();
    assert_eq!(srv_flushed, 5);
    for (h, qps) in [(0, &bd.eps[0].qps), (1, &bd.eps[1].qps)] {
        for &qp in qps.iter() {
            let a = w.hosts[h].nic.query_qp(qp).unwrap();
            assert_eq!(a.state, QpState::Error, "host {h} QP {qp}");
        }
    }
}

#[test]
fn cross_channel_wrs_need_a_cross_channel_qp() {
    let b: B = Default::default();
    let mut sim = build(&dumbbell_scenario(json!({"duration": "1ms"})));
    fn client(v: &mut dyn Verbs, me: &mut Me, b: &B, st: Step) {
        if st != Step::Connected {
            return;
        }
        let (plain, cross, managed) = (me.qps[0], me.qps[1], me.qps[2]);
        let ops = [
            SendOp::Wait {
                cq: me.scq,
                count: 0,
            },
            SendOp::SendEnable {
                qp: managed,
                count: 1,
            },
            SendOp::RecvEnable {
                qp: managed,
                count: 1,
            },
        ];
        for (i, op) in ops.into_iter().enumerate() {
            let r = v.post_send(plain, SendWr::new(i as u64, op, vec![]));
            assert!(matches!(r, Err(VerbsError::InvalidWr(_))), "{op:?}: {r:?}");
            v.post_send(cross, SendWr::new(10 + i as u64, op, vec![]))
                .unwrap();
            // A managed queue is cross-channel too.
            v.post_send(managed, SendWr::new(20 + i as u64, op, vec![]))
                .unwrap();
        }
        // NOP is not a cross-channel WR.
        v.post_send(plain, SendWr::new(30, SendOp::Nop, vec![]))
            .unwrap();
        note(b, "posted");
    }
    sim.add_app(
        1,
        Box::new(Peer::new(&b, 1, vec![QpInit::rc(0); 3], nothing)),
        vec![],
    )
    .unwrap();
    let inits = vec![
        QpInit::rc(0),
        QpInit {
            cross_channel: true,
            ..QpInit::rc(0)
        },
        QpInit {
            managed_recv: true,
            ..QpInit::rc(0)
        },
    ];
    sim.add_app(0, Box::new(Peer::new(&b, 0, inits, client)), vec![])
        .unwrap();
    sim.run();
    let bd = b.borrow();
    assert_eq!(bd.notes, vec!["posted"]);
    let mut ids: Vec<u64> = bd.wcs[0].iter().map(|e| e.2.wr_id).collect();
    ids.sort();
    assert_eq!(
        ids,
        vec![10, 11, 12, 20, 21, 22, 30],
        "the accepted ones ran"
    );
}

#[test]
fn wait_counts_are_cumulative_per_cq_and_zero_waits_wait_for_the_index() {
    // QP 0 completes three 100 KB WRITEs (~20 µs each) on its own send CQ c0. At time 0 the
    // cross-channel QPs (each with its own send CQ) post, in this order:
    //   QP 1: WAIT(c0, 1) #11, NOP #12
    //   QP 3: WAIT(c0, 0) #31, NOP #32
    //   QP 2: WAIT(c0, 1) #21, NOP #22
    //   QP 1: WAIT(c0, 1) #13, NOP #14
    // Each WAIT counts from the previous WAIT posted on c0 (the CQ's cumulative index: 1, 1, 2,
    // 3), so #12 goes after the 1st WRITE, #22 after the 2nd, #14 after the 3rd; the zero-count
    // WAIT waits for the index the WAITs before it left (1), as libmlx5 computes it, so #32 goes
    // with #12 — on a CQ no counted WAIT uses (PeRF's 0_WAITs) it never blocks. (Under the old rule, "count more than when the WAIT reached the head of
    // its queue", #22 went with #12 and #14 after the 2nd WRITE.)
    let b: B = Default::default();
    let mut sim = build(&dumbbell_scenario(json!({})));
    fn client(v: &mut dyn Verbs, me: &mut Me, _: &B, st: Step) {
        if st != Step::Connected {
            return;
        }
        let (l, r) = (me.mr.unwrap(), me.peer.mr.unwrap());
        let c0 = me.qcqs[0];
        for id in 1..=3 {
            v.post_send(me.qps[0], write_to(id, &l, 100_000, r.addr, r.rkey))
                .unwrap();
        }
        let wait = |id, count| SendWr::new(id, SendOp::Wait { cq: c0, count }, vec![]);
        let nop = |id| SendWr::new(id, SendOp::Nop, vec![]);
        for (qp, wr) in [
            (1, wait(11, 1)),
            (1, nop(12)),
            (3, wait(31, 0)),
            (3, nop(32)),
            (2, wait(21, 1)),
            (2, nop(22)),
            (1, wait(13, 1)),
            (1, nop(14)),
        ] {
            v.post_send(me.qps[qp], wr).unwrap();
        }
    }
    sim.add_app(
        1,
        Box::new(Peer::new(&b, 1, vec![QpInit::rc(0); 4], nothing)),
        vec![],
    )
    .unwrap();
    let cross = QpInit {
        cross_channel: true,
        ..QpInit::rc(0)
    };
    let inits = vec![QpInit::rc(0), cross.clone(), cross.clone(), cross];
    let mut cli = Peer::new(&b, 0, inits, client);
    cli.cq_per_qp = true;
    sim.add_app(0, Box::new(cli), vec![]).unwrap();
    sim.run();
    let bd = b.borrow();
    let t = |id: u64| {
        bd.wcs[0]
            .iter()
            .find(|e| e.2.wr_id == id)
            .unwrap_or_else(|| panic!("no completion {id}: {:?}", bd.wcs[0]))
            .0
    };
    let (w1, w2, w3) = (t(1), t(2), t(3));
    assert!(w1 > 10_000_000 && w1 < w2 && w2 < w3, "{w1} {w2} {w3}");
    assert!(
        t(32) >= w1 && t(32) < w2,
        "a zero-count WAIT waits for the index earlier WAITs left: {} vs {w1} {w2}",
        t(32)
    );
    assert!(
        t(12) >= w1 && t(12) < w2,
        "#12 after the 1st WRITE: {}",
        t(12)
    );
    assert!(
        t(22) >= w2 && t(22) < w3,
        "#22 after the 2nd WRITE: {}",
        t(22)
    );
    assert!(t(14) >= w3, "#14 after the 3rd WRITE: {}", t(14));
    // Signaled WAITs (sq_sig_all is off, SendWr::new signals): exactly one completion each.
    let mut waits: Vec<u64> = bd.wcs[0]
        .iter()
        .filter(|e| e.2.opcode == WcOpcode::Wait)
        .map(|e| e.2.wr_id)
        .collect();
    waits.sort();
    assert_eq!(waits, vec![11, 13, 21, 31]);
}

#[test]
fn tracked_regions_carry_real_bytes_without_data_check() {
    // nic.data_check is off. Client and server register tracked regions (and an untracked
    // one each). A 3-packet WRITE and a SEND from tracked memory land byte for byte; a READ
    // brings tracked bytes back; a WRITE from untracked memory leaves its target untouched;
    // read_local/write_local refuse untracked regions.
    let b: B = Default::default();
    let mut sim = build(&dumbbell_scenario(json!({})));
    const UNTRACKED: u64 = 0x7000_0000;
    fn bytes(seed: u8, n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
            .collect()
    }
    fn server(v: &mut dyn Verbs, me: &mut Me, b: &B, st: Step) {
        match st {
            Step::Connected => {
                let m = me.mr.unwrap();
                v.write_local(m.addr + 0x8000, &bytes(9, 2500)).unwrap();
                v.write_local(m.addr + 0x20000, &[0xAB; 100]).unwrap();
                assert!(matches!(
                    v.write_local(UNTRACKED, &[1, 2, 3]),
                    Err(VerbsError::Unsupported(_))
                ));
                assert!(matches!(
                    v.read_local(UNTRACKED, 3),
                    Err(VerbsError::Unsupported(_))
                ));
                assert!(v.read_local(0x9999_0000, 3).is_err(), "unregistered");
            }
            Step::Completions => {
                let m = me.mr.unwrap();
                let got = b.borrow().wcs[1].len();
                if got == 1 {
                    // The SEND (the first and only receive completion).
                    let wc = b.borrow().wcs[1][0].2;
                    assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, 500));
                    let d = v.read_local(m.addr, 500).unwrap();
                    assert_eq!(d, bytes(2, 500), "the SEND's bytes");
                    note(b, "send ok");
                }
                let _ = m;
            }
            _ => {}
        }
    }
    fn client(v: &mut dyn Verbs, me: &mut Me, b: &B, st: Step) {
        let (l, r) = (me.mr.unwrap(), me.peer.mr.unwrap());
        let qp = me.qps[0];
        match st {
            Step::Connected => {
                v.write_local(l.addr, &bytes(1, 3000)).unwrap();
                v.write_local(l.addr + 4096, &bytes(2, 500)).unwrap();
                // WRITE 3000 bytes (3 packets) to the server's region at +0x1000.
                v.post_send(qp, write_to(1, &l, 3000, r.addr + 0x1000, r.rkey))
                    .unwrap();
                v.post_send(qp, SendWr::new(2, SendOp::Send, sge(&l, 4096, 500)))
                    .unwrap();
                // READ 2500 bytes back from the server's +0x8000 into +0x10000.
                let mut rd = SendWr::new(3, SendOp::Read, sge(&l, 0x10000, 2500));
                rd.remote_addr = r.addr + 0x8000;
                rd.rkey = r.rkey;
                v.post_send(qp, rd).unwrap();
                // WRITE 100 bytes from the untracked region to the server's +0x20000.
                let u = me.mrs[0];
                let mut w = SendWr::new(4, SendOp::Write, sge(&u, 0, 100));
                w.remote_addr = r.addr + 0x20000;
                w.rkey = r.rkey;
                v.post_send(qp, w).unwrap();
            }
            Step::Completions => {
                let done = b.borrow().wcs[0].iter().any(|e| e.2.wr_id == 3);
                if done && !b.borrow().notes.iter().any(|n| n == "read ok") {
                    let d = v.read_local(l.addr + 0x10000, 2500).unwrap();
                    assert_eq!(d, bytes(9, 2500), "the READ's bytes");
                    note(b, "read ok");
                }
            }
            _ => {}
        }
    }
    let tracked = Access::ALL.tracked();
    let mut srv = Peer::new(&b, 1, vec![QpInit::rc(0)], server);
    srv.access = tracked;
    srv.recvs = 1;
    srv.regions = vec![(UNTRACKED, 4096, Access::ALL)];
    let mut cli = Peer::new(&b, 0, vec![QpInit::rc(0)], client);
    cli.access = tracked;
    cli.regions = vec![(UNTRACKED, 4096, Access::ALL)];
    sim.add_app(1, Box::new(srv), vec![]).unwrap();
    sim.add_app(0, Box::new(cli), vec![]).unwrap();
    sim.run();
    let bd = b.borrow();
    let mut notes = bd.notes.clone();
    notes.sort();
    assert_eq!(notes, vec!["read ok", "send ok"]);
    assert!(bd.wcs[0].iter().all(|e| e.2.status == WcStatus::Success));
    assert_eq!(bd.wcs[0].len(), 4);
    let mem = &sim.world().hosts[1].nic.mem;
    let base = bd.eps[1].mr.unwrap().addr;
    assert_eq!(
        mem.read(base + 0x1000, 3000).unwrap(),
        bytes(1, 3000),
        "the WRITE's bytes"
    );
    assert_eq!(
        mem.read(base + 0x20000, 100).unwrap(),
        vec![0xAB; 100],
        "a WRITE from untracked memory carries no bytes: its target is unchanged"
    );
    assert!(sim.world().hosts[0].nic.payloads.is_empty());
    assert!(sim.world().hosts[1].nic.payloads.is_empty());
}

// ------------------------------------------------------------------ several addresses per host

const SPORT: u16 = 50_000;

fn alias_scenario(routes: serde_json::Value) -> serde_json::Value {
    json!({
        "duration": "5ms",
        "topology": {"kind": "two-tor", "hosts_per_tor": 1, "paths": 8,
                     "host_link": link("40Gbps", "1us"), "fabric_link": link("40Gbps", "1us")},
        "nic": {"addresses": 4},
        "routes": routes,
    })
}

/// Host 0 sends from four QPs, one on each of its addresses, all with UDP source port SPORT, a
/// WRITE with immediate of 10 × (k + 1) packets from address k to host 1. If `Board::value` is
/// set, at 1 ms QP 0 changes its source port to that value and WRITEs 50 packets more.
fn alias_run(s: &serde_json::Value, sport2: u16) -> (braid_sim::Simulation, B) {
    let b: B = Default::default();
    b.borrow_mut().value = sport2 as u64;
    let mut sim = build(s);
    fn client(v: &mut dyn Verbs, me: &mut Me, b: &B, st: Step) {
        let (l, r) = (me.mr.unwrap(), me.peer.mr.unwrap());
        match st {
            Step::Connected => {
                let addrs = v.caps().local_addrs.clone();
                let n = v.local_host();
                assert_eq!(addrs, (0..4).map(|k| n | k << 24).collect::<Vec<_>>());
                assert!(matches!(
                    v.create_qp(&QpInit {
                        local_addr: 4,
                        ..QpInit::rc(me.scq)
                    }),
                    Err(VerbsError::InvalidArgument(_))
                ));
                for (k, &qp) in me.qps.iter().enumerate() {
                    assert_eq!(v.query_qp(qp).unwrap().local_addr, addrs[k]);
                    v.modify_qp(qp, QpModify::UdpSport(SPORT)).unwrap();
                    assert_eq!(v.query_qp(qp).unwrap().udp_sport, SPORT);
                    let mut w = SendWr::new(
                        k as u64,
                        SendOp::WriteWithImm(k as u32),
                        sge(&l, 0, 10_000 * (k as u32 + 1)),
                    );
                    w.remote_addr = r.addr;
                    w.rkey = r.rkey;
                    v.post_send(qp, w).unwrap();
                }
                if b.borrow().value != 0 {
                    v.set_timer(1_000_000_000, 2);
                }
            }
            Step::Timer(2) => {
                let sport2 = b.borrow().value as u16;
                v.modify_qp(me.qps[0], QpModify::UdpSport(sport2)).unwrap();
                v.post_send(me.qps[0], write_to(9, &l, 50_000, r.addr, r.rkey))
                    .unwrap();
            }
            _ => {}
        }
    }
    let mut srv = Peer::new(&b, 1, vec![QpInit::rc(0); 4], nothing);
    srv.recvs = 1;
    sim.add_app(1, Box::new(srv), vec![]).unwrap();
    let inits: Vec<QpInit> = (0..4)
        .map(|k| QpInit {
            local_addr: k,
            ..QpInit::rc(0)
        })
        .collect();
    sim.add_app(0, Box::new(Peer::new(&b, 0, inits, client)), vec![])
        .unwrap();
    (sim, b)
}

/// The spine a packet from `src` to host 1's address with `sport` crosses, by ECMP replay.
fn spine_for(sim: &braid_sim::Simulation, src: u32, sport: u16) -> String {
    let w = sim.world();
    let path = w.path_between(src, sim.host_address(1), sport);
    path.iter()
        .map(|&n| w.nodes[n as usize].name.clone())
        .find(|n| n.starts_with("spine"))
        .expect("crosses a spine")
}

/// Data packets each spine sent towards tor1.
fn spine_counts(sim: &braid_sim::Simulation) -> std::collections::BTreeMap<String, u64> {
    let w = sim.world();
    let tor1 = w.nodes.iter().position(|x| x.name == "tor1").unwrap() as u32;
    w.nodes
        .iter()
        .filter(|n| n.name.starts_with("spine"))
        .map(|n| {
            let p = w
                .node_ports(n.id)
                .iter()
                .find(|p| p.peer_node == tor1)
                .unwrap();
            (n.name.clone(), p.tx_pkts - p.tx_pfc)
        })
        .filter(|(_, c)| *c > 0)
        .collect()
}

#[test]
fn qps_on_different_local_addresses_take_different_paths_and_udp_sport_moves_one() {
    let s = alias_scenario(json!([]));
    let probe = build(&s);
    let n = probe.host_address(0);
    let addrs: Vec<u32> = (0..4).map(|k| n | k << 24).collect();
    let spines: Vec<String> = addrs.iter().map(|&a| spine_for(&probe, a, SPORT)).collect();
    let distinct: std::collections::BTreeSet<_> = spines.iter().collect();
    assert!(
        distinct.len() >= 2,
        "ECMP hashes the source address: four addresses, one source port, {spines:?}"
    );
    // A source port that moves address 0 to another spine.
    let sport2 = (SPORT + 1..SPORT + 200)
        .find(|&p| spine_for(&probe, addrs[0], p) != spines[0])
        .unwrap();
    let (mut sim, b) = alias_run(&s, sport2);
    sim.run();
    let mut want: std::collections::BTreeMap<String, u64> = Default::default();
    for (k, sp) in spines.iter().enumerate() {
        *want.entry(sp.clone()).or_default() += 10 * (k as u64 + 1);
    }
    *want.entry(spine_for(&probe, addrs[0], sport2)).or_default() += 50;
    assert_eq!(
        spine_counts(&sim),
        want,
        "each QP's packets crossed the spine its address (and port) hashes to"
    );
    // The receiver sees each QP's own address as the source.
    let bd = b.borrow();
    let mut srcs: Vec<(u32, u32)> = bd.wcs[1]
        .iter()
        .map(|e| (e.2.imm.unwrap(), e.2.src_host))
        .collect();
    srcs.sort();
    assert_eq!(
        srcs,
        (0..4).map(|k| (k, addrs[k as usize])).collect::<Vec<_>>()
    );
    assert_eq!(bd.wcs[0].len(), 5, "every WRITE completed: {:?}", bd.wcs[0]);
    assert!(bd.wcs[0].iter().all(|e| e.2.status == WcStatus::Success));
}

#[test]
fn a_static_route_matching_a_source_address_pins_that_address_only() {
    let probe = build(&alias_scenario(json!([])));
    let n = probe.host_address(0);
    let addrs: Vec<u32> = (0..4).map(|k| n | k << 24).collect();
    let spines: Vec<String> = addrs.iter().map(|&a| spine_for(&probe, a, SPORT)).collect();
    // Pin address 1 through a spine ECMP would not have given it.
    let pin = (0..8)
        .map(|i| format!("spine{i}"))
        .find(|x| *x != spines[1])
        .unwrap();
    let routes = json!([{"node": "tor0", "next_hops": [pin], "dst": [1],
                         "src": [{"host": 0, "addr": 1}]}]);
    let s = alias_scenario(routes.clone());
    let (mut sim, b) = alias_run(&s, 0);
    assert_eq!(spine_for(&sim, addrs[1], SPORT), pin);
    for k in [0, 2, 3] {
        assert_eq!(
            spine_for(&sim, addrs[k], SPORT),
            spines[k],
            "address {k} unaffected"
        );
    }
    sim.run();
    let mut want: std::collections::BTreeMap<String, u64> = Default::default();
    for (k, sp) in spines.iter().enumerate() {
        let sp = if k == 1 { pin.clone() } else { sp.clone() };
        *want.entry(sp).or_default() += 10 * (k as u64 + 1);
    }
    assert_eq!(spine_counts(&sim), want);
    assert_eq!(b.borrow().wcs[0].len(), 4);
    // A whole host as the source pins all its addresses.
    let all = json!([{"node": "tor0", "next_hops": [pin], "src": [0]}]);
    let sim = build(&alias_scenario(all));
    for &a in &addrs {
        assert_eq!(spine_for(&sim, a, SPORT), pin);
    }
    // Sources are checked.
    for (src, path) in [
        (json!([{"host": 0, "addr": 4}]), "routes[0].src[0].addr"),
        (json!([7]), "routes[0].src[0]"),
    ] {
        let mut bad = routes.clone();
        bad[0]["src"] = src;
        match braid_sim::Simulation::from_json(
            &alias_scenario(bad).to_string(),
            std::path::Path::new("."),
            None,
        ) {
            Ok(_) => panic!("accepted a bad source"),
            Err(e) => assert_eq!(e.path, path, "{}", e.message),
        }
    }
}

#[test]
fn mp_rdma_gives_up_after_retry_cnt_timeouts_too() {
    // The same dead peer under MP-RDMA: its RTO counts against retry_cnt like RC's.
    let b: B = Default::default();
    let mut sim = build(&dumbbell_scenario(json!({
        "nic": {"rto": "100us"},
        "transport": {"kind": "mp-rdma"},
        "link_events": [{"a": "swR", "b": "h1", "down": "20us"}],
    })));
    fn client(v: &mut dyn Verbs, me: &mut Me, _: &B, st: Step) {
        let (qp, l, r) = (me.qps[0], me.mr.unwrap(), me.peer.mr.unwrap());
        match st {
            Step::Connected => v.set_timer(30_000_000, 2),
            Step::Timer(2) => {
                for id in 1..=2 {
                    v.post_send(qp, write_to(id, &l, 10_000, r.addr, r.rkey))
                        .unwrap();
                }
            }
            _ => {}
        }
    }
    sim.add_app(
        1,
        Box::new(Peer::new(&b, 1, vec![QpInit::rc(0)], nothing)),
        vec![],
    )
    .unwrap();
    let init = QpInit {
        retry_cnt: 2,
        ..QpInit::rc(0)
    };
    sim.add_app(0, Box::new(Peer::new(&b, 0, vec![init], client)), vec![])
        .unwrap();
    sim.run();
    assert_eq!(
        sim.world().hosts[0].nic.qps().next().unwrap().t.kind(),
        "mp-rdma"
    );
    let bd = b.borrow();
    let got: Vec<_> = bd.wcs[0].iter().map(|e| (e.2.wr_id, e.2.status)).collect();
    assert_eq!(
        got,
        vec![(1, WcStatus::RetryExceeded), (2, WcStatus::Flushed)]
    );
    let t = bd.wcs[0][0].0;
    let expect = 30_000_000 + 3 * 100_000_000;
    assert!(
        t >= expect && t < expect + 10_000_000,
        "gave up at {t}, expected ~{expect}"
    );
    assert_eq!(sim.world().hosts[0].nic.stats.timeouts, 3);
}

#[test]
fn destroying_a_qp_discards_its_work_without_completions() {
    // ibv_destroy_qp gives no completions for what the QP still had (only a move to Error
    // flushes); the other QP on the same CQs is untouched. At 20 µs the client destroys QP 0
    // with a 1 MB WRITE half sent, a WRITE behind it and two RECVs posted.
    let b: B = Default::default();
    let mut sim = build(&dumbbell_scenario(json!({})));
    fn client(v: &mut dyn Verbs, me: &mut Me, b: &B, st: Step) {
        let (l, r) = (me.mr.unwrap(), me.peer.mr.unwrap());
        match st {
            Step::Connected => {
                v.post_send(me.qps[0], write_to(1, &l, 1 << 20, r.addr, r.rkey))
                    .unwrap();
                v.post_send(me.qps[0], write_to(2, &l, 100, r.addr, r.rkey))
                    .unwrap();
                v.set_timer(20_000_000, 2);
            }
            Step::Timer(2) => {
                v.destroy_qp(me.qps[0]).unwrap();
                assert!(matches!(
                    v.query_qp(me.qps[0]),
                    Err(VerbsError::NoSuchQp(_))
                ));
                v.post_send(me.qps[1], write_to(3, &l, 100, r.addr, r.rkey))
                    .unwrap();
                note(b, "destroyed");
            }
            _ => {}
        }
    }
    let two = vec![QpInit::rc(0), QpInit::rc(0)];
    sim.add_app(1, Box::new(Peer::new(&b, 1, two.clone(), nothing)), vec![])
        .unwrap();
    let mut c = Peer::new(&b, 0, two, client);
    c.recvs = 2;
    sim.add_app(0, Box::new(c), vec![]).unwrap();
    sim.run();
    let srv_qp = b.borrow().eps[1].qps[0];
    let rx = sim.world().hosts[1].nic.qp(srv_qp).unwrap().rx_bytes;
    assert!(
        rx > 0 && rx < 1 << 20,
        "the WRITE stopped mid-way: {rx} bytes"
    );
    assert_eq!(b.borrow().notes, vec!["destroyed"]);
    // Only QP 1's WRITE completes: nothing of QP 0 (not its WRs, not its RECVs), and QP 1's
    // RECVs stay posted.
    let got: Vec<_> = b.borrow().wcs[0]
        .iter()
        .map(|e| (e.2.wr_id, e.2.status, e.2.qp_num))
        .collect();
    let qp1 = b.borrow().eps[0].qps[1];
    assert_eq!(got, vec![(3, WcStatus::Success, qp1)]);
}

#[test]
fn a_qp_not_yet_connected_drops_what_reaches_it() {
    // The server connects its QP only at 100 µs. The client's WRITE at 0 reaches a QP in Init:
    // it is dropped without an ACK (a real RNIC receives from RTR on), so no byte lands and the
    // requester hears nothing until its retransmission after the server connected.
    let b: B = Default::default();
    let mut sim = build(&dumbbell_scenario(json!({"nic": {"rto": "150us"}})));
    fn server(v: &mut dyn Verbs, me: &mut Me, _: &B, st: Step) {
        match st {
            Step::Connected => {
                assert_eq!(v.query_qp(me.qps[0]).unwrap().state, QpState::Init);
                v.set_timer(100_000_000, 2);
            }
            Step::Timer(2) => v
                .connect_qp(
                    me.qps[0],
                    RemoteQp {
                        host: me.peer.addrs[0],
                        qpn: me.peer.qps[0],
                        udp_sport: None,
                    },
                )
                .unwrap(),
            _ => {}
        }
    }
    fn client(v: &mut dyn Verbs, me: &mut Me, _: &B, st: Step) {
        if st == Step::Connected {
            let (l, r) = (me.mr.unwrap(), me.peer.mr.unwrap());
            v.post_send(me.qps[0], write_to(1, &l, 100, r.addr, r.rkey))
                .unwrap();
        }
    }
    let mut s = Peer::new(&b, 1, vec![QpInit::rc(0)], server);
    s.connect = false;
    sim.add_app(1, Box::new(s), vec![]).unwrap();
    sim.add_app(
        0,
        Box::new(Peer::new(&b, 0, vec![QpInit::rc(0)], client)),
        vec![],
    )
    .unwrap();
    sim.advance(90_000_000);
    let srv_qp = b.borrow().eps[1].qps[0];
    let rx = |sim: &braid_sim::Simulation| sim.world().hosts[1].nic.qp(srv_qp).unwrap().rx_bytes;
    assert_eq!(rx(&sim), 0, "nothing is received in Init");
    assert!(b.borrow().wcs[0].is_empty(), "and nothing is acknowledged");
    sim.run();
    assert_eq!(rx(&sim), 100, "the retransmission lands once connected");
    let bd = b.borrow();
    let got: Vec<_> = bd.wcs[0].iter().map(|e| (e.2.wr_id, e.2.status)).collect();
    assert_eq!(got, vec![(1, WcStatus::Success)]);
    assert!(
        bd.wcs[0][0].0 >= 150_000_000,
        "completed after the retransmission timeout"
    );
}
