//! The fake NIC's semantics, one test per rule. Each test checks what a real NIC would do, so a
//! fake that got the rule wrong fails it.

use super::*;
use std::cell::RefCell;
use std::rc::Rc;

const A: u32 = 1;
const B: u32 = 2;
const BUF: u64 = 0x10_000;
const BUF_LEN: u64 = 1 << 16;

/// One end of a connection: a CQ, a QP on it and a tracked buffer.
#[derive(Debug, Clone, Copy)]
struct End {
    host: u32,
    tenant: TenantId,
    cq: CqId,
    qp: QpNum,
    mr: MemoryRegion,
}

impl End {
    fn remote(&self) -> RemoteQp {
        RemoteQp {
            host: self.host,
            qpn: self.qp,
            udp_sport: None,
        }
    }
    fn sge(&self, off: u64, len: u32) -> Sge {
        Sge {
            addr: self.mr.addr + off,
            length: len,
            lkey: self.mr.lkey,
        }
    }
}

fn make_end(net: &mut FakeNet, host: u32, tenant: TenantId, init: &dyn Fn(CqId) -> QpInit) -> End {
    net.call_as(host, tenant, |v| {
        let cq = v.create_cq(64).unwrap();
        let qp = v.create_qp(&init(cq)).unwrap();
        let mr = v.reg_mr(BUF, BUF_LEN, Access::ALL.tracked()).unwrap();
        End {
            host,
            tenant,
            cq,
            qp,
            mr,
        }
    })
}

fn connect(net: &mut FakeNet, a: &End, b: &End) {
    net.call_as(a.host, a.tenant, |v| v.connect_qp(a.qp, b.remote()))
        .unwrap();
    net.call_as(b.host, b.tenant, |v| v.connect_qp(b.qp, a.remote()))
        .unwrap();
}

/// A net of two hosts with one tenant each and a connected pair of QPs made by `init`.
fn pair_with(init: &dyn Fn(CqId) -> QpInit) -> (FakeNet, End, End) {
    let mut net = FakeNet::new(2);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, init);
    let b = make_end(&mut net, B, tb, init);
    connect(&mut net, &a, &b);
    (net, a, b)
}

fn pair() -> (FakeNet, End, End) {
    pair_with(&|cq| QpInit::rc(cq))
}

fn poll(net: &mut FakeNet, e: &End) -> Vec<WorkCompletion> {
    poll_cq(net, e.host, e.tenant, e.cq)
}

fn poll_cq(net: &mut FakeNet, host: u32, tenant: TenantId, cq: CqId) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    net.call_as(host, tenant, |v| v.poll_cq(cq, 1000, &mut out));
    out
}

fn post(net: &mut FakeNet, e: &End, wr: SendWr) -> Result<(), VerbsError> {
    net.call_as(e.host, e.tenant, |v| v.post_send(e.qp, wr))
}

fn post_recv(net: &mut FakeNet, e: &End, wr_id: u64, off: u64, len: u32) {
    net.call_as(e.host, e.tenant, |v| {
        v.post_recv(
            e.qp,
            RecvWr {
                wr_id,
                sg_list: vec![e.sge(off, len)],
            },
        )
    })
    .unwrap();
}

/// A WRITE of `len` bytes from `from`'s buffer at `off` to `to`'s buffer at `roff`.
fn write(id: u64, from: &End, off: u64, len: u32, to: &End, roff: u64) -> SendWr {
    let mut wr = SendWr::new(id, SendOp::Write, vec![from.sge(off, len)]);
    wr.remote_addr = to.mr.addr + roff;
    wr.rkey = to.mr.rkey;
    wr
}

fn op_wr(id: u64, op: SendOp) -> SendWr {
    SendWr::new(id, op, vec![])
}

fn statuses(wcs: &[WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

fn completions_of(net: &FakeNet, host: u32, tenant: TenantId) -> usize {
    net.events_of(host, tenant)
        .iter()
        .filter(|e| matches!(e, Event::Completion(_)))
        .count()
}

fn state(net: &FakeNet, e: &End) -> QpState {
    net.nic(e.host).qp_attr(e.qp).unwrap().state
}

// ------------------------------------------------------------------------------ CQs

#[test]
fn an_unarmed_cq_never_notifies() {
    let (mut net, a, b) = pair();
    post(&mut net, &a, write(1, &a, 0, 8, &b, 0)).unwrap();
    assert_eq!(net.run(), Stop::Idle);
    assert_eq!(net.nic(A).cq_len(a.cq), Some(1));
    assert_eq!(completions_of(&net, A, a.tenant), 0);
}

#[test]
fn an_armed_cq_notifies_once_then_disarms() {
    let (mut net, a, b) = pair();
    net.call_as(A, a.tenant, |v| v.req_notify_cq(a.cq)).unwrap();
    post(&mut net, &a, write(1, &a, 0, 8, &b, 0)).unwrap();
    post(&mut net, &a, write(2, &a, 0, 8, &b, 0)).unwrap();
    net.run();
    assert_eq!(net.nic(A).cq_len(a.cq), Some(2));
    assert_eq!(completions_of(&net, A, a.tenant), 1);
    assert_eq!(net.events_of(A, a.tenant), vec![Event::Completion(a.cq)]);
    assert_eq!(net.nic(A).cq_armed(a.cq), Some(false));
    // Armed again with two completions queued: nothing until the next one.
    net.call_as(A, a.tenant, |v| v.req_notify_cq(a.cq)).unwrap();
    net.run();
    assert_eq!(completions_of(&net, A, a.tenant), 1);
    post(&mut net, &a, write(3, &a, 0, 8, &b, 0)).unwrap();
    net.run();
    assert_eq!(completions_of(&net, A, a.tenant), 2);
}

#[test]
fn completions_queued_before_arming_do_not_notify() {
    let (mut net, a, b) = pair();
    post(&mut net, &a, write(1, &a, 0, 8, &b, 0)).unwrap();
    net.run();
    net.call_as(A, a.tenant, |v| v.req_notify_cq(a.cq)).unwrap();
    net.run();
    assert_eq!(completions_of(&net, A, a.tenant), 0);
    assert_eq!(net.nic(A).cq_armed(a.cq), Some(true));
}

#[test]
fn a_full_cq_counts_overruns_and_loses_the_completion() {
    let mut net = FakeNet::new(2);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let mut a = make_end(&mut net, A, ta, &|cq| QpInit::rc(cq));
    let b = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    let small = net.call_as(A, ta, |v| v.create_cq(2)).unwrap();
    a.qp = net
        .call_as(A, ta, |v| v.create_qp(&QpInit::rc(small)))
        .unwrap();
    a.cq = small;
    let b2 = net
        .call_as(B, tb, |v| v.create_qp(&QpInit::rc(b.cq)))
        .unwrap();
    let b = End { qp: b2, ..b };
    connect(&mut net, &a, &b);
    for i in 0..3 {
        post(&mut net, &a, write(i, &a, 0, 8, &b, 0)).unwrap();
    }
    net.run();
    assert_eq!(net.nic(A).cq_len(small), Some(2));
    assert_eq!(net.nic(A).cq_overruns(small), Some(1));
    assert_eq!(net.nic(A).cq_total(small), Some(3));
    assert_eq!(
        net.call_as(A, ta, |v| v.create_cq(0)),
        Err(VerbsError::InvalidArgument("a CQ needs at least one entry"))
    );
}

#[test]
fn a_cq_in_use_cannot_be_destroyed_and_destroying_a_qp_removes_its_completions() {
    let (mut net, a, b) = pair();
    assert!(matches!(
        net.call_as(A, a.tenant, |v| v.destroy_cq(a.cq)),
        Err(VerbsError::InvalidState(_))
    ));
    post(&mut net, &a, write(1, &a, 0, 8, &b, 0)).unwrap();
    net.run();
    assert_eq!(net.nic(A).cq_len(a.cq), Some(1));
    net.call_as(A, a.tenant, |v| v.destroy_qp(a.qp)).unwrap();
    // ibverbs: no completion for a destroyed QP's WRs, and its CQEs are cleaned from the CQ.
    assert_eq!(net.nic(A).cq_len(a.cq), Some(0));
    net.call_as(A, a.tenant, |v| v.destroy_cq(a.cq)).unwrap();
    assert_eq!(
        net.call_as(A, a.tenant, |v| v.req_notify_cq(a.cq)),
        Err(VerbsError::NoSuchCq(a.cq))
    );
}

// ------------------------------------------------------------------------------ data

#[test]
fn rc_send_with_imm_moves_bytes_into_the_recv() {
    let (mut net, a, b) = pair();
    net.write_mem(A, a.tenant, BUF, b"abcdef");
    post_recv(&mut net, &b, 77, 100, 64);
    let wr = SendWr::new(5, SendOp::SendWithImm(0xfeed), vec![a.sge(0, 6)]);
    post(&mut net, &a, wr).unwrap();
    net.run();
    let rx = poll(&mut net, &b);
    assert_eq!(rx.len(), 1);
    let w = rx[0];
    assert_eq!(
        (w.wr_id, w.status, w.opcode, w.byte_len, w.imm),
        (
            77,
            WcStatus::Success,
            WcOpcode::RecvWithImm,
            6,
            Some(0xfeed)
        )
    );
    assert_eq!((w.src_host, w.src_qp, w.qp_num), (A, a.qp, b.qp));
    assert_eq!(net.nic(B).read_mem(b.tenant, BUF + 100, 6), b"abcdef");
    let tx = poll(&mut net, &a);
    assert_eq!(
        tx.iter().map(|w| (w.wr_id, w.opcode)).collect::<Vec<_>>(),
        vec![(5, WcOpcode::Send)]
    );
}

#[test]
fn a_send_longer_than_its_recv_fails_both_ends() {
    let (mut net, a, b) = pair();
    post_recv(&mut net, &b, 1, 0, 4);
    post_recv(&mut net, &b, 2, 0, 4);
    post(
        &mut net,
        &a,
        SendWr::new(9, SendOp::Send, vec![a.sge(0, 8)]),
    )
    .unwrap();
    net.run();
    assert_eq!(
        statuses(&poll(&mut net, &b)),
        vec![(1, WcStatus::LocalLengthError), (2, WcStatus::Flushed)]
    );
    assert_eq!(state(&net, &b), QpState::Error);
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(9, WcStatus::RemoteInvalidRequest)]
    );
    assert_eq!(state(&net, &a), QpState::Error);
}

