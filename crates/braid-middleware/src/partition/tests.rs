//! The partition layer over braid-verbs' fake NIC (FakeNet): ibverbs semantics, bytes tracked,
//! packets lost, QPs failed.

use super::wire::board_key;
use super::*;
use braid_verbs::rendezvous::Side;
use braid_verbs::testing::FakeNet;
use braid_verbs::*;
use std::cell::RefCell;
use std::rc::Rc;

const MIB: u64 = 1 << 20;
const SRC: u64 = 0x10_0000;
const DST: u64 = 0x80_0000;

/// Records the events that reach the application.
struct Events(Rc<RefCell<Vec<Event>>>);
impl App for Events {
    fn start(&mut self, _: &mut dyn Verbs) {}
    fn on_event(&mut self, _: &mut dyn Verbs, e: Event) {
        self.0.borrow_mut().push(e);
    }
}

struct Pair {
    net: FakeNet,
    /// (tenant, cq, qp, mr) of the sender on host 1 and the receiver on host 2.
    a: (TenantId, CqId, QpNum, MemoryRegion),
    b: (TenantId, CqId, QpNum, MemoryRegion),
    a_events: Rc<RefCell<Vec<Event>>>,
    b_events: Rc<RefCell<Vec<Event>>>,
}

fn remote(host: u32, qpn: QpNum) -> RemoteQp {
    RemoteQp {
        host,
        qpn,
        udp_sport: None,
    }
}

/// Host 1 and host 2, one tenant each running `cfg` (`raw_b`: host 2 runs no layer), one
/// connected RC QP pair with `len` bytes of tracked memory at each end.
fn pair(cfg: &PartitionConfig, raw_b: bool, len: u64, init: QpInit) -> Pair {
    let mut net = FakeNet::new(2);
    let (ea, eb) = (
        Rc::new(RefCell::new(Vec::new())),
        Rc::new(RefCell::new(Vec::new())),
    );
    let ta = net
        .add_tenant_with(1, Box::new(Events(ea.clone())), &[cfg])
        .unwrap();
    let tb = if raw_b {
        net.add_tenant(2, Box::new(Events(eb.clone())), vec![])
    } else {
        net.add_tenant_with(2, Box::new(Events(eb.clone())), &[cfg])
            .unwrap()
    };
    net.run();
    let end = |addr: u64, init: QpInit| {
        move |v: &mut dyn Verbs| {
            let cq = v.create_cq(4096).unwrap();
            let qp = v
                .create_qp(&QpInit {
                    send_cq: cq,
                    recv_cq: cq,
                    ..init
                })
                .unwrap();
            let mr = v.reg_mr(addr, len, Access::ALL.tracked()).unwrap();
            v.req_notify_cq(cq).unwrap();
            (cq, qp, mr)
        }
    };
    let (acq, aqp, amr) = net.call_as(1, ta, end(SRC, init.clone()));
    let (bcq, bqp, bmr) = net.call_as(2, tb, end(DST, init));
    net.call_as(1, ta, |v| v.connect_qp(aqp, remote(2, bqp)))
        .unwrap();
    net.call_as(2, tb, |v| v.connect_qp(bqp, remote(1, aqp)))
        .unwrap();
    Pair {
        net,
        a: (ta, acq, aqp, amr),
        b: (tb, bcq, bqp, bmr),
        a_events: ea,
        b_events: eb,
    }
}

fn data(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 131 + seed * 7 + (i >> 11)) % 251) as u8)
        .collect()
}

fn rdma(wr_id: u64, op: SendOp, p: &Pair, off: u64, len: u64) -> SendWr {
    let mut w = SendWr::new(
        wr_id,
        op,
        vec![Sge {
            addr: p.a.3.addr + off,
            length: len as u32,
            lkey: p.a.3.lkey,
        }],
    );
    w.remote_addr = p.b.3.addr + off;
    w.rkey = p.b.3.rkey;
    w
}

fn poll(net: &mut FakeNet, host: u32, t: TenantId, cq: CqId) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    net.call_as(host, t, |v| while v.poll_cq(cq, 64, &mut out) > 0 {});
    out
}

