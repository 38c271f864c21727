//! The large-READ conversion over the fake NIC: bytes tracked, completions in send-queue order,
//! a refused READ, a peer without PeRF.

use super::*;
use braid_verbs::testing::FakeNet;
use braid_verbs::*;

const LEN: u64 = 4 << 20;
/// 1 ms: long enough for the agents to link up and for every transfer here.
const SETTLE: u64 = 1_000_000_000;

struct Net {
    net: FakeNet,
    /// Requester tenant on host 1, holder tenant on host 2, a small tenant on host 2.
    a: TenantId,
    h: TenantId,
    d: TenantId,
    acq: CqId,
    aqp: QpNum,
    amr: MemoryRegion,
    hqp: QpNum,
    hmr: MemoryRegion,
    dqp: QpNum,
    dmr: MemoryRegion,
    data: Vec<u8>,
    /// The attacker's host and tenant, if any.
    eve: Option<(u32, TenantId)>,
}

/// Host 1's tenant `a` and host 2's tenant `h` connected; `holder_perf`: host 2 runs PeRF.
/// The holder's region holds a pattern; the requester's is registered for local write only,
/// as a READ destination needs.
fn setup(holder_perf: bool, cfg: &PerfConfig) -> Net {
    setup_hosts(2, holder_perf, cfg, None)
}

/// [`setup`] on a network of `hosts` hosts, with an attacker tenant (running PeRF) on
/// `attacker` if given (tenants join before the network first runs).
fn setup_hosts(hosts: u32, holder_perf: bool, cfg: &PerfConfig, attacker: Option<u32>) -> Net {
    let mut net = FakeNet::new(hosts);
    let eve = attacker.map(|host| {
        (
            host,
            net.add_tenant_with(host, Box::new(Idle), &[cfg]).unwrap(),
        )
    });
    // An attacker on a third host has an accomplice tenant on the holder's host whose QP
    // names it, so that the two hosts' agents link up and the request reaches the holder.
    let accomplice = attacker
        .filter(|&h| h > 2)
        .map(|h| (h, net.add_tenant_with(2, Box::new(Idle), &[cfg]).unwrap()));
    let a = net.add_tenant_with(1, Box::new(Idle), &[cfg]).unwrap();
    let (h, d) = if holder_perf {
        (
            net.add_tenant_with(2, Box::new(Idle), &[cfg]).unwrap(),
            net.add_tenant_with(2, Box::new(Idle), &[cfg]).unwrap(),
        )
    } else {
        (
            net.add_tenant(2, Box::new(Idle), vec![]),
            net.add_tenant(2, Box::new(Idle), vec![]),
        )
    };
    let end = |access: Access| {
        move |v: &mut dyn Verbs| {
            let cq = v.create_cq(4096).unwrap();
            let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
            let mr = v.reg_mr(0x100_0000, LEN, access).unwrap();
            (cq, qp, mr)
        }
    };
    let (acq, aqp, amr) = net.call_as(1, a, end(Access::LOCAL.tracked()));
    let (_, hqp, hmr) = net.call_as(2, h, end(Access::ALL.tracked()));
    let (_, dqp, dmr) = net.call_as(2, d, end(Access::ALL.tracked()));
    // The small tenant's peer on host 1 (a second QP of `a`, never used for READs).
    let aqp2 = net.call_as(1, a, |v| v.create_qp(&QpInit::rc(acq)).unwrap());
    let remote = |host, qpn| RemoteQp {
        host,
        qpn,
        udp_sport: None,
    };
    net.call_as(1, a, |v| v.connect_qp(aqp, remote(2, hqp)))
        .unwrap();
    net.call_as(2, h, |v| v.connect_qp(hqp, remote(1, aqp)))
        .unwrap();
    net.call_as(1, a, |v| v.connect_qp(aqp2, remote(2, dqp)))
        .unwrap();
    net.call_as(2, d, |v| v.connect_qp(dqp, remote(1, aqp2)))
        .unwrap();
    if let Some((eh, m)) = accomplice {
        net.call_as(2, m, |v| {
            let cq = v.create_cq(16).unwrap();
            let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
            v.connect_qp(qp, remote(eh, 0x7777))
        })
        .unwrap();
    }
    let data: Vec<u8> = (0..LEN).map(|i| (i * 131 % 251) as u8).collect();
    net.call_as(2, h, |v| v.write_local(hmr.addr, &data))
        .unwrap();
    // The agents find each other on the board.
    net.run_until(SETTLE);
    Net {
        net,
        a,
        h,
        d,
        acq,
        aqp,
        amr,
        hqp,
        hmr,
        dqp,
        dmr,
        data,
        eve,
    }
}