#[test]
fn write_with_imm_consumes_a_recv_and_write_does_not() {
    let (mut net, a, b) = pair();
    net.write_mem(A, a.tenant, BUF, b"0123456789");
    post_recv(&mut net, &b, 40, 0, 0);
    post(&mut net, &a, write(1, &a, 0, 4, &b, 200)).unwrap();
    let mut wr = write(2, &a, 4, 6, &b, 300);
    wr.op = SendOp::WriteWithImm(7);
    post(&mut net, &a, wr).unwrap();
    net.run();
    let rx = poll(&mut net, &b);
    assert_eq!(rx.len(), 1);
    assert_eq!(
        (rx[0].wr_id, rx[0].opcode, rx[0].byte_len, rx[0].imm),
        (40, WcOpcode::RecvWithImm, 6, Some(7))
    );
    assert_eq!(net.nic(B).read_mem(b.tenant, BUF + 200, 4), b"0123");
    assert_eq!(net.nic(B).read_mem(b.tenant, BUF + 300, 6), b"456789");
}

#[test]
fn read_brings_remote_bytes_back() {
    let (mut net, a, b) = pair();
    net.write_mem(B, b.tenant, BUF + 64, b"remote!");
    let mut wr = SendWr::new(3, SendOp::Read, vec![a.sge(500, 7)]);
    wr.remote_addr = BUF + 64;
    wr.rkey = b.mr.rkey;
    post(&mut net, &a, wr).unwrap();
    net.run();
    let tx = poll(&mut net, &a);
    assert_eq!(
        (tx[0].wr_id, tx[0].status, tx[0].opcode, tx[0].byte_len),
        (3, WcStatus::Success, WcOpcode::Read, 7)
    );
    assert_eq!(net.nic(A).read_mem(a.tenant, BUF + 500, 7), b"remote!");
    assert_eq!(poll(&mut net, &b), vec![]);
}

#[test]
fn unsignaled_wrs_complete_silently_unless_the_qp_signals_all() {
    let (mut net, a, b) = pair();
    let mut wr = write(1, &a, 0, 8, &b, 0);
    wr.signaled = false;
    post(&mut net, &a, wr.clone()).unwrap();
    post(&mut net, &a, write(2, &a, 0, 8, &b, 0)).unwrap();
    net.run();
    assert_eq!(statuses(&poll(&mut net, &a)), vec![(2, WcStatus::Success)]);

    let (mut net, a, b) = pair_with(&|cq| QpInit {
        sq_sig_all: true,
        ..QpInit::rc(cq)
    });
    let mut wr = write(1, &a, 0, 8, &b, 0);
    wr.signaled = false;
    post(&mut net, &a, wr).unwrap();
    net.run();
    assert_eq!(statuses(&poll(&mut net, &a)), vec![(1, WcStatus::Success)]);
}

#[test]
fn unsignaled_wrs_hold_their_slots_until_a_later_completion_is_polled() {
    let (mut net, a, b) = pair_with(&|cq| QpInit {
        max_send_wr: 4,
        ..QpInit::rc(cq)
    });
    for i in 0..3 {
        let mut wr = write(i, &a, 0, 8, &b, 0);
        wr.signaled = false;
        post(&mut net, &a, wr).unwrap();
    }
    post(&mut net, &a, write(3, &a, 0, 8, &b, 0)).unwrap();
    net.run();
    assert_eq!(net.nic(A).qp_attr(a.qp).unwrap().send_outstanding, 0);
    // Completed, but the slots come back only when the completion is polled.
    assert_eq!(
        post(&mut net, &a, write(4, &a, 0, 8, &b, 0)),
        Err(VerbsError::QueueFull)
    );
    assert_eq!(poll(&mut net, &a).len(), 1);
    post(&mut net, &a, write(4, &a, 0, 8, &b, 0)).unwrap();
}

#[test]
fn recv_queue_full() {
    let (mut net, _, b) = pair_with(&|cq| QpInit {
        max_recv_wr: 2,
        ..QpInit::rc(cq)
    });
    post_recv(&mut net, &b, 1, 0, 8);
    post_recv(&mut net, &b, 2, 0, 8);
    let r = net.call_as(B, b.tenant, |v| {
        v.post_recv(
            b.qp,
            RecvWr {
                wr_id: 3,
                sg_list: vec![],
            },
        )
    });
    assert_eq!(r, Err(VerbsError::QueueFull));
}

#[test]
fn inline_data_is_copied_at_post_time() {
    let (mut net, a, b) = pair();
    net.write_mem(A, a.tenant, BUF, b"old!");
    let mut wr = write(1, &a, 0, 4, &b, 0);
    wr.inline = true;
    wr.sg_list[0].lkey = 0; // inline needs no key
    net.call_as(A, a.tenant, |v| {
        v.post_send(a.qp, wr)?;
        // The buffer is reusable at once.
        v.write_local(BUF, b"new!")
    })
    .unwrap();
    // Not inline: the NIC reads the buffer when it processes the WR.
    net.call_as(A, a.tenant, |v| {
        v.post_send(a.qp, write(2, &a, 0, 4, &b, 100))?;
        v.write_local(BUF, b"late")
    })
    .unwrap();
    net.run();
    assert_eq!(net.nic(B).read_mem(b.tenant, BUF, 4), b"old!");
    assert_eq!(net.nic(B).read_mem(b.tenant, BUF + 100, 4), b"late");
    let mut big = write(3, &a, 0, 1024, &b, 0);
    big.inline = true;
    assert!(matches!(
        post(&mut net, &a, big),
        Err(VerbsError::InvalidWr(_))
    ));
}

#[test]
fn zero_byte_wrs() {
    let (mut net, a, b) = pair();
    post_recv(&mut net, &b, 10, 0, 0);
    post_recv(&mut net, &b, 11, 0, 0);
    post(&mut net, &a, SendWr::new(1, SendOp::Send, vec![])).unwrap();
    // A zero-byte RDMA WRITE checks no rkey (IBA C9-88).
    let mut w = SendWr::new(2, SendOp::Write, vec![]);
    w.rkey = 0xdead;
    post(&mut net, &a, w).unwrap();
    let mut wi = SendWr::new(3, SendOp::WriteWithImm(9), vec![]);
    wi.rkey = 0xdead;
    post(&mut net, &a, wi).unwrap();
    net.run();
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    let rx = poll(&mut net, &b);
    assert_eq!(
        rx.iter()
            .map(|w| (w.wr_id, w.opcode, w.byte_len))
            .collect::<Vec<_>>(),
        vec![(10, WcOpcode::Recv, 0), (11, WcOpcode::RecvWithImm, 0)]
    );
}

#[test]
fn local_keys_are_checked_at_post_time() {
    let (mut net, a, b) = pair();
    let mut wr = write(1, &a, 0, 8, &b, 0);
    wr.sg_list[0].lkey = a.mr.rkey; // an rkey is not an lkey
    assert_eq!(post(&mut net, &a, wr), Err(VerbsError::BadKey(a.mr.rkey)));
    let wr = write(2, &a, BUF_LEN - 4, 8, &b, 0); // past the region's end
    assert_eq!(post(&mut net, &a, wr), Err(VerbsError::BadKey(a.mr.lkey)));
    // A READ lands in local memory: the region needs local write.
    let ro = net
        .call_as(A, a.tenant, |v| {
            v.reg_mr(
                0x900_000,
                64,
                Access {
                    local_write: false,
                    ..Access::default()
                },
            )
        })
        .unwrap();
    let mut rd = SendWr::new(
        3,
        SendOp::Read,
        vec![Sge {
            addr: ro.addr,
            length: 8,
            lkey: ro.lkey,
        }],
    );
    rd.remote_addr = b.mr.addr;
    rd.rkey = b.mr.rkey;
    assert_eq!(post(&mut net, &a, rd), Err(VerbsError::BadKey(ro.lkey)));
    assert_eq!(
        net.call_as(A, a.tenant, |v| v.reg_mr(
            0x800_000,
            64,
            Access {
                remote_write: true,
                ..Access::default()
            }
        )),
        Err(VerbsError::InvalidArgument(
            "remote_write needs local_write"
        ))
    );
}

// ------------------------------------------------------------------------------ RNR

#[test]
fn rnr_retries_run_out_with_rnr_retry_exceeded() {
    let (mut net, a, b) = pair_with(&|cq| QpInit {
        rnr_retry: 2,
        ..QpInit::rc(cq)
    });
    post(
        &mut net,
        &a,
        SendWr::new(1, SendOp::Send, vec![a.sge(0, 8)]),
    )
    .unwrap();
    post(&mut net, &a, write(2, &a, 0, 8, &b, 0)).unwrap();
    assert_eq!(net.run(), Stop::Idle);
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(1, WcStatus::RnrRetryExceeded), (2, WcStatus::Flushed)]
    );
    assert_eq!(state(&net, &a), QpState::Error);
    // The responder is fine.
    assert_eq!(state(&net, &b), QpState::Rts);
    // One try and two retries, 10 µs apart.
    let cfg = net.config();
    assert!(net.now() >= 2 * cfg.rnr_timeout_ps);
}