fn counter(net: &FakeNet, host: u32, t: TenantId, name: &str) -> f64 {
    net.counters(host, t)
        .into_iter()
        .find(|c| c.0 == "partition" && c.1 == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .2
}

/// The member QPs the layer of `host` created beside application QP `qp` (from the board).
fn members(net: &FakeNet, host: u32, qp: QpNum) -> Vec<QpNum> {
    let b = net.board().borrow();
    let n = b.lookup(board_key(host, qp, 0), Side::Client).unwrap().qpn;
    let mut v = vec![qp];
    for i in 1..n {
        v.push(b.lookup(board_key(host, qp, i), Side::Client).unwrap().qpn);
    }
    v
}

fn cfg(qps: u32, chunk: u64, assign: Assign) -> PartitionConfig {
    PartitionConfig {
        qps,
        chunk: braid_units::Bytes(chunk),
        assign,
        ..PartitionConfig::default()
    }
}

#[test]
fn a_1mib_write_is_split_over_4_qps_and_lands_byte_for_byte_with_one_completion() {
    for assign in [Assign::Static, Assign::Dynamic] {
        let mut p = pair(&cfg(4, 32 << 10, assign), false, MIB, QpInit::rc(0));
        let bytes = data(MIB, 1);
        let (ta, acq, aqp, amr) = p.a;
        p.net
            .call_as(1, ta, |v| v.write_local(amr.addr, &bytes))
            .unwrap();
        let w = rdma(42, SendOp::Write, &p, 0, MIB);
        p.net.call_as(1, ta, |v| v.post_send(aqp, w)).unwrap();
        p.net.run();
        let wcs = poll(&mut p.net, 1, ta, acq);
        assert_eq!(
            wcs.len(),
            1,
            "{assign:?}: one completion for the application"
        );
        assert_eq!(
            (wcs[0].wr_id, wcs[0].status, wcs[0].opcode, wcs[0].qp_num),
            (42, WcStatus::Success, WcOpcode::Write, aqp)
        );
        assert_eq!(wcs[0].byte_len, MIB);
        assert_eq!(p.net.nic(2).read_mem(p.b.0, DST, MIB), bytes);
        // 32 chunks, every member carried some; static deals them evenly.
        let per: Vec<f64> = (0..4)
            .map(|i| counter(&p.net, 1, ta, &format!("chunks_q{i}")))
            .collect();
        assert_eq!(per.iter().sum::<f64>(), 32.0, "{assign:?} {per:?}");
        assert!(per.iter().all(|&c| c > 0.0), "{assign:?} {per:?}");
        if assign == Assign::Static {
            assert_eq!(per, vec![8.0; 4]);
        }
        // The members carry distinct UDP source ports.
        let ms = members(&p.net, 1, aqp);
        assert_eq!(ms.len(), 4);
        let mut ports: Vec<u16> = ms
            .iter()
            .map(|&q| p.net.nic(1).qp_attr(q).unwrap().udp_sport)
            .collect();
        ports.sort();
        ports.dedup();
        assert_eq!(ports.len(), 4, "distinct source ports");
        // One completion event for the armed CQ.
        let evs = p.a_events.borrow();
        assert_eq!(
            evs.iter().filter(|e| **e == Event::Completion(acq)).count(),
            1
        );
        // CPU: the layer charged the WRs it built (32 chunks).
        let cpu = p.net.cpu(1, ta);
        let built = cpu.by_layer.get("partition").copied().unwrap_or(0);
        assert_eq!(built, 32 * CpuCost::default().ps(Work::WrBuilt(1)));
    }
}

#[test]
fn send_recv_chunks_arrive_out_of_order_and_are_reassembled_into_one_recv() {
    let len = 300_000u64;
    let mut p = pair(
        &cfg(3, 16 << 10, Assign::Dynamic),
        false,
        MIB,
        QpInit::rc(0),
    );
    let (ta, acq, aqp, amr) = p.a;
    let (tb, bcq, bqp, bmr) = p.b;
    let bytes = data(len, 2);
    p.net
        .call_as(1, ta, |v| v.write_local(amr.addr, &bytes))
        .unwrap();
    let recv = RecvWr {
        wr_id: 77,
        sg_list: vec![Sge {
            addr: bmr.addr + 100,
            length: (len + 5000) as u32,
            lkey: bmr.lkey,
        }],
    };
    p.net.call_as(2, tb, |v| v.post_recv(bqp, recv)).unwrap();
    p.net.run();
    // Member 1's first chunk is lost once: it is retransmitted after the RC timeout, so every
    // other chunk arrives before it.
    let ms = members(&p.net, 1, aqp);
    p.net.lose_packets(1, ms[1], 1);
    let w = rdma(5, SendOp::SendWithImm(0xabcd), &p, 0, len);
    let t0 = p.net.now();
    p.net.call_as(1, ta, |v| v.post_send(aqp, w)).unwrap();
    p.net.run();
    // The receiver's last chunk came only after the RC timeout (1 ms): the lost one, long after
    // every other.
    let done_at = p
        .net
        .deliveries()
        .iter()
        .filter(|d| d.host == 2 && d.tenant == tb && d.event.is_some())
        .map(|d| d.at)
        .max()
        .expect("the receiver was notified");
    assert!(
        done_at - t0 >= p.net.config().rc_timeout_ps,
        "{}",
        done_at - t0
    );
    let s = poll(&mut p.net, 1, ta, acq);
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].wr_id, s[0].status, s[0].opcode),
        (5, WcStatus::Success, WcOpcode::Send)
    );
    let r = poll(&mut p.net, 2, tb, bcq);
    assert_eq!(r.len(), 1, "one RECV completion for the whole message");
    assert_eq!(
        (
            r[0].wr_id,
            r[0].status,
            r[0].opcode,
            r[0].byte_len,
            r[0].imm
        ),
        (
            77,
            WcStatus::Success,
            WcOpcode::RecvWithImm,
            len,
            Some(0xabcd)
        )
    );
    assert_eq!((r[0].qp_num, r[0].src_host, r[0].src_qp), (bqp, 1, aqp));
    assert_eq!(p.net.nic(2).read_mem(tb, bmr.addr + 100, len), bytes);
    // 19 chunks of 16 KiB; the receiver copied each into the message, and the message into the
    // RECV (two copies, charged).
    assert_eq!(counter(&p.net, 2, tb, "rx_chunks"), 19.0);
    assert_eq!(counter(&p.net, 2, tb, "copied_bytes"), 2.0 * len as f64);
    let cpu = p.net.cpu(2, tb).by_layer.get("partition").copied().unwrap();
    assert!(
        cpu >= 2 * CpuCost::default().ps(Work::Copy(len)) - 1000,
        "{cpu}"
    );
    // Chunks arrived below the highest offset placed so far.
    assert!(counter(&p.net, 2, tb, "rx_reordered") >= 1.0);
    assert_eq!(
        p.b_events
            .borrow()
            .iter()
            .filter(|e| **e == Event::Completion(bcq))
            .count(),
        1
    );
}