fn read(n: &Net, wr_id: u64, off: u64, len: u32) -> SendWr {
    let mut w = SendWr::new(
        wr_id,
        SendOp::Read,
        vec![Sge {
            addr: n.amr.addr + off,
            length: len,
            lkey: n.amr.lkey,
        }],
    );
    w.remote_addr = n.hmr.addr + off;
    w.rkey = n.hmr.rkey;
    w
}

fn poll(n: &mut Net) -> Vec<WorkCompletion> {
    let (a, cq) = (n.a, n.acq);
    let mut out = Vec::new();
    n.net
        .call_as(1, a, |v| while v.poll_cq(cq, 64, &mut out) > 0 {});
    out
}

fn counter(net: &FakeNet, host: u32, t: TenantId, k: &str) -> f64 {
    net.counters(host, t)
        .iter()
        .find(|x| x.1 == k)
        .unwrap_or_else(|| panic!("no counter {k}"))
        .2
}

/// A converted READ places exactly the holder's bytes, completes once (opcode Read, its
/// wr_id and length), and the holder served it with WRITEs on its end of the connection.
#[test]
fn a_converted_read_places_every_byte_and_completes_once() {
    let mut n = setup(true, &PerfConfig::default());
    let t = n.net.now();
    let (a, aqp) = (n.a, n.aqp);
    let wrs = [read(&n, 7, 0, 1 << 20), read(&n, 8, 1 << 20, 3000)];
    for w in wrs {
        n.net.call_as(1, a, |v| v.post_send(aqp, w)).unwrap();
    }
    n.net.run_until(t + SETTLE);
    let wcs = poll(&mut n);
    let got: Vec<_> = wcs
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len))
        .collect();
    assert_eq!(
        got,
        vec![
            (7, WcStatus::Success, WcOpcode::Read, 1 << 20),
            (8, WcStatus::Success, WcOpcode::Read, 3000)
        ]
    );
    let placed = n.net.nic(1).read_mem(a, n.amr.addr, (1 << 20) + 3000);
    assert!(placed == n.data[..(1 << 20) + 3000], "bytes differ");
    assert_eq!(counter(&n.net, 1, a, "reads_converted"), 2.0);
    assert_eq!(counter(&n.net, 2, n.h, "reads_served"), 2.0);
    // No READ reached host 1's NIC: the holder WROTE the data.
    let reads = n
        .net
        .calls_of(1, a)
        .iter()
        .filter(|c| matches!(c, testing::Call::PostSend(_, wr) if wr.op == SendOp::Read))
        .count();
    assert_eq!(reads, 0);
}