#[test]
fn rnr_retry_7_retries_until_a_recv_arrives() {
    let (mut net, a, b) = pair();
    net.write_mem(A, a.tenant, BUF, b"late");
    post(
        &mut net,
        &a,
        SendWr::new(1, SendOp::Send, vec![a.sge(0, 4)]),
    )
    .unwrap();
    post(&mut net, &a, write(2, &a, 0, 4, &b, 64)).unwrap();
    assert_eq!(net.run_until(5_000_000_000), Stop::Time);
    assert_eq!(poll(&mut net, &a), vec![]);
    // The WRITE behind the SEND must not have overtaken it.
    assert_eq!(net.nic(B).read_mem(b.tenant, BUF + 64, 4), [0; 4]);
    post_recv(&mut net, &b, 9, 0, 16);
    assert_eq!(net.run(), Stop::Idle);
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(net.nic(B).read_mem(b.tenant, BUF, 4), b"late");
    assert_eq!(net.nic(B).read_mem(b.tenant, BUF + 64, 4), b"late");
}

// ------------------------------------------------------------------------------ access errors

fn access_error_case(region: Access, op: SendOp, off: u64, len: u32, rkey: Option<u32>) {
    let mut net = FakeNet::new(2);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, &|cq| QpInit::rc(cq));
    let b0 = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    let target = net
        .call_as(B, tb, |v| v.reg_mr(0x400_000, 256, region.tracked()))
        .unwrap();
    let b = End { mr: target, ..b0 };
    connect(&mut net, &a, &b);
    net.write_mem(A, ta, BUF, &[0xab; 512]);
    net.write_mem(B, tb, 0x400_000, &[0x11; 256]);
    post_recv(&mut net, &b, 50, 0, 0);
    let mut wr = SendWr::new(1, op, vec![a.sge(0, len)]);
    wr.remote_addr = target.addr + off;
    wr.rkey = rkey.unwrap_or(target.rkey);
    post(&mut net, &a, wr).unwrap();
    post(&mut net, &a, write(2, &a, 0, 8, &b, 0)).unwrap();
    post(&mut net, &a, op_wr(3, SendOp::Nop)).unwrap();
    net.run();
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![
            (1, WcStatus::RemoteAccessError),
            (2, WcStatus::Flushed),
            (3, WcStatus::Flushed)
        ],
        "{op:?} at +{off} len {len}"
    );
    assert_eq!(state(&net, &a), QpState::Error);
    // Not one byte changed at the target (nor, for a READ, at the requester).
    assert_eq!(net.nic(B).read_mem(tb, 0x400_000, 256), vec![0x11; 256]);
    assert_eq!(net.nic(A).read_mem(ta, BUF, 512), vec![0xab; 512]);
    // RC class C: the responder's QP is in Error too; its RECV completes in error.
    assert_eq!(state(&net, &b), QpState::Error);
    let rx = poll(&mut net, &b);
    assert_eq!(rx.len(), 1);
    let expect = if matches!(op, SendOp::WriteWithImm(_)) {
        WcStatus::RemoteAccessError
    } else {
        WcStatus::Flushed
    };
    assert_eq!((rx[0].wr_id, rx[0].status), (50, expect));
}

#[test]
fn remote_access_errors_change_no_byte() {
    let no_write = Access {
        local_write: true,
        remote_write: false,
        remote_read: true,
        track: false,
    };
    let no_read = Access {
        remote_read: false,
        ..Access::ALL
    };
    // No permission.
    access_error_case(no_write, SendOp::Write, 0, 64, None);
    access_error_case(no_read, SendOp::Read, 0, 64, None);
    // Out of bounds (the region is 256 bytes).
    access_error_case(Access::ALL, SendOp::Write, 200, 64, None);
    access_error_case(Access::ALL, SendOp::WriteWithImm(1), 250, 8, None);
    access_error_case(Access::ALL, SendOp::Read, 255, 2, None);
    // A key that does not exist there.
    access_error_case(Access::ALL, SendOp::Write, 0, 8, Some(0x7777_7772));
}

#[test]
fn an_rkey_of_another_tenant_is_refused() {
    // Tenant 2 on host B registers memory; tenant 1's QP on B is the target: different
    // protection domains, so the access fails.
    let (mut net, a, b) = pair();
    let t2 = net.add_tenant(B, Box::new(Idle), vec![]);
    let other = net
        .call_as(B, t2, |v| v.reg_mr(0x500_000, 64, Access::ALL.tracked()))
        .unwrap();
    let mut wr = write(1, &a, 0, 8, &b, 0);
    wr.remote_addr = other.addr;
    wr.rkey = other.rkey;
    post(&mut net, &a, wr).unwrap();
    net.run();
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(1, WcStatus::RemoteAccessError)]
    );
    assert_eq!(net.nic(B).read_mem(t2, 0x500_000, 8), [0; 8]);
}

// ------------------------------------------------------------------------------ QP states

#[test]
fn qp_state_machine() {
    let mut net = FakeNet::new(2);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, &|cq| QpInit::rc(cq));
    let b = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    assert_eq!(state(&net, &a), QpState::Init);
    // Init: RECVs may be posted, sends not.
    post_recv(&mut net, &a, 1, 0, 8);
    assert!(matches!(
        post(&mut net, &a, op_wr(1, SendOp::Nop)),
        Err(VerbsError::InvalidState(_))
    ));
    connect(&mut net, &a, &b);
    assert_eq!(state(&net, &a), QpState::Rts);
    assert!(matches!(
        net.call_as(A, ta, |v| v.connect_qp(a.qp, b.remote())),
        Err(VerbsError::InvalidState(_))
    ));
    net.call_as(A, ta, |v| v.modify_qp(a.qp, QpModify::Error))
        .unwrap();
    assert_eq!(state(&net, &a), QpState::Error);
    assert_eq!(statuses(&poll(&mut net, &a)), vec![(1, WcStatus::Flushed)]);
    // Error: posts are accepted and complete Flushed, signaled or not.
    let mut wr = op_wr(2, SendOp::Nop);
    wr.signaled = false;
    post(&mut net, &a, wr).unwrap();
    post_recv(&mut net, &a, 3, 0, 8);
    net.run();
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(2, WcStatus::Flushed), (3, WcStatus::Flushed)]
    );
    assert!(matches!(
        net.call_as(A, ta, |v| v.connect_qp(a.qp, b.remote())),
        Err(VerbsError::InvalidState(_))
    ));
    // Reset: queues emptied without completions, then connect again.
    post_recv(&mut net, &a, 4, 0, 8);
    net.call_as(A, ta, |v| v.modify_qp(a.qp, QpModify::Reset))
        .unwrap();
    assert_eq!(state(&net, &a), QpState::Reset);
    assert_eq!(net.nic(A).recv_outstanding(a.qp), Some(0));
    assert!(matches!(
        net.call_as(A, ta, |v| v.post_recv(
            a.qp,
            RecvWr {
                wr_id: 5,
                sg_list: vec![]
            }
        )),
        Err(VerbsError::InvalidState(_))
    ));
    net.run();
    assert_eq!(poll(&mut net, &a), vec![]);
    // The peer must reconnect too (its PSNs start over as well).
    net.call_as(B, tb, |v| v.modify_qp(b.qp, QpModify::Reset))
        .unwrap();
    connect(&mut net, &a, &b);
    net.write_mem(A, ta, BUF, b"again");
    post(&mut net, &a, write(6, &a, 0, 5, &b, 0)).unwrap();
    net.run();
    assert_eq!(statuses(&poll(&mut net, &a)), vec![(6, WcStatus::Success)]);
    assert_eq!(net.nic(B).read_mem(tb, BUF, 5), b"again");
}

#[test]
fn modify_to_error_flushes_send_and_recv_wrs_in_order() {
    let (mut net, a, b) = pair();
    post_recv(&mut net, &a, 100, 0, 8);
    post_recv(&mut net, &a, 101, 0, 8);
    // The SEND waits for a RECV forever (rnr_retry 7): everything behind it stays queued.
    post(
        &mut net,
        &a,
        SendWr::new(1, SendOp::Send, vec![a.sge(0, 8)]),
    )
    .unwrap();
    let mut unsignaled = write(2, &a, 0, 8, &b, 0);
    unsignaled.signaled = false;
    post(&mut net, &a, unsignaled).unwrap();
    post(&mut net, &a, op_wr(3, SendOp::Nop)).unwrap();
    net.run_until(1_000_000_000);
    assert_eq!(net.nic(A).qp_attr(a.qp).unwrap().send_outstanding, 3);
    net.call_as(A, a.tenant, |v| v.modify_qp(a.qp, QpModify::Error))
        .unwrap();
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![
            (1, WcStatus::Flushed),
            (2, WcStatus::Flushed),
            (3, WcStatus::Flushed),
            (100, WcStatus::Flushed),
            (101, WcStatus::Flushed)
        ]
    );
    assert_eq!(net.nic(A).qp_attr(a.qp).unwrap().send_outstanding, 0);
}