#[test]
fn write_with_imm_posts_its_imm_last_and_the_receiver_sees_the_total_length() {
    let len = 200_000u64;
    let mut p = pair(
        &cfg(4, 32 << 10, Assign::Dynamic),
        false,
        MIB,
        QpInit::rc(0),
    );
    let (ta, acq, aqp, amr) = p.a;
    let (tb, bcq, bqp, _) = p.b;
    let bytes = data(len, 3);
    p.net
        .call_as(1, ta, |v| v.write_local(amr.addr, &bytes))
        .unwrap();
    p.net
        .call_as(2, tb, |v| {
            v.post_recv(
                bqp,
                RecvWr {
                    wr_id: 9,
                    sg_list: vec![],
                },
            )
        })
        .unwrap();
    // Two messages back to back: a WRITE and a WRITE_WITH_IMM; the imm's completion at the
    // receiver must imply both landed.
    let w1 = rdma(1, SendOp::Write, &p, 0, len / 2);
    let w2 = rdma(2, SendOp::WriteWithImm(0x55), &p, len / 2, len / 2);
    p.net.call_as(1, ta, |v| v.post_send(aqp, w1)).unwrap();
    p.net.call_as(1, ta, |v| v.post_send(aqp, w2)).unwrap();
    p.net.run();
    let s = poll(&mut p.net, 1, ta, acq);
    assert_eq!(s.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![1, 2]);
    let r = poll(&mut p.net, 2, tb, bcq);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].wr_id, r[0].opcode, r[0].imm, r[0].byte_len),
        (9, WcOpcode::RecvWithImm, Some(0x55), len / 2)
    );
    assert_eq!(p.net.nic(2).read_mem(tb, DST, len), bytes);
    // The WRITE_WITH_IMM went down after every other chunk of both messages completed.
    let calls = p.net.calls_of(1, ta);
    let imm_at = calls
        .iter()
        .position(|c| matches!(c, testing::Call::PostSend(_, w) if matches!(w.op, SendOp::WriteWithImm(_))))
        .unwrap();
    let posts_before = calls[..imm_at]
        .iter()
        .filter(|c| matches!(c, testing::Call::PostSend(_, w) if w.op == SendOp::Write))
        .count();
    assert_eq!(
        posts_before,
        4 + 3,
        "all WRITE chunks but the last precede the imm"
    );
}