/// A READ's completion does not overtake the WRs posted before it, and later WRs' completions
/// wait behind it (one send queue completes in order).
#[test]
fn a_converted_read_completes_in_send_queue_order() {
    let mut n = setup(true, &PerfConfig::default());
    let t = n.net.now();
    let (a, aqp) = (n.a, n.aqp);
    // A 2 MiB WRITE (signaled), the READ, a small WRITE (signaled) behind it.
    let wmr = n
        .net
        .call_as(1, a, |v| {
            v.reg_mr(0x900_0000, 2 << 20, Access::ALL.tracked())
        })
        .unwrap();
    let write = |id: u64, len: u32| {
        let mut w = SendWr::new(
            id,
            SendOp::Write,
            vec![Sge {
                addr: wmr.addr,
                length: len,
                lkey: wmr.lkey,
            }],
        );
        w.remote_addr = n.hmr.addr + (2 << 20);
        w.rkey = n.hmr.rkey;
        w
    };
    let wrs = [write(1, 2 << 20), read(&n, 2, 0, 256 << 10), write(3, 64)];
    for w in wrs {
        n.net.call_as(1, a, |v| v.post_send(aqp, w)).unwrap();
    }
    n.net.run_until(t + SETTLE);
    let wcs = poll(&mut n);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.opcode, w.status)).collect();
    assert_eq!(
        got,
        vec![
            (1, WcOpcode::Write, WcStatus::Success),
            (2, WcOpcode::Read, WcStatus::Success),
            (3, WcOpcode::Write, WcStatus::Success)
        ]
    );
    assert!(n.net.nic(1).read_mem(a, n.amr.addr, 256 << 10) == n.data[..256 << 10]);
}

/// A bad remote key gives the application a RemoteAccessError for the READ and the QP goes to
/// Error (what follows is flushed), as a real READ; no byte is placed.
#[test]
fn a_bad_rkey_fails_the_read_and_the_qp() {
    let mut n = setup(true, &PerfConfig::default());
    let t = n.net.now();
    let (a, aqp) = (n.a, n.aqp);
    let mut bad = read(&n, 5, 0, 64 << 10);
    bad.rkey ^= 0x55;
    let mut out_of_range = read(&n, 6, 0, 64 << 10);
    out_of_range.remote_addr = n.hmr.addr + LEN - 1024;
    n.net.call_as(1, a, |v| v.post_send(aqp, bad)).unwrap();
    n.net
        .call_as(1, a, |v| v.post_send(aqp, out_of_range))
        .unwrap();
    n.net.run_until(t + SETTLE);
    let wcs = poll(&mut n);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        vec![(5, WcStatus::RemoteAccessError), (6, WcStatus::Flushed)]
    );
    assert_eq!(wcs[0].opcode, WcOpcode::Read);
    let st = n.net.nic(1).qp_attr(aqp).unwrap().state;
    assert_eq!(st, QpState::Error);
    assert!(n
        .net
        .nic(1)
        .read_mem(a, n.amr.addr, 64 << 10)
        .iter()
        .all(|&b| b == 0));
    assert_eq!(counter(&n.net, 2, 0, "reads_refused"), 2.0);
    // The holder's QP is untouched.
    let hst = n.net.nic(2).qp_attr(n.hqp).unwrap().state;
    assert_ne!(hst, QpState::Error);
}

/// A holder without PeRF: no agent answers on the board, the READ stays a READ (sub-READs
/// while a small tenant is active) and its bytes arrive as before.
#[test]
fn a_peer_without_perf_gets_ordinary_reads() {
    let mut n = setup(false, &PerfConfig::default());
    let t = n.net.now();
    let (a, aqp) = (n.a, n.aqp);
    let w = read(&n, 9, 0, 1 << 20);
    n.net.call_as(1, a, |v| v.post_send(aqp, w)).unwrap();
    n.net.run_until(t + SETTLE);
    let wcs = poll(&mut n);
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect::<Vec<_>>(),
        vec![(9, WcStatus::Success, 1 << 20)]
    );
    // Without PeRF on host 2 nothing wrote the pattern there: compare with what host 2 holds.
    let h = n.net.nic(2).read_mem(n.h, n.hmr.addr, 1 << 20);
    assert!(n.net.nic(1).read_mem(a, n.amr.addr, 1 << 20) == h);
    assert!(h == n.data[..1 << 20]);
    assert_eq!(counter(&n.net, 1, a, "reads_converted"), 0.0);
    assert_eq!(counter(&n.net, 1, 0, "read_links"), 0.0);
}