#[test]
fn query_qp_reports_every_attribute() {
    let mut net = FakeNet::new(2);
    let mut caps = FakeNet::default_caps(A);
    caps.local_addrs = vec![A, 101];
    net.set_caps(A, caps);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let (cq2, a) = {
        let a = make_end(&mut net, A, ta, &|cq| QpInit {
            local_addr: 1,
            retry_cnt: 3,
            rnr_retry: 5,
            cross_channel: true,
            ..QpInit::rc(cq)
        });
        (net.call_as(A, ta, |v| v.create_cq(4)).unwrap(), a)
    };
    let _ = cq2;
    let b = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    let remote = RemoteQp {
        udp_sport: Some(4791),
        ..b.remote()
    };
    net.call_as(A, ta, |v| v.connect_qp(a.qp, remote)).unwrap();
    // The peer is connected back to A's second address: packets from it are accepted.
    net.call_as(B, tb, |v| {
        v.connect_qp(
            b.qp,
            RemoteQp {
                host: 101,
                ..a.remote()
            },
        )
    })
    .unwrap();
    post(&mut net, &a, SendWr::new(1, SendOp::Send, vec![])).unwrap(); // RNR: stays
    post(&mut net, &a, op_wr(2, SendOp::Nop)).unwrap();
    net.run_until(1_000_000);
    let attr = net.call_as(A, ta, |v| v.query_qp(a.qp)).unwrap();
    assert_eq!(
        attr,
        QpAttr {
            qpn: a.qp,
            qp_type: QpType::Rc,
            state: QpState::Rts,
            local_addr: 101,
            udp_sport: 4791,
            remote: Some(remote),
            retry_cnt: 3,
            rnr_retry: 5,
            cross_channel: true,
            send_cq: a.cq,
            recv_cq: a.cq,
            send_outstanding: 2,
        }
    );
    net.call_as(A, ta, |v| v.modify_qp(a.qp, QpModify::UdpSport(5000)))
        .unwrap();
    assert_eq!(net.nic(A).qp_attr(a.qp).unwrap().udp_sport, 5000);
    post_recv(&mut net, &b, 1, 0, 8);
    net.run();
    assert_eq!(net.nic(A).qp_attr(a.qp).unwrap().send_outstanding, 0);
    assert_eq!(
        net.call_as(A, ta, |v| v.create_qp(&QpInit {
            local_addr: 2,
            ..QpInit::rc(a.cq)
        })),
        Err(VerbsError::InvalidArgument(
            "local_addr is not an index into caps.local_addrs"
        ))
    );
}

#[test]
fn without_sport_control_the_source_port_does_not_change() {
    let mut net = FakeNet::new(2);
    let mut caps = FakeNet::default_caps(A);
    caps.sport_control = false;
    net.set_caps(A, caps);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, &|cq| QpInit::rc(cq));
    let b = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    let before = net.nic(A).qp_attr(a.qp).unwrap().udp_sport;
    net.call_as(A, ta, |v| {
        v.connect_qp(
            a.qp,
            RemoteQp {
                udp_sport: Some(1234),
                ..b.remote()
            },
        )
    })
    .unwrap();
    net.call_as(A, ta, |v| v.modify_qp(a.qp, QpModify::UdpSport(999)))
        .unwrap();
    assert_eq!(net.nic(A).qp_attr(a.qp).unwrap().udp_sport, before);
}

// ------------------------------------------------------------------------------ UD, UC

#[test]
fn ud_sends_carry_a_grh_and_their_source() {
    // Raw ibverbs' UD receive layout (`ud_grh`); the seam's default is the payload alone (the
    // conformance suite's UD case checks that).
    let ud = |cq| QpInit::of_type(QpType::Ud, cq);
    let mut net = FakeNet::with_config(
        2,
        NetConfig {
            ud_grh: true,
            ..NetConfig::default()
        },
    );
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, &ud);
    let b = make_end(&mut net, B, tb, &ud);
    // UD needs no peer: any remote will do.
    connect(&mut net, &a, &b);
    assert_eq!(net.nic(A).qp_attr(a.qp).unwrap().remote, None);
    net.write_mem(A, ta, BUF, b"datagram");
    post_recv(&mut net, &b, 1, 0, 48);
    post_recv(&mut net, &b, 2, 0, 44); // too small for GRH + 8
    let mut wr = SendWr::new(7, SendOp::SendWithImm(3), vec![a.sge(0, 8)]);
    wr.ud_dest = Some(b.remote());
    post(&mut net, &a, wr.clone()).unwrap();
    wr.wr_id = 8;
    post(&mut net, &a, wr.clone()).unwrap();
    net.run();
    let rx = poll(&mut net, &b);
    assert_eq!(
        rx.iter()
            .map(|w| (w.wr_id, w.status, w.byte_len, w.imm, w.src_host, w.src_qp))
            .collect::<Vec<_>>(),
        vec![
            (1, WcStatus::Success, 48, Some(3), A, a.qp),
            (2, WcStatus::LocalLengthError, 48, None, A, a.qp)
        ]
    );
    assert_eq!(net.nic(B).read_mem(tb, BUF + 40, 8), b"datagram");
    assert_eq!(state(&net, &b), QpState::Rts);
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(7, WcStatus::Success), (8, WcStatus::Success)]
    );
    // No RECV: the datagram is dropped, the sender completes anyway.
    wr.wr_id = 9;
    post(&mut net, &a, wr.clone()).unwrap();
    net.run();
    assert_eq!(statuses(&poll(&mut net, &a)), vec![(9, WcStatus::Success)]);
    let mut no_dest = wr.clone();
    no_dest.ud_dest = None;
    assert!(matches!(
        post(&mut net, &a, no_dest),
        Err(VerbsError::InvalidWr(_))
    ));
    let big = SendWr {
        sg_list: vec![a.sge(0, 5000)],
        ..wr.clone()
    };
    assert!(matches!(
        post(&mut net, &a, big),
        Err(VerbsError::InvalidWr(_))
    ));
    assert!(matches!(
        post(&mut net, &a, write(10, &a, 0, 8, &b, 0)),
        Err(VerbsError::InvalidWr(_))
    ));
}

#[test]
fn uc_loses_silently() {
    let (mut net, a, b) = pair_with(&|cq| QpInit::of_type(QpType::Uc, cq));
    net.write_mem(A, a.tenant, BUF, b"first...second..");
    net.lose_packets(A, a.qp, 1);
    post(&mut net, &a, write(1, &a, 0, 8, &b, 0)).unwrap();
    post(&mut net, &a, write(2, &a, 8, 8, &b, 8)).unwrap();
    net.run();
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(
        net.nic(B).read_mem(b.tenant, BUF, 16),
        b"\0\0\0\0\0\0\0\0second.."
    );
    let mut rd = SendWr::new(3, SendOp::Read, vec![a.sge(0, 8)]);
    rd.rkey = b.mr.rkey;
    assert!(matches!(
        post(&mut net, &a, rd),
        Err(VerbsError::InvalidWr(_))
    ));
    // A bad rkey on UC: dropped at the responder, nobody is told.
    let mut bad = write(4, &a, 0, 8, &b, 0);
    bad.rkey = 0x1234;
    post(&mut net, &a, bad).unwrap();
    net.run();
    assert_eq!(statuses(&poll(&mut net, &a)), vec![(4, WcStatus::Success)]);
    assert_eq!(state(&net, &b), QpState::Rts);
}

// ------------------------------------------------------------------------------ cross-channel

/// Host A's tenant with a cross-channel QP `cc` (connected to B) whose WAITs watch CQ `watch`,
/// and a plain QP `feed` on `watch` whose NOPs make completions there at will.
struct Cc {
    net: FakeNet,
    a: End,
    feed: End,
    b: End,
}

fn cross_channel_setup(cc_init: &dyn Fn(CqId) -> QpInit) -> Cc {
    let mut net = FakeNet::new(2);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, cc_init);
    let b = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    connect(&mut net, &a, &b);
    let feed = make_end(&mut net, A, ta, &|cq| QpInit::rc(cq));
    let fb = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    connect(&mut net, &feed, &fb);
    Cc { net, a, feed, b }
}

fn cc_qp(cq: CqId) -> QpInit {
    QpInit {
        cross_channel: true,
        ..QpInit::rc(cq)
    }
}

fn feed_one(cc: &mut Cc, id: u64) {
    let f = cc.feed;
    post(&mut cc.net, &f, op_wr(id, SendOp::Nop)).unwrap();
    cc.net.run();
}

#[test]
fn wait_needs_a_cross_channel_qp_and_a_capable_nic() {
    let (mut net, a, _) = pair();
    let wait = op_wr(1, SendOp::Wait { cq: a.cq, count: 1 });
    assert!(matches!(
        post(&mut net, &a, wait.clone()),
        Err(VerbsError::InvalidWr(_))
    ));
    for op in [
        SendOp::SendEnable { qp: a.qp, count: 1 },
        SendOp::RecvEnable { qp: a.qp, count: 1 },
    ] {
        assert!(matches!(
            post(&mut net, &a, op_wr(2, op)),
            Err(VerbsError::InvalidWr(_))
        ));
    }
    // Managed queues imply cross-channel.
    let (mut net, m, _) = pair_with(&|cq| QpInit {
        managed_recv: true,
        ..QpInit::rc(cq)
    });
    post(&mut net, &m, op_wr(1, SendOp::Wait { cq: m.cq, count: 0 })).unwrap();
    // A NIC without cross-channel: Unsupported, both to create and to post.
    let mut net = FakeNet::new(2);
    let mut caps = FakeNet::default_caps(A);
    caps.cross_channel = false;
    net.set_caps(A, caps);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let cq = net.call_as(A, ta, |v| v.create_cq(8)).unwrap();
    assert!(matches!(
        net.call_as(A, ta, |v| v.create_qp(&cc_qp(cq))),
        Err(VerbsError::Unsupported(_))
    ));
    let a = make_end(&mut net, A, ta, &|cq| QpInit::rc(cq));
    let b = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    connect(&mut net, &a, &b);
    assert!(matches!(
        post(&mut net, &a, wait),
        Err(VerbsError::Unsupported(_))
    ));
}