#[test]
fn a_member_put_in_error_mid_transfer_has_its_chunks_resent_on_the_others() {
    let mut p = pair(
        &cfg(4, 16 << 10, Assign::Dynamic),
        false,
        4 * MIB,
        QpInit::rc(0),
    );
    let (ta, acq, aqp, amr) = p.a;
    let bytes = data(4 * MIB, 4);
    p.net
        .call_as(1, ta, |v| v.write_local(amr.addr, &bytes))
        .unwrap();
    let w = rdma(3, SendOp::Write, &p, 0, 4 * MIB);
    p.net.call_as(1, ta, |v| v.post_send(aqp, w)).unwrap();
    // A quarter of the way through, member 2 goes to Error (flushing what it has outstanding).
    p.net.run_until(p.net.now() + 80_000_000);
    let ms = members(&p.net, 1, aqp);
    p.net
        .call_as(1, ta, |v| v.modify_qp(ms[2], QpModify::Error))
        .unwrap();
    p.net.run();
    let wcs = poll(&mut p.net, 1, ta, acq);
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (3, WcStatus::Success));
    assert_eq!(p.net.nic(2).read_mem(p.b.0, DST, 4 * MIB), bytes);
    assert_eq!(counter(&p.net, 1, ta, "member_failures"), 1.0);
    assert!(counter(&p.net, 1, ta, "resent") >= 1.0);
    let per: Vec<f64> = (0..4)
        .map(|i| counter(&p.net, 1, ta, &format!("chunks_q{i}")))
        .collect();
    assert_eq!(per.iter().sum::<f64>(), 256.0, "{per:?}");
    assert!(per[2] < 40.0, "the failed member stopped early: {per:?}");
    // The logical QP is still up.
    let st = p.net.call_as(1, ta, |v| v.query_qp(aqp)).unwrap().state;
    assert_eq!(st, QpState::Rts);
}

#[test]
fn a_member_whose_retries_run_out_is_replaced_and_send_recv_still_delivers_once() {
    let init = QpInit {
        retry_cnt: 1,
        ..QpInit::rc(0)
    };
    let len = 500_000u64;
    let mut p = pair(&cfg(3, 16 << 10, Assign::Static), false, MIB, init);
    let (ta, acq, aqp, amr) = p.a;
    let (tb, bcq, bqp, bmr) = p.b;
    let bytes = data(len, 5);
    p.net
        .call_as(1, ta, |v| v.write_local(amr.addr, &bytes))
        .unwrap();
    let recv = RecvWr {
        wr_id: 8,
        sg_list: vec![Sge {
            addr: bmr.addr,
            length: len as u32,
            lkey: bmr.lkey,
        }],
    };
    p.net.call_as(2, tb, |v| v.post_recv(bqp, recv)).unwrap();
    p.net.run();
    let ms = members(&p.net, 1, aqp);
    p.net.lose_packets(1, ms[1], 1_000_000);
    let w = rdma(6, SendOp::Send, &p, 0, len);
    p.net.call_as(1, ta, |v| v.post_send(aqp, w)).unwrap();
    p.net.run();
    let s = poll(&mut p.net, 1, ta, acq);
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].wr_id, s[0].status), (6, WcStatus::Success));
    let r = poll(&mut p.net, 2, tb, bcq);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, len));
    assert_eq!(p.net.nic(2).read_mem(tb, bmr.addr, len), bytes);
    assert_eq!(
        p.net.nic(1).qp_attr(ms[1]).unwrap().state,
        QpState::Error,
        "member 1 gave up"
    );
    assert_eq!(counter(&p.net, 1, ta, "member_failures"), 1.0);
    assert!(counter(&p.net, 1, ta, "resent") >= 1.0);
    assert_eq!(counter(&p.net, 1, ta, "chunks_q1"), 0.0);
}