/// With `read_convert = false` the READ goes down as a READ even to a PeRF holder.
#[test]
fn read_convert_off_keeps_reads() {
    let cfg = PerfConfig {
        read_convert: false,
        ..PerfConfig::default()
    };
    let mut n = setup(true, &cfg);
    let t = n.net.now();
    let (a, aqp) = (n.a, n.aqp);
    let w = read(&n, 9, 0, 1 << 20);
    n.net.call_as(1, a, |v| v.post_send(aqp, w)).unwrap();
    n.net.run_until(t + SETTLE);
    let wcs = poll(&mut n);
    assert_eq!(wcs.len(), 1);
    assert_eq!(wcs[0].status, WcStatus::Success);
    assert_eq!(counter(&n.net, 1, a, "reads_converted"), 0.0);
    assert!(n.net.nic(1).read_mem(a, n.amr.addr, 1 << 20) == n.data[..1 << 20]);
}

/// The holder's preemption applies to the READ's data: beside an active small tenant on the
/// holder's host, the serving WRITE is cut into sub-WRs followed by 0_WAITs there.
#[test]
fn the_holder_cuts_the_served_data_beside_a_small_tenant() {
    let mut n = setup(true, &PerfConfig::default());
    let (a, aqp, d, dqp, dmr) = (n.a, n.aqp, n.d, n.dqp, n.dmr);
    // The small tenant on host 2 is active: any post makes it so (a zero-length WRITE checks
    // no key).
    let small = SendWr::new(
        1,
        SendOp::Write,
        vec![Sge {
            addr: dmr.addr,
            length: 0,
            lkey: dmr.lkey,
        }],
    );
    n.net.call_as(2, d, |v| v.post_send(dqp, small)).unwrap();
    let t = n.net.now();
    let w = read(&n, 4, 0, 1 << 20);
    n.net.call_as(1, a, |v| v.post_send(aqp, w)).unwrap();
    n.net.run_until(t + SETTLE);
    let wcs = poll(&mut n);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(4, WcStatus::Success)]
    );
    assert!(n.net.nic(1).read_mem(a, n.amr.addr, 1 << 20) == n.data[..1 << 20]);
    assert_eq!(
        counter(&n.net, 2, n.h, "sub_wrs"),
        64.0,
        "1 MiB in 16 KiB sub-WRs"
    );
    assert!(counter(&n.net, 2, n.h, "zero_waits") >= 63.0 * 16.0);
    assert_eq!(counter(&n.net, 2, n.h, "class"), 2.0, "bandwidth-intensive");
}

/// The READ's completion implies the WRITE posted before it (unsignaled) is placed: polled
/// step by step, the READ completes only once the WRITE's bytes are all at the holder.
#[test]
fn a_converted_read_does_not_overtake_an_earlier_unsignaled_write() {
    let mut n = setup(true, &PerfConfig::default());
    let (a, aqp) = (n.a, n.aqp);
    let wmr = n
        .net
        .call_as(1, a, |v| {
            v.reg_mr(0x900_0000, 2 << 20, Access::ALL.tracked())
        })
        .unwrap();
    let pattern: Vec<u8> = (0..2u64 << 20).map(|i| (i % 7 + 1) as u8).collect();
    n.net
        .call_as(1, a, |v| v.write_local(wmr.addr, &pattern))
        .unwrap();
    let mut w = SendWr::new(
        1,
        SendOp::Write,
        vec![Sge {
            addr: wmr.addr,
            length: 2 << 20,
            lkey: wmr.lkey,
        }],
    );
    w.remote_addr = n.hmr.addr + (2 << 20);
    w.rkey = n.hmr.rkey;
    w.signaled = false;
    let r = read(&n, 2, 0, 4096);
    // The WRITE is lost once and retransmitted after the RC timeout: the request (on the
    // agents' link) and the holder's data overtake it on the wire.
    n.net.lose_packets(1, aqp, 1);
    n.net.call_as(1, a, |v| v.post_send(aqp, w)).unwrap();
    n.net.call_as(1, a, |v| v.post_send(aqp, r)).unwrap();
    let t0 = n.net.now();
    let mut seen = Vec::new();
    for step in 1..=20_000u64 {
        n.net.run_until(t0 + step * 1_000_000);
        seen = poll(&mut n);
        if !seen.is_empty() {
            break;
        }
    }
    assert_eq!(
        seen.iter().map(|w| (w.wr_id, w.opcode)).collect::<Vec<_>>(),
        vec![(2, WcOpcode::Read)]
    );
    let at_holder = n.net.nic(2).read_mem(n.h, n.hmr.addr + (2 << 20), 2 << 20);
    assert!(
        at_holder == pattern,
        "the READ completed before the WRITE was placed"
    );
}