#[test]
fn a_wait_counts_from_the_previous_wait_on_its_cq() {
    let mut cc = cross_channel_setup(&cc_qp);
    let (a, f) = (cc.a, cc.feed);
    let watch = f.cq;
    // Two completions on the watched CQ before any WAIT is posted.
    feed_one(&mut cc, 100);
    feed_one(&mut cc, 101);
    // WAIT{1} counts from the CQ's wait index (0), not from now: it passes at once.
    post(
        &mut cc.net,
        &a,
        op_wr(
            1,
            SendOp::Wait {
                cq: watch,
                count: 1,
            },
        ),
    )
    .unwrap();
    post(&mut cc.net, &a, op_wr(2, SendOp::Nop)).unwrap();
    cc.net.run();
    assert_eq!(
        statuses(&poll(&mut cc.net, &a)),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    // The index is 1 now. WAIT{2} waits for 3 completions in all (2 so far), then the index
    // is 3 and WAIT{1} waits for 4.
    post(
        &mut cc.net,
        &a,
        op_wr(
            3,
            SendOp::Wait {
                cq: watch,
                count: 2,
            },
        ),
    )
    .unwrap();
    post(&mut cc.net, &a, op_wr(4, SendOp::Nop)).unwrap();
    post(
        &mut cc.net,
        &a,
        op_wr(
            5,
            SendOp::Wait {
                cq: watch,
                count: 1,
            },
        ),
    )
    .unwrap();
    post(&mut cc.net, &a, op_wr(6, SendOp::Nop)).unwrap();
    cc.net.run();
    assert_eq!(poll(&mut cc.net, &a), vec![]);
    feed_one(&mut cc, 102); // 3 total
    assert_eq!(
        statuses(&poll(&mut cc.net, &a)),
        vec![(3, WcStatus::Success), (4, WcStatus::Success)]
    );
    feed_one(&mut cc, 103); // 4 total
    let wcs = poll(&mut cc.net, &a);
    assert_eq!(
        statuses(&wcs),
        vec![(5, WcStatus::Success), (6, WcStatus::Success)]
    );
    assert_eq!(
        (wcs[0].opcode, wcs[1].opcode),
        (WcOpcode::Wait, WcOpcode::Nop)
    );
}

#[test]
fn a_blocked_wait_blocks_its_queue_and_a_zero_wait_takes_its_turn() {
    let mut cc = cross_channel_setup(&cc_qp);
    let (a, b, f) = (cc.a, cc.b, cc.feed);
    cc.net.write_mem(A, a.tenant, BUF, b"gated");
    let mut w = op_wr(1, SendOp::Wait { cq: f.cq, count: 1 });
    w.signaled = false; // an unsignaled WAIT produces no completion
    post(&mut cc.net, &a, w).unwrap();
    // A WAIT for 0 more completions of a CQ nobody waited on: satisfied from the start, but it
    // completes only when its turn comes.
    post(
        &mut cc.net,
        &a,
        op_wr(2, SendOp::Wait { cq: a.cq, count: 0 }),
    )
    .unwrap();
    post(&mut cc.net, &a, write(3, &a, 0, 5, &b, 0)).unwrap();
    cc.net.run();
    assert_eq!(poll(&mut cc.net, &a), vec![]);
    assert_eq!(cc.net.nic(B).read_mem(b.tenant, BUF, 5), [0; 5]);
    assert_eq!(cc.net.nic(A).qp_attr(a.qp).unwrap().send_outstanding, 3);
    feed_one(&mut cc, 100);
    let wcs = poll(&mut cc.net, &a);
    assert_eq!(
        statuses(&wcs),
        vec![(2, WcStatus::Success), (3, WcStatus::Success)]
    );
    assert_eq!(wcs[0].opcode, WcOpcode::Wait);
    assert_eq!(cc.net.nic(B).read_mem(b.tenant, BUF, 5), b"gated");
}

#[test]
fn send_enable_releases_wrs_of_a_managed_send_queue() {
    let mut net = FakeNet::new(2);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let m = make_end(&mut net, A, ta, &|cq| QpInit {
        managed_send: true,
        ..QpInit::rc(cq)
    });
    let mb = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    connect(&mut net, &m, &mb);
    let ctl = make_end(&mut net, A, ta, &cc_qp);
    let cb = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    connect(&mut net, &ctl, &cb);
    for i in 0..3 {
        post(&mut net, &m, write(i, &m, 0, 8, &mb, 0)).unwrap();
    }
    net.run();
    assert_eq!(poll(&mut net, &m), vec![]);
    // Enabling more than is posted is refused (libmlx5: EINVAL).
    let too_many = op_wr(9, SendOp::SendEnable { qp: m.qp, count: 4 });
    assert!(matches!(
        post(&mut net, &ctl, too_many),
        Err(VerbsError::InvalidWr(_))
    ));
    // And only a managed queue can be enabled.
    let plain = op_wr(
        9,
        SendOp::SendEnable {
            qp: ctl.qp,
            count: 1,
        },
    );
    assert!(matches!(
        post(&mut net, &ctl, plain),
        Err(VerbsError::InvalidWr(_))
    ));
    post(
        &mut net,
        &ctl,
        op_wr(10, SendOp::SendEnable { qp: m.qp, count: 1 }),
    )
    .unwrap();
    net.run();
    assert_eq!(statuses(&poll(&mut net, &m)), vec![(0, WcStatus::Success)]);
    let e = poll(&mut net, &ctl);
    assert_eq!((e[0].wr_id, e[0].opcode), (10, WcOpcode::SendEnable));
    // Counts are cumulative: a second SEND_ENABLE{1} enables the second WR...
    post(
        &mut net,
        &ctl,
        op_wr(12, SendOp::SendEnable { qp: m.qp, count: 1 }),
    )
    .unwrap();
    net.run();
    assert_eq!(statuses(&poll(&mut net, &m)), vec![(1, WcStatus::Success)]);
    // ...and the index (2 of 3 posted) leaves room for one more, not two.
    let over = op_wr(13, SendOp::SendEnable { qp: m.qp, count: 2 });
    assert!(matches!(
        post(&mut net, &ctl, over),
        Err(VerbsError::InvalidWr(_))
    ));
    // Count 0 enables everything posted so far.
    post(&mut net, &m, write(3, &m, 0, 8, &mb, 0)).unwrap();
    post(
        &mut net,
        &ctl,
        op_wr(11, SendOp::SendEnable { qp: m.qp, count: 0 }),
    )
    .unwrap();
    post(&mut net, &m, write(4, &m, 0, 8, &mb, 0)).unwrap();
    net.run();
    assert_eq!(
        statuses(&poll(&mut net, &m)),
        vec![(2, WcStatus::Success), (3, WcStatus::Success)]
    );
    assert_eq!(net.nic(A).qp_attr(m.qp).unwrap().send_outstanding, 1);
}

#[test]
fn recv_enable_releases_recvs_of_a_managed_recv_queue() {
    let mut net = FakeNet::new(2);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, &|cq| QpInit::rc(cq));
    let m = make_end(&mut net, B, tb, &|cq| QpInit {
        managed_recv: true,
        ..QpInit::rc(cq)
    });
    connect(&mut net, &a, &m);
    net.write_mem(A, ta, BUF, b"held");
    post_recv(&mut net, &m, 70, 0, 16);
    post(
        &mut net,
        &a,
        SendWr::new(1, SendOp::Send, vec![a.sge(0, 4)]),
    )
    .unwrap();
    net.run_until(1_000_000_000);
    // The RECV is there but not enabled: the sender is told RNR and keeps trying.
    assert_eq!(poll(&mut net, &m), vec![]);
    assert_eq!(poll(&mut net, &a), vec![]);
    post(
        &mut net,
        &m,
        op_wr(2, SendOp::RecvEnable { qp: m.qp, count: 1 }),
    )
    .unwrap();
    net.run_until(2_000_000_000);
    let rx = poll(&mut net, &m);
    assert_eq!(
        rx.iter().map(|w| (w.wr_id, w.opcode)).collect::<Vec<_>>(),
        vec![(2, WcOpcode::RecvEnable), (70, WcOpcode::Recv)]
    );
    assert_eq!(net.nic(B).read_mem(tb, BUF, 4), b"held");
    assert_eq!(statuses(&poll(&mut net, &a)), vec![(1, WcStatus::Success)]);
}

// ------------------------------------------------------------------------------ faults

#[test]
fn retry_exceeded_reaches_the_owner_and_flushes_the_rest() {
    let mut net = FakeNet::new(2);
    let other = net.add_tenant(A, Box::new(Idle), vec![]);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, &|cq| QpInit {
        retry_cnt: 3,
        ..QpInit::rc(cq)
    });
    let b = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    connect(&mut net, &a, &b);
    let other_cq = net.call_as(A, other, |v| v.create_cq(8)).unwrap();
    net.call_as(A, other, |v| v.req_notify_cq(other_cq))
        .unwrap();
    net.call_as(A, ta, |v| v.req_notify_cq(a.cq)).unwrap();
    net.lose_packets(A, a.qp, 1000);
    for i in 0..3 {
        post(&mut net, &a, write(i, &a, 0, 8, &b, 0)).unwrap();
    }
    assert_eq!(net.run(), Stop::Idle);
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![
            (0, WcStatus::RetryExceeded),
            (1, WcStatus::Flushed),
            (2, WcStatus::Flushed)
        ]
    );
    assert_eq!(state(&net, &a), QpState::Error);
    assert_eq!(net.events_of(A, ta), vec![Event::Completion(a.cq)]);
    assert_eq!(net.events_of(A, other), vec![]);
    assert_eq!(net.events_of(A, AGENT), vec![]);
    // The original and 3 retries, each ended by a timeout.
    let t = net.config().rc_timeout_ps;
    assert!(net.now() >= 4 * t && net.now() < 5 * t, "{}", net.now());
}

#[test]
fn rc_retries_exactly_retry_cnt_times() {
    for (lost, expect) in [(3, WcStatus::Success), (4, WcStatus::RetryExceeded)] {
        let (mut net, a, b) = pair_with(&|cq| QpInit {
            retry_cnt: 3,
            ..QpInit::rc(cq)
        });
        net.write_mem(A, a.tenant, BUF, b"survivor");
        net.lose_packets(A, a.qp, lost);
        post(&mut net, &a, write(1, &a, 0, 8, &b, 0)).unwrap();
        net.run();
        assert_eq!(
            statuses(&poll(&mut net, &a)),
            vec![(1, expect)],
            "{lost} lost"
        );
        let got = net.nic(B).read_mem(b.tenant, BUF, 8);
        assert_eq!(got == b"survivor", expect == WcStatus::Success);
    }
}