#[test]
fn without_resend_a_failed_member_fails_the_application_wr_and_its_qp() {
    let c = PartitionConfig {
        resend: false,
        ..cfg(4, 16 << 10, Assign::Dynamic)
    };
    let mut p = pair(&c, false, 2 * MIB, QpInit::rc(0));
    let (ta, acq, aqp, _) = p.a;
    // Two WRs: the first unsignaled (errors complete anyway), the second signaled.
    let mut w1 = rdma(10, SendOp::Write, &p, 0, MIB);
    w1.signaled = false;
    let w2 = rdma(11, SendOp::Write, &p, MIB, MIB);
    p.net.call_as(1, ta, |v| v.post_send(aqp, w1)).unwrap();
    p.net.call_as(1, ta, |v| v.post_send(aqp, w2)).unwrap();
    p.net.run_until(p.net.now() + 30_000_000);
    let ms = members(&p.net, 1, aqp);
    p.net
        .call_as(1, ta, |v| v.modify_qp(ms[3], QpModify::Error))
        .unwrap();
    p.net.run();
    let wcs = poll(&mut p.net, 1, ta, acq);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(10, WcStatus::Flushed), (11, WcStatus::Flushed)]
    );
    let st = p.net.call_as(1, ta, |v| v.query_qp(aqp)).unwrap().state;
    assert_eq!(st, QpState::Error);
    for m in ms {
        assert_eq!(p.net.nic(1).qp_attr(m).unwrap().state, QpState::Error);
    }
    // A later post completes flushed at once, as on an ibverbs QP in Error.
    let w3 = rdma(12, SendOp::Write, &p, 0, 100);
    p.net.call_as(1, ta, |v| v.post_send(aqp, w3)).unwrap();
    p.net.run();
    let wcs = poll(&mut p.net, 1, ta, acq);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (12, WcStatus::Flushed));
    assert_eq!(counter(&p.net, 1, ta, "conn_errors"), 1.0);
}

#[test]
fn when_every_member_fails_the_wr_completes_with_retry_exceeded() {
    let init = QpInit {
        retry_cnt: 1,
        ..QpInit::rc(0)
    };
    let mut p = pair(&cfg(2, 16 << 10, Assign::Dynamic), false, MIB, init);
    let (ta, acq, aqp, _) = p.a;
    p.net.kill_host(2);
    let w = rdma(20, SendOp::Write, &p, 0, MIB);
    p.net.call_as(1, ta, |v| v.post_send(aqp, w)).unwrap();
    p.net.run();
    let wcs = poll(&mut p.net, 1, ta, acq);
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (20, WcStatus::RetryExceeded));
    assert_eq!(
        p.net.call_as(1, ta, |v| v.query_qp(aqp)).unwrap().state,
        QpState::Error
    );
}

#[test]
fn a_bad_rkey_fails_the_wr_with_remote_access_error_and_is_not_resent() {
    let mut p = pair(
        &cfg(4, 16 << 10, Assign::Dynamic),
        false,
        MIB,
        QpInit::rc(0),
    );
    let (ta, acq, aqp, _) = p.a;
    let mut w = rdma(30, SendOp::Write, &p, 0, MIB);
    w.rkey ^= 0x77;
    p.net.call_as(1, ta, |v| v.post_send(aqp, w)).unwrap();
    p.net.run();
    let wcs = poll(&mut p.net, 1, ta, acq);
    assert_eq!(wcs.len(), 1);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].status),
        (30, WcStatus::RemoteAccessError)
    );
    assert_eq!(counter(&p.net, 1, ta, "resent"), 0.0);
}