/// The holder's host dies: the request cannot be delivered on the agents' link, and the READ
/// fails as a real one whose transport gave up (RetryExceeded, the QP in Error) instead of
/// waiting for ever.
#[test]
fn a_dead_holder_fails_the_read_with_retry_exceeded() {
    let mut n = setup(true, &PerfConfig::default());
    let (a, aqp) = (n.a, n.aqp);
    n.net.kill_host(2);
    let t = n.net.now();
    let w = read(&n, 3, 0, 64 << 10);
    n.net.call_as(1, a, |v| v.post_send(aqp, w)).unwrap();
    n.net.run_until(t + 100 * SETTLE);
    let wcs = poll(&mut n);
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        vec![(3, WcStatus::RetryExceeded, WcOpcode::Read)]
    );
    assert_eq!(n.net.nic(1).qp_attr(aqp).unwrap().state, QpState::Error);
    assert_eq!(counter(&n.net, 1, a, "reads_converted"), 1.0);
}

/// How many of the layer's registrations over `[addr, addr + len)` are still in place.
fn dest_regs_live(
    net: &FakeNet,
    host: u32,
    t: TenantId,
    app: &MemoryRegion,
    addr: u64,
    len: u64,
) -> i64 {
    let calls = net.calls_of(host, t);
    let regs = calls
        .iter()
        .filter(|c| **c == testing::Call::RegMr(addr, len))
        .count() as i64;
    // The application's own region is registered once and kept.
    let app_reg = (app.addr == addr && app.len == len) as i64;
    let deregs = calls
        .iter()
        .filter(|c| matches!(c, testing::Call::DeregMr(k) if *k != app.lkey))
        .count() as i64;
    regs - app_reg - deregs
}

/// The holder received the request, then died before answering: nothing fails on the agents'
/// link (the request was delivered), so only the requester's own timer ends the READ. It
/// completes RetryExceeded after (retry_cnt + 1) timeouts (plus the data's wire time), not
/// before, and the QP goes to Error; its destination region is deregistered.
#[test]
fn a_holder_that_stops_answering_times_the_read_out() {
    let cfg = PerfConfig {
        read_timeout: braid_units::Duration(2_000_000_000), // 2 ms
        ..PerfConfig::default()
    };
    let mut n = setup(true, &cfg);
    let (a, h, aqp) = (n.a, n.h, n.aqp);
    let len = 4u32 << 20;
    let w = read(&n, 5, 0, len);
    let t0 = n.net.now();
    n.net.call_as(1, a, |v| v.post_send(aqp, w)).unwrap();
    // Run until the holder's layer took the request, then kill the holder.
    let mut steps = 0;
    while counter(&n.net, 2, h, "reads_served") < 1.0 {
        assert!(n.net.step(), "the request never reached the holder");
        steps += 1;
        assert!(steps < 1_000_000);
    }
    n.net.kill_host(2);
    assert_eq!(
        dest_regs_live(&n.net, 1, a, &n.amr, n.amr.addr, len as u64),
        1
    );
    // QpInit::rc's retry_cnt is 7: 8 x 2 ms, plus 4 MiB at the fake NIC's line rate.
    let rate = n.net.caps(1).line_rate_bps as u128;
    let wire = (len as u128 * 8 * 1_000_000_000_000 / rate) as u64;
    let deadline = t0 + 8 * 2_000_000_000 + wire;
    n.net.run_until(deadline - 1_000_000);
    assert!(
        poll(&mut n).is_empty(),
        "gave up before its transport would"
    );
    n.net.run_until(deadline + SETTLE);
    let wcs = poll(&mut n);
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        vec![(5, WcStatus::RetryExceeded, WcOpcode::Read)]
    );
    assert_eq!(n.net.nic(1).qp_attr(aqp).unwrap().state, QpState::Error);
    assert_eq!(counter(&n.net, 1, a, "read_timeouts"), 1.0);
    assert_eq!(
        dest_regs_live(&n.net, 1, a, &n.amr, n.amr.addr, len as u64),
        0
    );
    // Nothing more comes (no second completion for the same READ).
    n.net.run_until(deadline + 100 * SETTLE);
    assert!(poll(&mut n).is_empty());
}