#[test]
fn go_back_n_recovers_a_pipelined_queue_in_order() {
    let (mut net, a, b) = pair_with(&|cq| QpInit {
        retry_cnt: 3,
        ..QpInit::rc(cq)
    });
    net.write_mem(A, a.tenant, BUF, b"0123456789abcdef");
    net.lose_packets(A, a.qp, 2);
    post_recv(&mut net, &b, 9, 1000, 64);
    for i in 0..4 {
        post(&mut net, &a, write(i, &a, i * 4, 4, &b, i * 4)).unwrap();
    }
    post(
        &mut net,
        &a,
        SendWr::new(4, SendOp::Send, vec![a.sge(0, 16)]),
    )
    .unwrap();
    net.run();
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        (0..5).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>()
    );
    assert_eq!(net.nic(B).read_mem(b.tenant, BUF, 16), b"0123456789abcdef");
    // The SEND was executed once, though it went out twice.
    assert_eq!(statuses(&poll(&mut net, &b)), vec![(9, WcStatus::Success)]);
    // A message of 3 packets (MTU 4096) uses 3 losses at once.
    let (mut net, a, b) = pair_with(&|cq| QpInit {
        retry_cnt: 1,
        ..QpInit::rc(cq)
    });
    net.lose_packets(A, a.qp, 4);
    post(&mut net, &a, write(1, &a, 0, 3 * 4096, &b, 0)).unwrap();
    net.run();
    // Original: 3 packets lost; the one retry: 1 lost; none left.
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(1, WcStatus::RetryExceeded)]
    );
}

#[test]
fn a_dead_peer_ends_in_retry_exceeded() {
    let (mut net, a, b) = pair_with(&|cq| QpInit {
        retry_cnt: 2,
        ..QpInit::rc(cq)
    });
    net.kill_host(B);
    post(&mut net, &a, write(1, &a, 0, 8, &b, 0)).unwrap();
    post(&mut net, &a, op_wr(2, SendOp::Nop)).unwrap();
    assert_eq!(net.run(), Stop::Idle);
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(1, WcStatus::RetryExceeded), (2, WcStatus::Flushed)]
    );
    assert!(net.nic(B).is_dead());
}

// ------------------------------------------------------------------------------ tenants

#[test]
fn a_tenant_cannot_touch_another_tenants_objects() {
    let (mut net, a, b) = pair();
    let t2 = net.add_tenant(A, Box::new(Idle), vec![]);
    post(&mut net, &a, write(1, &a, 0, 8, &b, 0)).unwrap();
    net.run();
    let my_cq = net.call_as(A, t2, |v| v.create_cq(8)).unwrap();
    let my_mr = net
        .call_as(A, t2, |v| v.reg_mr(0x700_000, 64, Access::ALL))
        .unwrap();
    let (qp, cq, mr) = (a.qp, a.cq, a.mr);
    net.call_as(A, t2, |v| {
        let noqp = Err(VerbsError::NoSuchQp(qp));
        assert_eq!(v.post_send(qp, op_wr(1, SendOp::Nop)), noqp);
        assert_eq!(
            v.post_recv(
                qp,
                RecvWr {
                    wr_id: 1,
                    sg_list: vec![]
                }
            ),
            noqp
        );
        assert_eq!(v.modify_qp(qp, QpModify::Error), noqp);
        assert_eq!(v.query_qp(qp), Err(VerbsError::NoSuchQp(qp)));
        assert_eq!(v.connect_qp(qp, b.remote()), noqp);
        assert_eq!(v.destroy_qp(qp), noqp);
        let nocq = Err(VerbsError::NoSuchCq(cq));
        let mut out = Vec::new();
        assert_eq!(v.poll_cq(cq, 10, &mut out), 0);
        assert!(out.is_empty());
        assert_eq!(v.req_notify_cq(cq), nocq);
        assert_eq!(v.destroy_cq(cq), nocq);
        assert_eq!(v.create_qp(&QpInit::rc(cq)), Err(VerbsError::NoSuchCq(cq)));
        assert_eq!(
            v.create_qp(&QpInit {
                send_cq: my_cq,
                ..QpInit::rc(cq)
            }),
            Err(VerbsError::NoSuchCq(cq))
        );
        assert_eq!(v.dereg_mr(&mr), Err(VerbsError::BadKey(mr.lkey)));
        assert!(matches!(
            v.read_local(mr.addr, 8),
            Err(VerbsError::Unsupported(_))
        ));
        // Its own QP, someone else's lkey, CQ or QP in a WR.
        let mine = v.create_qp(&cc_qp(my_cq)).unwrap();
        v.connect_qp(mine, b.remote()).unwrap();
        let mut wr = SendWr::new(
            2,
            SendOp::Write,
            vec![Sge {
                addr: mr.addr,
                length: 8,
                lkey: mr.lkey,
            }],
        );
        wr.rkey = b.mr.rkey;
        assert_eq!(v.post_send(mine, wr), Err(VerbsError::BadKey(mr.lkey)));
        assert_eq!(
            v.post_send(mine, op_wr(3, SendOp::Wait { cq, count: 1 })),
            nocq
        );
        assert_eq!(
            v.post_send(mine, op_wr(4, SendOp::SendEnable { qp, count: 1 })),
            noqp
        );
        assert!(v.dereg_mr(&my_mr).is_ok());
    });
    // Nothing was taken from the owner.
    assert_eq!(net.nic(A).cq_len(a.cq), Some(1));
    assert_eq!(state(&net, &a), QpState::Rts);
    assert_eq!(poll(&mut net, &a).len(), 1);
    // Every refused call is in the log, marked failed.
    for call in [Call::DestroyQp(qp), Call::Poll(cq), Call::ReqNotify(cq)] {
        assert!(
            net.calls()
                .iter()
                .any(|l| l.tenant == t2 && l.call == call && !l.ok),
            "{call:?}"
        );
    }
}

#[test]
fn completions_reach_only_the_owning_tenant() {
    let (mut net, a, b) = pair();
    let t2 = net.add_tenant(A, Box::new(Idle), vec![]);
    let cq2 = net.call_as(A, t2, |v| v.create_cq(8)).unwrap();
    net.call_as(A, t2, |v| v.req_notify_cq(cq2)).unwrap();
    net.call_as(A, a.tenant, |v| v.req_notify_cq(a.cq)).unwrap();
    post(&mut net, &a, write(1, &a, 0, 8, &b, 0)).unwrap();
    net.run();
    assert_eq!(net.events_of(A, a.tenant), vec![Event::Completion(a.cq)]);
    assert_eq!(net.events_of(A, t2), vec![]);
    assert_eq!(net.events_of(A, AGENT), vec![]);
}

/// A layer that records the wakes it sees and consumes its own token.
struct WakeLog {
    seen: Rc<RefCell<Vec<u64>>>,
    mine: u64,
}

impl Middleware for WakeLog {
    fn name(&self) -> &'static str {
        "wake_log"
    }
    fn on_event(&mut self, _: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        match event {
            Event::Wake(t) => {
                self.seen.borrow_mut().push(t);
                if t != self.mine {
                    up.push(event);
                }
            }
            e => up.push(e),
        }
    }
}

/// An agent layer that wakes tenant `who` with `token` when it starts.
struct Waker {
    who: TenantId,
    token: u64,
}

impl Middleware for Waker {
    fn name(&self) -> &'static str {
        "waker"
    }
    fn start(&mut self, below: &mut dyn Verbs) {
        below.charge(Work::Ns(3));
        below.wake(self.who, self.token);
    }
}

/// An application from two closures.
struct FnApp<S, E> {
    start: S,
    event: E,
}

impl<S: FnMut(&mut dyn Verbs), E: FnMut(&mut dyn Verbs, Event)> App for FnApp<S, E> {
    fn start(&mut self, v: &mut dyn Verbs) {
        (self.start)(v)
    }
    fn on_event(&mut self, v: &mut dyn Verbs, e: Event) {
        (self.event)(v, e)
    }
}

#[test]
fn a_wake_from_the_agent_layer_reaches_the_named_tenants_layer() {
    let mut net = FakeNet::new(1);
    let seen1 = Rc::new(RefCell::new(Vec::new()));
    let seen2 = Rc::new(RefCell::new(Vec::new()));
    let app_saw = Rc::new(RefCell::new(Vec::new()));
    let saw = app_saw.clone();
    let app = FnApp {
        start: |_: &mut dyn Verbs| {},
        event: move |_: &mut dyn Verbs, e: Event| saw.borrow_mut().push(e),
    };
    let t1 = net.add_tenant(
        A,
        Box::new(app),
        vec![Box::new(WakeLog {
            seen: seen1.clone(),
            mine: 5,
        })],
    );
    let t2 = net.add_tenant(
        A,
        Box::new(Idle),
        vec![Box::new(WakeLog {
            seen: seen2.clone(),
            mine: 5,
        })],
    );
    net.set_agent(
        A,
        vec![
            Box::new(Waker { who: t1, token: 5 }),
            Box::new(Waker { who: t1, token: 6 }),
            Box::new(Waker { who: 9, token: 7 }), // no such tenant: dropped
        ],
    );
    net.run();
    // Layers start lowest first: the wakes go out as 7 (nobody), 6, 5.
    assert_eq!(*seen1.borrow(), vec![6, 5]);
    assert!(seen2.borrow().is_empty());
    // The layer consumed its token 5 and forwarded 6 to the application.
    assert_eq!(*app_saw.borrow(), vec![Event::Wake(6)]);
    assert_eq!(
        net.calls_of(A, AGENT)
            .into_iter()
            .filter(|c| matches!(c, Call::Wake(..)))
            .collect::<Vec<_>>(),
        vec![Call::Wake(9, 7), Call::Wake(t1, 6), Call::Wake(t1, 5)]
    );
    assert!(!net
        .calls()
        .iter()
        .any(|l| l.call == Call::Wake(9, 7) && l.ok));
    assert_eq!(t2, 2);
    // The agent's layers charged their CPU under their own names.
    assert_eq!(net.cpu(A, AGENT).by_layer.get("waker"), Some(&9_000));
}