#[test]
fn small_sends_keep_their_order_and_unsignaled_wrs_complete_silently() {
    let mut p = pair(&cfg(4, 4 << 10, Assign::Dynamic), false, MIB, QpInit::rc(0));
    let (ta, acq, aqp, amr) = p.a;
    let (tb, bcq, bqp, bmr) = p.b;
    let bytes = data(64 * 100, 6);
    p.net
        .call_as(1, ta, |v| v.write_local(amr.addr, &bytes))
        .unwrap();
    for i in 0..100u64 {
        let recv = RecvWr {
            wr_id: 1000 + i,
            sg_list: vec![Sge {
                addr: bmr.addr + i * 64,
                length: 64,
                lkey: bmr.lkey,
            }],
        };
        p.net.call_as(2, tb, |v| v.post_recv(bqp, recv)).unwrap();
    }
    for i in 0..100u64 {
        let mut w = rdma(i, SendOp::Send, &p, i * 64, 64);
        w.signaled = i % 10 == 9;
        p.net.call_as(1, ta, |v| v.post_send(aqp, w)).unwrap();
    }
    p.net.run();
    let s = poll(&mut p.net, 1, ta, acq);
    assert_eq!(
        s.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        (0..10).map(|k| k * 10 + 9).collect::<Vec<_>>()
    );
    let r = poll(&mut p.net, 2, tb, bcq);
    assert_eq!(
        r.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        (1000..1100).collect::<Vec<_>>()
    );
    assert_eq!(p.net.nic(2).read_mem(tb, bmr.addr, 6400), bytes);
}

#[test]
fn a_peer_without_the_layer_gets_a_single_qp_connection() {
    let mut p = pair(&cfg(4, 16 << 10, Assign::Dynamic), true, MIB, QpInit::rc(0));
    let (ta, acq, aqp, amr) = p.a;
    let bytes = data(MIB, 7);
    p.net
        .call_as(1, ta, |v| v.write_local(amr.addr, &bytes))
        .unwrap();
    let w = rdma(1, SendOp::Write, &p, 0, MIB);
    p.net.call_as(1, ta, |v| v.post_send(aqp, w)).unwrap();
    p.net.run();
    let wcs = poll(&mut p.net, 1, ta, acq);
    assert_eq!((wcs.len(), wcs[0].status), (1, WcStatus::Success));
    assert_eq!(p.net.nic(2).read_mem(p.b.0, DST, MIB), bytes);
    assert_eq!(counter(&p.net, 1, ta, "conns_single"), 1.0);
    // The WR goes as it is: one "chunk".
    assert_eq!(counter(&p.net, 1, ta, "chunks_q0"), 1.0);
    assert!(counter(&p.net, 1, ta, "chunks_q1") == 0.0);
    // SEND both ways: no chunk header reaches the plain peer, and its plain SEND reaches the
    // application's RECV as it is.
    let (tb, bcq, bqp, bmr) = p.b;
    let r = |id, addr, lkey| RecvWr {
        wr_id: id,
        sg_list: vec![Sge {
            addr,
            length: 50_000,
            lkey,
        }],
    };
    let rb = r(70, bmr.addr + MIB / 2, bmr.lkey);
    p.net.call_as(2, tb, |v| v.post_recv(bqp, rb)).unwrap();
    let ra = r(71, amr.addr + MIB / 2, amr.lkey);
    p.net.call_as(1, ta, |v| v.post_recv(aqp, ra)).unwrap();
    let s = rdma(2, SendOp::SendWithImm(9), &p, 0, 40_000);
    p.net.call_as(1, ta, |v| v.post_send(aqp, s)).unwrap();
    p.net
        .call_as(2, tb, |v| {
            let mut w = SendWr::new(
                3,
                SendOp::Send,
                vec![Sge {
                    addr: bmr.addr,
                    length: 30_000,
                    lkey: bmr.lkey,
                }],
            );
            w.signaled = true;
            v.post_send(bqp, w)
        })
        .unwrap();
    p.net.run();
    let rb = poll(&mut p.net, 2, tb, bcq);
    let got: Vec<_> = rb
        .iter()
        .filter(|w| w.opcode == WcOpcode::RecvWithImm)
        .map(|w| (w.wr_id, w.byte_len, w.imm))
        .collect();
    assert_eq!(got, vec![(70, 40_000, Some(9))]);
    assert_eq!(
        p.net.nic(2).read_mem(tb, bmr.addr + MIB / 2, 40_000),
        bytes[..40_000]
    );
    let ra: Vec<_> = poll(&mut p.net, 1, ta, acq)
        .iter()
        .map(|w| (w.wr_id, w.status, w.byte_len))
        .collect();
    assert!(ra.contains(&(71, WcStatus::Success, 30_000)), "{ra:?}");
    assert!(ra.contains(&(2, WcStatus::Success, 40_000)), "{ra:?}");
}