/// Answered READs deregister their destination regions (one per range while in use), and a
/// read_timeout of zero is refused naming the key.
#[test]
fn answered_reads_deregister_their_destinations() {
    let mut n = setup(true, &PerfConfig::default());
    let (a, aqp) = (n.a, n.aqp);
    let t = n.net.now();
    // Two READs into the same range, one into another: two registrations at most.
    let wrs = [
        read(&n, 1, 0, 1 << 20),
        read(&n, 2, 0, 1 << 20),
        read(&n, 3, 1 << 20, 8192),
    ];
    for w in wrs {
        n.net.call_as(1, a, |v| v.post_send(aqp, w)).unwrap();
    }
    let live_while = dest_regs_live(&n.net, 1, a, &n.amr, n.amr.addr, 1 << 20)
        + dest_regs_live(&n.net, 1, a, &n.amr, n.amr.addr + (1 << 20), 8192);
    assert_eq!(live_while, 2);
    n.net.run_until(t + SETTLE);
    let wcs = poll(&mut n);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    let calls = n.net.calls_of(1, a);
    let deregs = calls
        .iter()
        .filter(|c| matches!(c, testing::Call::DeregMr(_)))
        .count();
    assert_eq!(deregs, 2);
    assert_eq!(counter(&n.net, 1, a, "read_timeouts"), 0.0);
    let bad = PerfConfig {
        read_timeout: braid_units::Duration(0),
        ..PerfConfig::default()
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("read_timeout"), "{e}");
}

/// An attacker tenant on `host` running PeRF, with a CQ, a QP connected to the victim holder's
/// QP number (`n.hqp` on host 2, which is connected to `a`'s QP, not to this one) and its own
/// local-write region as the READ's destination.
fn hijacker(n: &mut Net) -> (u32, TenantId, CqId, QpNum, MemoryRegion) {
    let (host, e) = n.eve.expect("an attacker");
    let hqp = n.hqp;
    let (cq, qp, mr) = n.net.call_as(host, e, |v| {
        let cq = v.create_cq(4096).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        let mr = v.reg_mr(0x100_0000, LEN, Access::LOCAL.tracked()).unwrap();
        v.connect_qp(
            qp,
            RemoteQp {
                host: 2,
                qpn: hqp,
                udp_sport: None,
            },
        )
        .unwrap();
        (cq, qp, mr)
    });
    (host, e, cq, qp, mr)
}