#[test]
fn cpu_is_charged_per_tenant_and_layer() {
    struct Builder;
    impl Middleware for Builder {
        fn name(&self) -> &'static str {
            "builder"
        }
        fn post_send(
            &mut self,
            below: &mut dyn Verbs,
            qp: QpNum,
            wr: SendWr,
        ) -> Result<(), VerbsError> {
            below.charge(Work::WrBuilt(2));
            below.post_send(qp, wr)
        }
    }
    let mut net = FakeNet::new(2);
    let ta = net.add_tenant(A, Box::new(Idle), vec![Box::new(Builder)]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, &|cq| QpInit::rc(cq));
    let b = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    connect(&mut net, &a, &b);
    net.call_as(A, ta, |v| v.charge(Work::Copy(1000)));
    post(&mut net, &a, write(1, &a, 0, 8, &b, 0)).unwrap();
    net.run();
    poll(&mut net, &a);
    let cpu = net.cpu(A, ta);
    let c = CpuCost::default();
    assert_eq!(cpu.by_layer.get("builder"), Some(&c.ps(Work::WrBuilt(2))));
    assert_eq!(cpu.by_layer.get("app"), Some(&c.ps(Work::Copy(1000))));
    assert_eq!(
        cpu.by_layer.get("verbs"),
        Some(&(4 * c.ps(Work::Control) + c.ps(Work::Post) + c.ps(Work::Poll(1))))
    );
    assert_eq!((cpu.posts, cpu.polls), (1, 1));
    assert_eq!(cpu.total_ps, cpu.by_layer.values().sum::<u64>());
    assert!(net
        .calls_of(A, ta)
        .contains(&Call::Charge("builder", Work::WrBuilt(2))));
    assert_eq!(net.cpu(B, tb).by_layer.get("builder"), None);
}

#[test]
fn cpu_delay_moves_the_tenants_clock() {
    let cfg = NetConfig {
        cpu_delay: true,
        ..NetConfig::default()
    };
    let mut net = FakeNet::with_config(2, cfg);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let t0 = net.now();
    let after = net.call_as(A, ta, |v| {
        v.charge(Work::Ns(500));
        v.now()
    });
    assert_eq!(after, t0 + 500_000);
}

/// A factory that adds one agent per host and a per-tenant layer.
struct Mech;

struct Shared(u32);

impl MiddlewareFactory for Mech {
    fn name(&self) -> &'static str {
        "mech"
    }
    fn build(
        &self,
        host: &mut HostCtx,
        tenant: TenantId,
    ) -> Result<Box<dyn Middleware>, BuildError> {
        if !host.caps().cross_channel {
            return Err(BuildError::missing_cap("cross-channel", "mech"));
        }
        let (s, first) = host.shared(|| Shared(0));
        s.borrow_mut().0 += 1;
        if first {
            host.add_agent(Box::new(Waker { who: 1, token: 1 }));
        }
        let _ = tenant;
        Ok(Box::new(Raw))
    }
}

#[test]
fn factories_build_layers_and_one_agent_per_host() {
    let mut net = FakeNet::new(1);
    net.add_tenant_with(A, Box::new(Idle), &[&Mech]).unwrap();
    net.add_tenant_with(A, Box::new(Idle), &[&Mech, &Mech])
        .unwrap();
    net.run();
    assert_eq!(
        net.calls_of(A, AGENT)
            .into_iter()
            .filter(|c| matches!(c, Call::Wake(..)))
            .count(),
        1
    );
    let mut net = FakeNet::new(1);
    let mut caps = FakeNet::default_caps(A);
    caps.cross_channel = false;
    net.set_caps(A, caps);
    assert!(net.add_tenant_with(A, Box::new(Idle), &[&Mech]).is_err());
}

// ------------------------------------------------------------------------------ time, order

#[test]
fn timing_follows_latency_and_line_rate_and_completions_keep_order() {
    let (mut net, a, b) = pair();
    let t0 = net.now();
    // 12_500 bytes at 100 Gbit/s = 1 µs on the wire, then 2 µs there and 2 µs back.
    post(&mut net, &a, write(1, &a, 0, 12_500, &b, 0)).unwrap();
    post(&mut net, &a, write(2, &a, 0, 8, &b, 0)).unwrap();
    net.call_as(A, a.tenant, |v| v.req_notify_cq(a.cq)).unwrap();
    net.run();
    let first = net
        .deliveries()
        .iter()
        .find(|d| d.event == Some(Event::Completion(a.cq)))
        .unwrap();
    assert_eq!(first.at - t0, 1_000_000 + 4_000_000);
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

#[test]
fn timers_come_back_to_the_layer_that_set_them() {
    struct Ticker {
        fired: Rc<RefCell<Vec<u64>>>,
    }
    impl Middleware for Ticker {
        fn name(&self) -> &'static str {
            "ticker"
        }
        fn start(&mut self, below: &mut dyn Verbs) {
            let t = below.now() + 1000;
            below.set_timer(t, 42);
        }
        fn on_event(&mut self, below: &mut dyn Verbs, e: Event, up: &mut Vec<Event>) {
            match e {
                Event::Timer(t) => self.fired.borrow_mut().push(below.now() * 1000 + t),
                e => up.push(e),
            }
        }
    }
    let fired = Rc::new(RefCell::new(Vec::new()));
    let app_events = Rc::new(RefCell::new(Vec::new()));
    let ev = app_events.clone();
    let mut net = FakeNet::new(1);
    net.add_tenant(
        A,
        Box::new(FnApp {
            start: |v: &mut dyn Verbs| v.set_timer(500, 7),
            event: move |_: &mut dyn Verbs, e: Event| ev.borrow_mut().push(e),
        }),
        vec![Box::new(Ticker {
            fired: fired.clone(),
        })],
    );
    net.run();
    assert_eq!(*fired.borrow(), vec![1000 * 1000 + 42]);
    assert_eq!(*app_events.borrow(), vec![Event::Timer(7)]);
    assert_eq!(net.now(), 1000);
}

/// A ping-pong over SEND/RECV with armed CQs and a timer: the script of the determinism test.
fn ping_pong_net() -> FakeNet {
    let board = crate::rendezvous::board();
    let mut net = FakeNet::new(2);
    for (host, side) in [
        (A, crate::rendezvous::Side::Client),
        (B, crate::rendezvous::Side::Server),
    ] {
        let board = board.clone();
        let st = Rc::new(RefCell::new((0u32, 0u32, 0u32, 0u64))); // cq, qp, lkey, count
        let st2 = st.clone();
        let board2 = board.clone();
        let app = FnApp {
            start: move |v: &mut dyn Verbs| {
                let cq = v.create_cq(32).unwrap();
                let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
                let mr = v.reg_mr(BUF, 4096, Access::ALL.tracked()).unwrap();
                for i in 0..4 {
                    v.post_recv(
                        qp,
                        RecvWr {
                            wr_id: 1000 + i,
                            sg_list: vec![Sge {
                                addr: BUF + 64 * i,
                                length: 64,
                                lkey: mr.lkey,
                            }],
                        },
                    )
                    .unwrap();
                }
                v.req_notify_cq(cq).unwrap();
                board.borrow_mut().publish(
                    1,
                    side,
                    crate::rendezvous::Endpoint {
                        host: v.local_host(),
                        qpn: qp,
                        addr: BUF,
                        rkey: mr.rkey,
                    },
                );
                *st.borrow_mut() = (cq, qp, mr.lkey, 0);
                v.set_timer(v.now() + 10_000, 1);
            },
            event: move |v: &mut dyn Verbs, e: Event| {
                let (cq, qp, lkey, _) = *st2.borrow();
                match e {
                    Event::Timer(1) => {
                        crate::rendezvous::connect_all(v, &board2, 1, side, &[qp]).unwrap();
                        if side == crate::rendezvous::Side::Client {
                            v.write_local(BUF + 2048, b"ping").unwrap();
                            v.post_send(
                                qp,
                                SendWr::new(
                                    1,
                                    SendOp::Send,
                                    vec![Sge {
                                        addr: BUF + 2048,
                                        length: 4,
                                        lkey,
                                    }],
                                ),
                            )
                            .unwrap();
                        }
                    }
                    Event::Completion(c) if c == cq => {
                        let mut wcs = Vec::new();
                        v.poll_cq(cq, 16, &mut wcs);
                        v.req_notify_cq(cq).unwrap();
                        v.poll_cq(cq, 16, &mut wcs);
                        for w in wcs {
                            if w.opcode == WcOpcode::Recv && st2.borrow().3 < 3 {
                                st2.borrow_mut().3 += 1;
                                v.post_recv(
                                    qp,
                                    RecvWr {
                                        wr_id: w.wr_id,
                                        sg_list: vec![Sge {
                                            addr: BUF + 64 * (w.wr_id - 1000),
                                            length: 64,
                                            lkey,
                                        }],
                                    },
                                )
                                .unwrap();
                                v.post_send(
                                    qp,
                                    SendWr::new(
                                        2,
                                        SendOp::Send,
                                        vec![Sge {
                                            addr: BUF + 2048,
                                            length: 4,
                                            lkey,
                                        }],
                                    ),
                                )
                                .unwrap();
                            }
                        }
                    }
                    _ => {}
                }
            },
        };
        net.add_tenant(host, Box::new(app), vec![Box::new(Raw)]);
    }
    net
}