#[test]
fn bad_parameters_and_missing_capabilities_are_refused_by_name() {
    let board = braid_verbs::rendezvous::board();
    let mut h = HostCtx::new(1, FakeNet::default_caps(1)).with_board(board.clone());
    for (c, key) in [
        (
            PartitionConfig {
                qps: 0,
                ..Default::default()
            },
            "qps",
        ),
        (
            PartitionConfig {
                qps: 17,
                ..Default::default()
            },
            "qps",
        ),
        (
            PartitionConfig {
                chunk: braid_units::Bytes(10),
                ..Default::default()
            },
            "chunk",
        ),
        (
            PartitionConfig {
                window: braid_units::Bytes(0),
                ..Default::default()
            },
            "window",
        ),
        (
            PartitionConfig {
                recv_buffers: 0,
                ..Default::default()
            },
            "recv_buffers",
        ),
    ] {
        let e = c.build(&mut h, 1).err().expect("refused");
        assert_eq!(e.key, key);
    }
    assert!(PartitionConfig::default().build(&mut h, 1).is_ok());
    let mut caps = FakeNet::default_caps(1);
    caps.sport_control = false;
    let mut h2 = HostCtx::new(1, caps.clone()).with_board(board.clone());
    assert!(PartitionConfig::default().build(&mut h2, 1).is_err());
    // Without port control, several local addresses are paths (rxe: one subnet per link)...
    let mut caps2 = caps.clone();
    caps2.local_addrs = vec![1, 2];
    let mut h3 = HostCtx::new(1, caps2.clone()).with_board(board.clone());
    assert!(PartitionConfig::default().build(&mut h3, 1).is_ok());
    // ... unless the members are kept on one address.
    let one_addr = PartitionConfig {
        spread_addrs: false,
        ..Default::default()
    };
    let mut h4 = HostCtx::new(1, caps2).with_board(board);
    assert!(one_addr.build(&mut h4, 1).is_err());
    assert!(PartitionConfig::default()
        .build(&mut HostCtx::new(1, FakeNet::default_caps(1)), 1)
        .is_err());
    // Scenario form.
    let e: Result<crate::MiddlewareEntry, _> =
        serde_json::from_str(r#"{"kind": "partition", "assign": "random"}"#);
    assert!(e.unwrap_err().to_string().contains("random"));
    let ok: crate::MiddlewareEntry = serde_json::from_str(
        r#"{"kind": "partition", "qps": 2, "chunk": "16KiB", "assign": "static"}"#,
    )
    .unwrap();
    assert_eq!(ok.0.name(), "partition");
}

#[test]
fn a_cq_armed_before_its_qp_exists_still_notifies_once() {
    let c = cfg(2, 16 << 10, Assign::Dynamic);
    let mut net = FakeNet::new(2);
    let ev = Rc::new(RefCell::new(Vec::new()));
    let ta = net
        .add_tenant_with(1, Box::new(Events(ev.clone())), &[&c])
        .unwrap();
    let tb = net.add_tenant_with(2, Box::new(Idle), &[&c]).unwrap();
    net.run();
    let (acq, aqp, amr) = net.call_as(1, ta, |v| {
        let cq = v.create_cq(64).unwrap();
        v.req_notify_cq(cq).unwrap(); // armed first, as FlowSender does
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        (cq, qp, v.reg_mr(SRC, MIB, Access::ALL.tracked()).unwrap())
    });
    let (bqp, bmr) = net.call_as(2, tb, |v| {
        let cq = v.create_cq(64).unwrap();
        (
            v.create_qp(&QpInit::rc(cq)).unwrap(),
            v.reg_mr(DST, MIB, Access::ALL).unwrap(),
        )
    });
    net.call_as(1, ta, |v| v.connect_qp(aqp, remote(2, bqp)))
        .unwrap();
    net.call_as(2, tb, |v| v.connect_qp(bqp, remote(1, aqp)))
        .unwrap();
    let mut w = SendWr::new(
        1,
        SendOp::Write,
        vec![Sge {
            addr: amr.addr,
            length: 100_000,
            lkey: amr.lkey,
        }],
    );
    (w.remote_addr, w.rkey) = (bmr.addr, bmr.rkey);
    net.call_as(1, ta, |v| v.post_send(aqp, w)).unwrap();
    net.run();
    assert_eq!(
        ev.borrow()
            .iter()
            .filter(|e| **e == Event::Completion(acq))
            .count(),
        1
    );
    assert_eq!(poll(&mut net, 1, ta, acq).len(), 1);
}

#[test]
fn a_wr_the_nic_refuses_is_refused_to_the_application_and_the_qp_stays_up() {
    for assign in [Assign::Static, Assign::Dynamic] {
        let mut p = pair(&cfg(3, 16 << 10, assign), false, MIB, QpInit::rc(0));
        let (ta, acq, aqp, amr) = p.a;
        let mut bad = rdma(1, SendOp::Write, &p, 0, 100_000);
        bad.sg_list[0].lkey ^= 0x55;
        let e = p.net.call_as(1, ta, |v| v.post_send(aqp, bad)).unwrap_err();
        assert!(matches!(e, VerbsError::BadKey(_)), "{e:?}");
        let bytes = data(100_000, 8);
        p.net
            .call_as(1, ta, |v| v.write_local(amr.addr, &bytes))
            .unwrap();
        let good = rdma(2, SendOp::Write, &p, 0, 100_000);
        p.net.call_as(1, ta, |v| v.post_send(aqp, good)).unwrap();
        p.net.run();
        let wcs = poll(&mut p.net, 1, ta, acq);
        assert_eq!(
            wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
            vec![(2, WcStatus::Success)]
        );
        assert_eq!(p.net.nic(2).read_mem(p.b.0, DST, 100_000), bytes);
        assert_eq!(counter(&p.net, 1, ta, "messages"), 1.0);
    }
}

#[test]
fn without_port_control_the_members_take_one_address_pair_each() {
    // rxe's case: the NIC derives the UDP source port itself, so paths come from addresses
    // (one subnet per link). Member i sends from the host's address i to the peer's address i.
    let c = cfg(2, 16 << 10, Assign::Dynamic);
    let mut net = FakeNet::new(2);
    for (h, second) in [(1u32, 101u32), (2, 102)] {
        let mut caps = FakeNet::default_caps(h);
        caps.sport_control = false;
        caps.local_addrs = vec![h, second];
        net.set_caps(h, caps);
    }
    let ta = net.add_tenant_with(1, Box::new(Idle), &[&c]).unwrap();
    let tb = net.add_tenant_with(2, Box::new(Idle), &[&c]).unwrap();
    net.run();
    let end = |addr: u64| {
        move |v: &mut dyn Verbs| {
            let cq = v.create_cq(4096).unwrap();
            let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
            (cq, qp, v.reg_mr(addr, MIB, Access::ALL.tracked()).unwrap())
        }
    };
    let (acq, aqp, amr) = net.call_as(1, ta, end(SRC));
    let (_, bqp, bmr) = net.call_as(2, tb, end(DST));
    net.call_as(1, ta, |v| v.connect_qp(aqp, remote(2, bqp)))
        .unwrap();
    net.call_as(2, tb, |v| v.connect_qp(bqp, remote(1, aqp)))
        .unwrap();
    let bytes = data(MIB, 5);
    net.call_as(1, ta, |v| v.write_local(amr.addr, &bytes))
        .unwrap();
    let mut w = SendWr::new(
        7,
        SendOp::Write,
        vec![Sge {
            addr: amr.addr,
            length: MIB as u32,
            lkey: amr.lkey,
        }],
    );
    (w.remote_addr, w.rkey) = (bmr.addr, bmr.rkey);
    net.call_as(1, ta, |v| v.post_send(aqp, w)).unwrap();
    net.run();
    let wcs = poll(&mut net, 1, ta, acq);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(7, WcStatus::Success)]
    );
    assert_eq!(net.nic(2).read_mem(tb, DST, MIB), bytes);
    for i in 0..2 {
        assert!(counter(&net, 1, ta, &format!("chunks_q{i}")) > 0.0);
    }
    // The address pairs: (1 -> 2) for the application's QP, (101 -> 102) for member 1, on both
    // ends.
    for (h, qp, mine, peer) in [(1, aqp, [1, 101], [2, 102]), (2, bqp, [2, 102], [1, 101])] {
        let ms = members(&net, h, qp);
        assert_eq!(ms.len(), 2);
        for (i, &m) in ms.iter().enumerate() {
            let a = net.nic(h).qp_attr(m).unwrap();
            assert_eq!(
                (a.local_addr, a.remote.unwrap().host),
                (mine[i], peer[i]),
                "host {h} member {i}"
            );
        }
    }
}