/// Runs the hijack: the attacker on `host` READs 64 KiB of the victim's region with the
/// victim's rkey, over its QP connected to the victim's QP number. Then the victim's QP must be
/// untouched (no WRITE posted on it, not in Error, its own READ still served), the victim's
/// bytes unchanged, the attacker's destination unchanged and the attacker told
/// RemoteAccessError (what ibverbs gives a READ the responder refuses).
fn hijack_is_refused(host: u32) {
    let mut n = setup_hosts(host.max(2), true, &PerfConfig::default(), Some(host));
    let (host, e, ecq, eqp, emr) = hijacker(&mut n);
    n.net.run_until(n.net.now() + SETTLE);
    let t = n.net.now();
    let mut w = SendWr::new(
        66,
        SendOp::Read,
        vec![Sge {
            addr: emr.addr,
            length: 64 << 10,
            lkey: emr.lkey,
        }],
    );
    w.remote_addr = n.hmr.addr;
    w.rkey = n.hmr.rkey;
    n.net.call_as(host, e, |v| v.post_send(eqp, w)).unwrap();
    n.net.run_until(t + SETTLE);
    let mut wcs = Vec::new();
    n.net
        .call_as(host, e, |v| while v.poll_cq(ecq, 64, &mut wcs) > 0 {});
    // (The READ went to the holder as a request, not to the NIC.)
    assert_eq!(counter(&n.net, host, e, "reads_converted"), 1.0);
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        vec![(66, WcStatus::RemoteAccessError, WcOpcode::Read)],
        "the attacker's READ must fail as a refused READ"
    );
    let (h, hqp) = (n.h, n.hqp);
    let writes_on_victim = n
        .net
        .calls_of(2, h)
        .iter()
        .filter(
            |c| matches!(c, testing::Call::PostSend(q, wr) if *q == hqp && wr.op == SendOp::Write),
        )
        .count();
    assert_eq!(
        writes_on_victim, 0,
        "the victim's QP posted for the attacker"
    );
    assert_eq!(counter(&n.net, 2, h, "reads_served"), 0.0);
    assert_ne!(n.net.nic(2).qp_attr(hqp).unwrap().state, QpState::Error);
    assert!(n
        .net
        .nic(host)
        .read_mem(e, emr.addr, 64 << 10)
        .iter()
        .all(|&b| b == 0));
    assert!(n.net.nic(2).read_mem(h, n.hmr.addr, LEN) == n.data);
    // The victim's own connection still works: its peer's READ is served.
    let t = n.net.now();
    let (a, aqp) = (n.a, n.aqp);
    let r = read(&n, 9, 0, 64 << 10);
    n.net.call_as(1, a, |v| v.post_send(aqp, r)).unwrap();
    n.net.run_until(t + SETTLE);
    let got: Vec<_> = poll(&mut n).iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, vec![(9, WcStatus::Success)]);
}

/// The review's audit (isolation.md §4 item 3, D3): a tenant on the victim's peer host names
/// the victim's QP number. The holder must not serve it: the request does not come from the
/// QP the victim's QP is connected to.
#[test]
fn a_tenant_naming_another_tenants_qp_gets_no_read_served() {
    hijack_is_refused(1);
}

/// The same from a third host, which the victim's QP is not connected to at all (an accomplice
/// on the holder's host makes the two agents link up, so the request does reach the holder).
#[test]
fn a_third_host_naming_a_tenants_qp_gets_no_read_served() {
    hijack_is_refused(3);
}

/// The requester side: a READ whose destination is not in one of the application's own
/// registrations (here an address its region does not cover, with its region's lkey) is not
/// converted, so the layer never registers memory the application does not own as remotely
/// writable; it goes to the NIC, which refuses the bad local SGE as it would for any READ.
#[test]
fn a_read_into_memory_the_app_does_not_own_is_not_converted() {
    let mut n = setup(true, &PerfConfig::default());
    let (a, aqp) = (n.a, n.aqp);
    let outside = 0x4000_0000u64;
    let mut w = read(&n, 11, 0, 64 << 10);
    w.sg_list[0].addr = outside;
    let r = n.net.call_as(1, a, |v| v.post_send(aqp, w));
    let t = n.net.now();
    n.net.run_until(t + SETTLE);
    let regs = n
        .net
        .calls_of(1, a)
        .iter()
        .filter(|c| matches!(c, testing::Call::RegMr(addr, _) if *addr == outside))
        .count();
    assert_eq!(regs, 0, "the layer registered memory the app does not own");
    assert_eq!(counter(&n.net, 1, a, "reads_converted"), 0.0);
    let wcs = poll(&mut n);
    assert!(
        r.is_err() || wcs.iter().all(|w| w.status != WcStatus::Success),
        "a READ into unowned memory succeeded: {r:?} {wcs:?}"
    );
    assert_eq!(counter(&n.net, 2, n.h, "reads_served"), 0.0);
}