#[test]
fn the_same_script_twice_gives_the_same_log() {
    let mut one = ping_pong_net();
    let mut two = ping_pong_net();
    assert_eq!(one.run(), Stop::Idle);
    assert_eq!(two.run(), Stop::Idle);
    assert!(one.calls().len() > 30, "the script did something");
    assert_eq!(one.calls(), two.calls());
    assert_eq!(one.deliveries(), two.deliveries());
    assert_eq!(one.now(), two.now());
    // And the bytes moved.
    assert_eq!(one.nic(B).read_mem(1, BUF, 4), b"ping");
}

#[test]
fn memory_contents_are_tracked_only_where_asked() {
    let (mut net, a, _) = pair();
    let plain = net
        .call_as(A, a.tenant, |v| v.reg_mr(0x900_000, 64, Access::ALL))
        .unwrap();
    let r = net.call_as(A, a.tenant, |v| v.write_local(plain.addr, b"x"));
    assert!(matches!(r, Err(VerbsError::Unsupported(_))));
    net.call_as(A, a.tenant, |v| v.write_local(BUF, b"x"))
        .unwrap();
    assert_eq!(
        net.call_as(A, a.tenant, |v| v.read_local(BUF, 1)).unwrap(),
        b"x"
    );
    let mut net = FakeNet::new(1);
    let mut caps = FakeNet::default_caps(A);
    caps.data_tracking = false;
    net.set_caps(A, caps);
    let t = net.add_tenant(A, Box::new(Idle), vec![]);
    assert!(matches!(
        net.call_as(A, t, |v| v.reg_mr(BUF, 64, Access::ALL.tracked())),
        Err(VerbsError::Unsupported(_))
    ));
}

#[test]
fn a_post_list_is_one_doorbell_and_stops_at_the_first_bad_wr() {
    let (mut net, a, b) = pair();
    net.write_mem(A, a.tenant, BUF, b"abcdefghijkl");
    let c = CpuCost::default();
    let before = net.cpu(A, a.tenant).clone();
    let mut bad = write(3, &a, 8, 4, &b, 8);
    bad.sg_list[0].lkey = 0xdead;
    let list = vec![
        write(1, &a, 0, 4, &b, 0),
        write(2, &a, 4, 4, &b, 4),
        bad,
        write(4, &a, 8, 4, &b, 8),
    ];
    let r = net.call_as(A, a.tenant, |v| v.post_send_list(a.qp, list));
    assert_eq!(
        r,
        Err(BadWr {
            index: 2,
            error: VerbsError::BadKey(0xdead)
        })
    );
    net.run();
    // The WRs before the bad one were posted and complete; it and the one after it were not.
    assert_eq!(
        statuses(&poll(&mut net, &a)),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(net.nic(B).read_mem(b.tenant, BUF, 12), b"abcdefgh\0\0\0\0");
    // One call: one post, charged as one doorbell and four WQEs.
    let cpu = net.cpu(A, a.tenant);
    assert_eq!(cpu.posts - before.posts, 1);
    let verbs = cpu.by_layer["verbs"] - before.by_layer["verbs"];
    assert_eq!(verbs, c.ps(Work::PostList(4)) + c.ps(Work::Poll(2)));
    assert!(c.ps(Work::PostList(4)) < 4 * c.ps(Work::Post));
    assert!(net
        .calls_of(A, a.tenant)
        .iter()
        .any(|c| matches!(c, Call::PostSendList(q, ws) if *q == a.qp && ws.len() == 4)));
    // An empty list posts nothing and costs nothing; a list on a QP that is not connected
    // fails at its first WR.
    assert_eq!(
        net.call_as(A, a.tenant, |v| v.post_send_list(a.qp, vec![])),
        Ok(())
    );
    let c2 = net.call_as(A, a.tenant, |v| {
        let cq = v.create_cq(8).unwrap();
        v.create_qp(&QpInit::rc(cq)).unwrap()
    });
    let r = net.call_as(A, a.tenant, |v| {
        v.post_send_list(c2, vec![write(5, &a, 0, 4, &b, 0)])
    });
    assert!(matches!(
        r,
        Err(BadWr {
            index: 0,
            error: VerbsError::InvalidState(_)
        })
    ));
}

#[test]
fn a_post_list_reaches_the_nic_when_the_whole_list_is_built() {
    // With CPU delay, the doorbell rings after every WQE of the list is written: all of them
    // are handed to the NIC at once, at the end of the list's cost.
    let cfg = NetConfig {
        cpu_delay: true,
        ..NetConfig::default()
    };
    let mut net = FakeNet::with_config(2, cfg);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, &|cq| QpInit::rc(cq));
    let b = make_end(&mut net, B, tb, &|cq| QpInit::rc(cq));
    connect(&mut net, &a, &b);
    let (t0, t1) = net.call_as(A, ta, |v| {
        let t0 = v.now();
        v.post_send_list(
            a.qp,
            vec![write(1, &a, 0, 4, &b, 0), write(2, &a, 4, 4, &b, 4)],
        )
        .unwrap();
        (t0, v.now())
    });
    assert_eq!(t1 - t0, CpuCost::default().ps(Work::PostList(2)));
}

#[test]
fn host_memory_makes_a_hosts_tenants_share_their_bytes() {
    for shared in [false, true] {
        let mut net = FakeNet::with_config(
            1,
            NetConfig {
                host_memory: shared,
                ..NetConfig::default()
            },
        );
        let a = net.add_tenant(1, Box::new(Idle), vec![]);
        let b = net.add_tenant(1, Box::new(Idle), vec![]);
        net.call_as(1, a, |v| {
            v.reg_mr(0x1000, 64, Access::LOCAL.tracked())?;
            v.write_local(0x1010, b"abc")
        })
        .unwrap();
        let got = net
            .call_as(1, b, |v| {
                // Reading needs a tracked region of its own over the range, either way.
                assert!(v.read_local(0x1010, 3).is_err());
                v.reg_mr(0x1000, 64, Access::LOCAL.tracked())?;
                v.read_local(0x1010, 3)
            })
            .unwrap();
        let want: &[u8] = if shared { b"abc" } else { &[0, 0, 0] };
        assert_eq!(got, want, "host_memory = {shared}");
    }
}

/// `max_rd_atomic` bounds the READs a requester has outstanding: with 2, six READs posted at
/// once complete two per round trip (2 x 2 us latency), never more.
#[test]
fn reads_beyond_max_rd_atomic_wait_for_one_to_complete() {
    let (mut net, a, b) = pair_with(&|cq| QpInit {
        max_rd_atomic: 2,
        ..QpInit::rc(cq)
    });
    for i in 0..6u64 {
        let mut wr = SendWr::new(i, SendOp::Read, vec![a.sge(i * 8, 8)]);
        wr.remote_addr = BUF + i * 8;
        wr.rkey = b.mr.rkey;
        post(&mut net, &a, wr).unwrap();
    }
    let rtt = 2 * net.config().latency_ps;
    let t0 = net.now();
    let mut done = Vec::new();
    for round in 1..=3u64 {
        net.run_until(t0 + round * rtt + rtt / 4);
        done.extend(poll(&mut net, &a));
        assert_eq!(done.len() as u64, 2 * round, "after {round} round trips");
    }
    net.run();
    assert!(done.iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(
        done.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        (0..6).collect::<Vec<_>>()
    );
}

#[test]
fn max_rd_atomic_zero_is_refused() {
    let mut net = FakeNet::new(2);
    let t = net.add_tenant(A, Box::new(Idle), vec![]);
    let r = net.call_as(A, t, |v| {
        let cq = v.create_cq(4).unwrap();
        v.create_qp(&QpInit {
            max_rd_atomic: 0,
            ..QpInit::rc(cq)
        })
    });
    assert!(matches!(r, Err(VerbsError::InvalidArgument(_))), "{r:?}");
}

#[test]
fn a_requester_exceeding_the_responders_read_resources_gets_invalid_request() {
    // A keeps 4 READs outstanding, B serves 1 at a time: a requester that exceeds its
    // responder's resources breaks IBA's rule, and the responder NAKs (Invalid Request).
    let mut net = FakeNet::new(2);
    let ta = net.add_tenant(A, Box::new(Idle), vec![]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let a = make_end(&mut net, A, ta, &|cq| QpInit {
        max_rd_atomic: 4,
        ..QpInit::rc(cq)
    });
    let b = make_end(&mut net, B, tb, &|cq| QpInit {
        max_dest_rd_atomic: 1,
        ..QpInit::rc(cq)
    });
    connect(&mut net, &a, &b);
    for i in 0..2u64 {
        let mut wr = SendWr::new(i, SendOp::Read, vec![a.sge(i * 4096, 4096)]);
        wr.remote_addr = BUF + i * 4096;
        wr.rkey = b.mr.rkey;
        post(&mut net, &a, wr).unwrap();
    }
    net.run();
    let wcs = poll(&mut net, &a);
    assert_eq!(wcs[0].status, WcStatus::Success, "the first READ is served");
    assert_eq!(wcs[1].status, WcStatus::RemoteInvalidRequest, "{wcs:?}");
    assert_eq!(state(&net, &b), QpState::Error);
    // Within the responder's resources, the same pair carries them all.
    let (mut net, a, b) = pair_with(&|cq| QpInit {
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        ..QpInit::rc(cq)
    });
    for i in 0..4u64 {
        let mut wr = SendWr::new(i, SendOp::Read, vec![a.sge(i * 4096, 4096)]);
        wr.remote_addr = BUF + i * 4096;
        wr.rkey = b.mr.rkey;
        post(&mut net, &a, wr).unwrap();
    }
    net.run();
    let wcs = poll(&mut net, &a);
    assert_eq!(wcs.len(), 4);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
}