/// Protection domains at the holder: a request naming the holder tenant's own key, but of a
/// region in another PD than the holder's QP, is refused (RemoteAccessError, as the NIC refuses
/// such a READ arriving on that QP) and the holder's QP posts nothing (a WRITE from a region of
/// another PD would fail on it and put it in Error).
#[test]
fn the_holder_serves_only_regions_of_its_qps_protection_domain() {
    let mut n = setup(true, &PerfConfig::default());
    let (h, hqp) = (n.h, n.hqp);
    let other = n.net.call_as(2, h, |v| {
        let pd = v.alloc_pd().unwrap();
        v.reg_mr_in(pd, 0x4000_0000, LEN, Access::ALL.tracked())
            .unwrap()
    });
    let t = n.net.now();
    let (a, aqp) = (n.a, n.aqp);
    let mut w = read(&n, 21, 0, 64 << 10);
    w.remote_addr = other.addr;
    w.rkey = other.rkey;
    n.net.call_as(1, a, |v| v.post_send(aqp, w)).unwrap();
    n.net.run_until(t + SETTLE);
    let got: Vec<_> = poll(&mut n)
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode))
        .collect();
    assert_eq!(got, vec![(21, WcStatus::RemoteAccessError, WcOpcode::Read)]);
    assert_eq!(counter(&n.net, 1, a, "reads_converted"), 1.0);
    assert_eq!(counter(&n.net, 2, h, "reads_served"), 0.0);
    let writes = n
        .net
        .calls_of(2, h)
        .iter()
        .filter(
            |c| matches!(c, testing::Call::PostSend(q, wr) if *q == hqp && wr.op == SendOp::Write),
        )
        .count();
    assert_eq!(writes, 0);
    assert_ne!(n.net.nic(2).qp_attr(hqp).unwrap().state, QpState::Error);
}

/// Protection domains at the requester: a READ whose destination is the application's own
/// region but of another PD than the READ's QP is not converted (the layer would otherwise
/// widen it); the NIC gives the READ the local protection error ibverbs gives.
#[test]
fn a_read_into_another_pd_is_not_converted() {
    let mut n = setup(true, &PerfConfig::default());
    let (a, aqp) = (n.a, n.aqp);
    let dest = n.net.call_as(1, a, |v| {
        let pd = v.alloc_pd().unwrap();
        v.reg_mr_in(pd, 0x4000_0000, LEN, Access::LOCAL.tracked())
            .unwrap()
    });
    let mut w = read(&n, 22, 0, 64 << 10);
    w.sg_list[0] = Sge {
        addr: dest.addr,
        length: 64 << 10,
        lkey: dest.lkey,
    };
    let t = n.net.now();
    let r = n.net.call_as(1, a, |v| v.post_send(aqp, w));
    n.net.run_until(t + SETTLE);
    assert_eq!(counter(&n.net, 1, a, "reads_converted"), 0.0);
    let wcs = poll(&mut n);
    assert!(
        r.is_err()
            || wcs
                .iter()
                .all(|w| w.status == WcStatus::LocalProtectionError),
        "{r:?} {wcs:?}"
    );
    assert!(n
        .net
        .nic(1)
        .read_mem(a, dest.addr, 64 << 10)
        .iter()
        .all(|&b| b == 0));
}
