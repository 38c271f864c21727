//! Tests of the perf layer over braid-verbs' fake NIC (FakeNet): real ibverbs semantics, bytes
//! tracked, packets lost.

use super::*;
use braid_verbs::testing::{Call, FakeNet};
use braid_verbs::*;
use std::collections::BTreeMap;

fn write(wr_id: u64, len: u32, signaled: bool) -> SendWr {
    let mut w = SendWr::new(
        wr_id,
        SendOp::Write,
        vec![Sge {
            addr: 0,
            length: len,
            lkey: 0,
        }],
    );
    w.signaled = signaled;
    w
}

/// Over the fake NIC, with bytes tracked and packets lost: what a split WRITE places is exactly
/// what the application wrote, once (a WRITE_WITH_IMM split in parts consumes one RECV), and the
/// application sees one completion per signaled WR.
#[test]
fn splitting_loses_duplicates_and_reorders_no_byte() {
    let mut net = FakeNet::new(2);
    let cfg = PerfConfig::default();
    let b = net.add_tenant_with(1, Box::new(Idle), &[&cfg]).unwrap();
    let d = net.add_tenant_with(1, Box::new(Idle), &[&cfg]).unwrap();
    let r = net.add_tenant(2, Box::new(Idle), vec![]);
    const LEN: u64 = 3 << 20;
    let end = |v: &mut dyn Verbs| {
        let cq = v.create_cq(4096).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        let mr = v.reg_mr(0x100_0000, LEN, Access::ALL.tracked()).unwrap();
        (cq, qp, mr)
    };
    let (bcq, bqp, bmr) = net.call_as(1, b, end);
    let (_, dqp, dmr) = net.call_as(1, d, end);
    let (rcq, rqp, rmr) = net.call_as(2, r, end);
    let rqp2 = net.call_as(2, r, |v| v.create_qp(&QpInit::rc(rcq)).unwrap());
    let remote = |host, qpn| RemoteQp {
        host,
        qpn,
        udp_sport: None,
    };
    net.call_as(1, b, |v| v.connect_qp(bqp, remote(2, rqp)))
        .unwrap();
    net.call_as(1, d, |v| v.connect_qp(dqp, remote(2, rqp2)))
        .unwrap();
    net.call_as(2, r, |v| v.connect_qp(rqp, remote(1, bqp)))
        .unwrap();
    net.call_as(2, r, |v| v.connect_qp(rqp2, remote(1, dqp)))
        .unwrap();
    let data: Vec<u8> = (0..LEN).map(|i| (i * 131 % 251) as u8).collect();
    net.call_as(1, b, |v| v.write_local(bmr.addr, &data))
        .unwrap();
    net.call_as(2, r, |v| {
        v.post_recv(
            rqp,
            RecvWr {
                wr_id: 5,
                sg_list: vec![],
            },
        )
    })
    .unwrap();
    // D_App is active: B's large WRITEs are split.
    net.call_as(1, d, |v| {
        let mut w = write(1, 16, true);
        w.sg_list[0] = Sge {
            addr: dmr.addr,
            length: 16,
            lkey: dmr.lkey,
        };
        w.remote_addr = rmr.addr + LEN - 16;
        w.rkey = rmr.rkey;
        v.post_send(dqp, w)
    })
    .unwrap();
    // Three WRITEs cover the buffer: two SGEs, odd sizes, an unsignaled one, an immediate.
    let cuts = [0u64, 1 << 20, (1 << 20) + 700_001, LEN - 16];
    let ops = [SendOp::Write, SendOp::Write, SendOp::WriteWithImm(77)];
    for k in 0..3 {
        let (lo, hi) = (cuts[k], cuts[k + 1]);
        let mid = lo + (hi - lo) / 3;
        let sg = vec![
            Sge {
                addr: bmr.addr + lo,
                length: (mid - lo) as u32,
                lkey: bmr.lkey,
            },
            Sge {
                addr: bmr.addr + mid,
                length: (hi - mid) as u32,
                lkey: bmr.lkey,
            },
        ];
        let mut w = SendWr::new(11 + k as u64, ops[k], sg);
        w.remote_addr = rmr.addr + lo;
        w.rkey = rmr.rkey;
        w.signaled = k != 1;
        net.call_as(1, b, |v| v.post_send(bqp, w)).unwrap();
    }
    net.lose_packets(1, bqp, 3);
    net.run_until(100_000_000_000);
    let got = net.nic(2).read_mem(r, rmr.addr, LEN - 16);
    let first_bad = got.iter().zip(&data).position(|(a, b)| a != b);
    assert_eq!(first_bad, None, "every byte where it belongs");
    let mut wcs = Vec::new();
    net.call_as(1, b, |v| while v.poll_cq(bcq, 16, &mut wcs) > 0 {});
    let ids: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, vec![(11, WcStatus::Success), (13, WcStatus::Success)]);
    let mut rw = Vec::new();
    net.call_as(2, r, |v| while v.poll_cq(rcq, 16, &mut rw) > 0 {});
    let recvs: Vec<_> = rw
        .iter()
        .filter(|w| w.opcode == WcOpcode::RecvWithImm)
        .collect();
    assert_eq!(
        recvs.len(),
        1,
        "one immediate for the whole WRITE_WITH_IMM: {rw:?}"
    );
    assert_eq!(recvs[0].imm, Some(77));
    let c = net.counters(1, b);
    let get = |k: &str| c.iter().find(|x| x.1 == k).unwrap().2;
    assert!(get("sub_wrs") >= 190.0, "{c:?}");
    assert!(get("zero_waits") >= 16.0 * 190.0, "{c:?}");
}

/// Two tenants on host 1 (B under test, D to make the LMSE act) and a raw receiver on host 2,
/// connected; every region tracked, 4 MiB at 0x100_0000.
struct Pair {
    net: FakeNet,
    b: TenantId,
    r: TenantId,
    bcq: CqId,
    bqp: QpNum,
    bmr: MemoryRegion,
    rcq: CqId,
    rqp: QpNum,
    rmr: MemoryRegion,
}

fn pair() -> Pair {
    let mut net = FakeNet::new(2);
    let cfg = PerfConfig::default();
    let b = net.add_tenant_with(1, Box::new(Idle), &[&cfg]).unwrap();
    let d = net.add_tenant_with(1, Box::new(Idle), &[&cfg]).unwrap();
    let r = net.add_tenant(2, Box::new(Idle), vec![]);
    let end = |v: &mut dyn Verbs| {
        let cq = v.create_cq(4096).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        let mr = v
            .reg_mr(0x100_0000, 4 << 20, Access::ALL.tracked())
            .unwrap();
        (cq, qp, mr)
    };
    let (bcq, bqp, bmr) = net.call_as(1, b, end);
    let (_, dqp, dmr) = net.call_as(1, d, end);
    let (rcq, rqp, rmr) = net.call_as(2, r, end);
    let rqp2 = net.call_as(2, r, |v| v.create_qp(&QpInit::rc(rcq)).unwrap());
    let remote = |host, qpn| RemoteQp {
        host,
        qpn,
        udp_sport: None,
    };
    net.call_as(1, b, |v| v.connect_qp(bqp, remote(2, rqp)))
        .unwrap();
    net.call_as(1, d, |v| v.connect_qp(dqp, remote(2, rqp2)))
        .unwrap();
    net.call_as(2, r, |v| v.connect_qp(rqp, remote(1, bqp)))
        .unwrap();
    net.call_as(2, r, |v| v.connect_qp(rqp2, remote(1, dqp)))
        .unwrap();
    net.call_as(1, d, |v| {
        let mut w = write(1, 16, true);
        w.sg_list[0] = Sge {
            addr: dmr.addr,
            length: 16,
            lkey: dmr.lkey,
        };
        w.remote_addr = rmr.addr + (4 << 20) - 16;
        w.rkey = rmr.rkey;
        v.post_send(dqp, w)
    })
    .unwrap();
    Pair {
        net,
        b,
        r,
        bcq,
        bqp,
        bmr,
        rcq,
        rqp,
        rmr,
    }
}

fn counter(net: &FakeNet, t: TenantId, k: &str) -> f64 {
    net.counters(1, t).iter().find(|x| x.1 == k).unwrap().2
}

/// A SEND consumes one RECV per message: it is never cut, but its bytes earn 0_WAITs.
#[test]
fn a_large_send_is_not_cut_but_earns_zero_waits() {
    let mut p = pair();
    let data: Vec<u8> = (0..65_536u32).map(|i| (i % 253) as u8).collect();
    let (b, r, bmr, rmr, bqp, rqp) = (p.b, p.r, p.bmr, p.rmr, p.bqp, p.rqp);
    p.net
        .call_as(1, b, |v| v.write_local(bmr.addr, &data))
        .unwrap();
    let sg = |mr: MemoryRegion| {
        vec![Sge {
            addr: mr.addr,
            length: 65_536,
            lkey: mr.lkey,
        }]
    };
    p.net
        .call_as(2, r, |v| {
            v.post_recv(
                rqp,
                RecvWr {
                    wr_id: 9,
                    sg_list: sg(rmr),
                },
            )
        })
        .unwrap();
    p.net
        .call_as(1, b, |v| {
            v.post_send(bqp, SendWr::new(4, SendOp::Send, sg(bmr)))
        })
        .unwrap();
    p.net.run_until(10_000_000_000);
    let mut rw = Vec::new();
    let rcq = p.rcq;
    p.net
        .call_as(2, r, |v| while v.poll_cq(rcq, 16, &mut rw) > 0 {});
    let recvs: Vec<_> = rw.iter().filter(|w| w.opcode == WcOpcode::Recv).collect();
    assert_eq!(recvs.len(), 1);
    assert_eq!((recvs[0].wr_id, recvs[0].byte_len), (9, 65_536));
    assert_eq!(p.net.nic(2).read_mem(r, rmr.addr, 65_536), data);
    assert_eq!(counter(&p.net, b, "sub_wrs"), 0.0);
    assert_eq!(counter(&p.net, b, "zero_waits"), 64.0, "16 per 16 KiB sent");
    let mut wcs = Vec::new();
    let bcq = p.bcq;
    p.net
        .call_as(1, b, |v| while v.poll_cq(bcq, 16, &mut wcs) > 0 {});
    assert_eq!(wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![4]);
}

/// When the peer dies mid-transfer, every application WR — in the NIC or still in the layer —
/// completes once, with an error, under its own wr_id.
#[test]
fn a_failed_qp_reports_each_application_wr_once() {
    let mut p = pair();
    let (b, bmr, rmr, bqp) = (p.b, p.bmr, p.rmr, p.bqp);
    for k in 0..3u64 {
        let sg = vec![Sge {
            addr: bmr.addr + k * (1 << 20),
            length: 1 << 20,
            lkey: bmr.lkey,
        }];
        let mut w = SendWr::new(20 + k, SendOp::Write, sg);
        w.remote_addr = rmr.addr + k * (1 << 20);
        w.rkey = rmr.rkey;
        p.net.call_as(1, b, |v| v.post_send(bqp, w)).unwrap();
    }
    p.net.kill_host(2);
    p.net.run_until(100_000_000_000);
    let mut wcs = Vec::new();
    let bcq = p.bcq;
    p.net
        .call_as(1, b, |v| while v.poll_cq(bcq, 64, &mut wcs) > 0 {});
    let mut ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    ids.sort();
    assert_eq!(ids, vec![20, 21, 22], "{wcs:?}");
    assert!(wcs.iter().all(|w| w.status != WcStatus::Success));
    assert_eq!(wcs[0].status, WcStatus::RetryExceeded);
}

/// An application's post list goes through the layer WR by WR (a bad WR stops it, as ibverbs'
/// `bad_wr`), and the layer's 0_WAITs reach the NIC as one list per sub-WR: one doorbell.
#[test]
fn post_lists_through_the_layer_and_zero_waits_in_one_doorbell() {
    let mut p = pair();
    let (b, bmr, rmr, bqp) = (p.b, p.bmr, p.rmr, p.bqp);
    let data: Vec<u8> = (0..65_536u32).map(|i| (i % 251) as u8).collect();
    p.net
        .call_as(1, b, |v| v.write_local(bmr.addr, &data))
        .unwrap();
    let w = |id: u64, off: u64, len: u32, lkey: u32| {
        let mut w = SendWr::new(
            id,
            SendOp::Write,
            vec![Sge {
                addr: bmr.addr + off,
                length: len,
                lkey,
            }],
        );
        w.remote_addr = rmr.addr + off;
        w.rkey = rmr.rkey;
        w
    };
    let list = vec![
        w(1, 0, 32_768, bmr.lkey),
        w(2, 32_768, 4096, 0xbad),
        w(3, 36_864, 4096, bmr.lkey),
    ];
    let r = p.net.call_as(1, b, |v| v.post_send_list(bqp, list));
    assert_eq!(r.map_err(|e| e.index), Err(1));
    p.net.run_until(10_000_000_000);
    let mut wcs = Vec::new();
    let bcq = p.bcq;
    p.net
        .call_as(1, b, |v| while v.poll_cq(bcq, 16, &mut wcs) > 0 {});
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success)]
    );
    assert_eq!(p.net.nic(2).read_mem(p.r, rmr.addr, 32_768), data[..32_768]);
    assert_eq!(p.net.nic(2).read_mem(p.r, rmr.addr + 32_768, 8), vec![0; 8]);
    // Beside the active D tenant the 32 KiB WRITE went as 2 sub-WRs, each followed by its 16
    // 0_WAITs in one list.
    assert_eq!(counter(&p.net, b, "sub_wrs"), 2.0);
    let lists: Vec<usize> = p
        .net
        .calls_of(1, b)
        .iter()
        .filter_map(|c| match c {
            Call::PostSendList(q, ws) if *q == bqp => Some(ws.len()),
            _ => None,
        })
        .collect();
    assert_eq!(lists, vec![16, 16]);
}

/// `hw_pause = true`: PAUSE/RESUME in the NIC, as the artifact. A 2-QP tenant held to 1 active
/// QP with `rotate_wrs = 2`: QP 1 starts behind a WAIT on the managed QP's CQ; when QP 0 has
/// posted its budget the layer queues a SEND_ENABLE of the managed QP behind QP 0's work (and a
/// WAIT, re-pausing it), so QP 1's data leaves when QP 0's first two WRITEs have been sent,
/// without waiting for software; QP 0's third WRITE waits for QP 1's turn to end.
#[test]
fn hardware_pause_hands_over_through_the_managed_qp() {
    let mut net = FakeNet::new(2);
    let cfg = PerfConfig {
        hw_pause: true,
        rotate_wrs: 2,
        ..PerfConfig::default()
    };
    let mut ctx = HostCtx::new(1, net.caps(1).clone());
    let layer = cfg.build(&mut ctx, 1).unwrap();
    let b = net.add_tenant(1, Box::new(Idle), vec![layer]);
    assert_eq!(b, 1);
    let st = ctx
        .shared::<super::state::HostState>(|| unreachable!("built"))
        .0;
    st.borrow_mut().tenants.get_mut(&1).unwrap().allowed_qps = 1;
    let r = net.add_tenant(2, Box::new(Idle), vec![]);
    let end = |v: &mut dyn Verbs| {
        let cq = v.create_cq(256).unwrap();
        v.req_notify_cq(cq).unwrap();
        let q0 = v.create_qp(&QpInit::rc(cq)).unwrap();
        let q1 = v.create_qp(&QpInit::rc(cq)).unwrap();
        let mr = v.reg_mr(0x100_0000, 1 << 20, Access::ALL).unwrap();
        (cq, [q0, q1], mr)
    };
    net.run_until(1);
    let (bcq, bq, bmr) = net.call_as(1, b, end);
    let (_, rq, rmr) = net.call_as(2, r, end);
    for i in 0..2 {
        let remote = |host, qpn| RemoteQp {
            host,
            qpn,
            udp_sport: None,
        };
        net.call_as(1, b, |v| v.connect_qp(bq[i], remote(2, rq[i])))
            .unwrap();
        net.call_as(2, r, |v| v.connect_qp(rq[i], remote(1, bq[i])))
            .unwrap();
    }
    let w = |id: u64, k: u64| {
        let mut w = SendWr::new(
            id,
            SendOp::Write,
            vec![Sge {
                addr: bmr.addr + k * 65_536,
                length: 65_536,
                lkey: bmr.lkey,
            }],
        );
        w.remote_addr = rmr.addr + k * 65_536;
        w.rkey = rmr.rkey;
        w
    };
    net.call_as(1, b, |v| v.post_send(bq[0], w(1, 0))).unwrap();
    net.call_as(1, b, |v| v.post_send(bq[1], w(11, 1))).unwrap();
    net.call_as(1, b, |v| v.post_send(bq[0], w(2, 2))).unwrap();
    net.call_as(1, b, |v| v.post_send(bq[0], w(3, 3))).unwrap();
    // What went down: QP 1 starts with a WAIT; QP 0 got SEND_ENABLE + WAIT after its 2nd WR.
    let ops = |q: QpNum| -> Vec<&'static str> {
        net.calls_of(1, b)
            .iter()
            .filter_map(|c| match c {
                Call::PostSend(x, wr) if *x == q => Some(match wr.op {
                    SendOp::Write => "write",
                    SendOp::Wait { .. } => "wait",
                    SendOp::SendEnable { .. } => "enable",
                    _ => "other",
                }),
                _ => None,
            })
            .collect()
    };
    assert_eq!(ops(bq[1]), vec!["wait", "write"]);
    assert_eq!(
        ops(bq[0]),
        vec!["write", "write", "enable", "wait", "write"]
    );
    net.run_until(50_000_000_000);
    // The application sees its four completions, in the order the NIC let them go.
    let mut wcs = Vec::new();
    net.call_as(1, b, |v| while v.poll_cq(bcq, 16, &mut wcs) > 0 {});
    assert_eq!(
        wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        vec![1, 2, 11, 3],
        "{wcs:?}"
    );
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
    // QP 1's hand-over was queued at post time, before any completion: hardware, no round trip.
    let enable_at = net
        .calls()
        .iter()
        .find(|l| matches!(&l.call, Call::PostSend(_, wr) if matches!(wr.op, SendOp::SendEnable { .. })))
        .unwrap()
        .at;
    let first_done = net
        .deliveries()
        .iter()
        .find(|d| d.host == 1 && d.tenant == b && matches!(d.event, Some(Event::Completion(_))))
        .unwrap()
        .at;
    assert!(enable_at < first_done);
    let c = |k: &str| net.counters(1, b).iter().find(|x| x.1 == k).unwrap().2;
    assert!(c("pauses") >= 2.0 && c("resumes") >= 2.0);
}

/// Each QP's completions: (wr_id, status) in order.
type PerQp = BTreeMap<QpNum, Vec<(u64, WcStatus)>>;

/// `hw_pause = true`, 8 QPs of one tenant held to 2 active, `rotate_wrs = 2`, six 64 KiB
/// WRITEs per QP: while the rotation is under way `gone` QPs are destroyed or failed (`how`).
/// Returns each QP's completions (wr_ids in order, statuses) once the network is idle.
fn hw_rotation_losing(how: &dyn Fn(&mut FakeNet, TenantId, &[QpNum])) -> (Vec<QpNum>, PerQp) {
    let mut net = FakeNet::new(2);
    let cfg = PerfConfig {
        hw_pause: true,
        rotate_wrs: 2,
        ..PerfConfig::default()
    };
    let mut ctx = HostCtx::new(1, net.caps(1).clone());
    let layer = cfg.build(&mut ctx, 1).unwrap();
    let b = net.add_tenant(1, Box::new(Idle), vec![layer]);
    let st = ctx
        .shared::<super::state::HostState>(|| unreachable!("built"))
        .0;
    st.borrow_mut().tenants.get_mut(&1).unwrap().allowed_qps = 2;
    let r = net.add_tenant(2, Box::new(Idle), vec![]);
    const N: usize = 8;
    let end = |v: &mut dyn Verbs| {
        let cq = v.create_cq(1024).unwrap();
        let qs: Vec<QpNum> = (0..N)
            .map(|_| v.create_qp(&QpInit::rc(cq)).unwrap())
            .collect();
        let mr = v.reg_mr(0x100_0000, 1 << 20, Access::ALL).unwrap();
        (cq, qs, mr)
    };
    net.run_until(1);
    let (bcq, bq, bmr) = net.call_as(1, b, end);
    let (_, rq, rmr) = net.call_as(2, r, end);
    for i in 0..N {
        let remote = |host, qpn| RemoteQp {
            host,
            qpn,
            udp_sport: None,
        };
        net.call_as(1, b, |v| v.connect_qp(bq[i], remote(2, rq[i])))
            .unwrap();
        net.call_as(2, r, |v| v.connect_qp(rq[i], remote(1, bq[i])))
            .unwrap();
    }
    for k in 0..6u64 {
        for (i, &q) in bq.iter().enumerate() {
            let mut w = SendWr::new(
                (i as u64) * 100 + k,
                SendOp::Write,
                vec![Sge {
                    addr: bmr.addr + k * 65_536,
                    length: 65_536,
                    lkey: bmr.lkey,
                }],
            );
            w.remote_addr = rmr.addr + k * 65_536;
            w.rkey = rmr.rkey;
            net.call_as(1, b, |v| v.post_send(q, w)).unwrap();
        }
    }
    how(&mut net, b, &bq);
    net.run_until(1_000_000_000_000);
    let mut wcs = Vec::new();
    net.call_as(1, b, |v| while v.poll_cq(bcq, 64, &mut wcs) > 0 {});
    let mut per: PerQp = BTreeMap::new();
    for w in wcs {
        per.entry(w.qp_num).or_default().push((w.wr_id, w.status));
    }
    (bq, per)
}

/// Every QP but `gone` got its six WRITEs' completions exactly once, in order, Success.
fn assert_others_complete(
    bq: &[QpNum],
    per: &BTreeMap<QpNum, Vec<(u64, WcStatus)>>,
    gone: &[usize],
) {
    for (i, q) in bq.iter().enumerate() {
        let got = per.get(q).cloned().unwrap_or_default();
        if gone.contains(&i) {
            let mut ids: Vec<u64> = got.iter().map(|g| g.0).collect();
            ids.dedup();
            assert_eq!(
                ids.len(),
                got.len(),
                "QP {i}: a WR completed twice: {got:?}"
            );
            continue;
        }
        let want: Vec<(u64, WcStatus)> = (0..6)
            .map(|k| (i as u64 * 100 + k, WcStatus::Success))
            .collect();
        assert_eq!(got, want, "QP {i} (gone: {gone:?})");
    }
}

/// A slot holder destroyed, and a paused QP destroyed, mid-rotation: the others still run.
#[test]
fn hardware_pause_survives_destroyed_qps() {
    let (bq, per) = hw_rotation_losing(&|net, b, bq| {
        net.run_until(2_000_000);
        // QP 0 led first (it handed over behind its work and re-paused); QP 6 waits paused.
        net.call_as(1, b, |v| v.destroy_qp(bq[0])).unwrap();
        net.call_as(1, b, |v| v.destroy_qp(bq[6])).unwrap();
    });
    assert_others_complete(&bq, &per, &[0, 6]);
}

/// A QP moved to Error by the application, and one whose transport gives up (RetryExceeded:
/// every packet lost), mid-rotation, at several moments and places in the rotation: their WRs
/// complete once (error or flushed), the others' all succeed.
#[test]
fn hardware_pause_survives_failed_qps() {
    for (t, lost, errored) in [
        (0u64, 0usize, 1usize),
        (2_000_000, 1, 3),
        (20_000_000, 0, 5),
        (60_000_000, 4, 7),
        (100_000_000, 2, 6),
    ] {
        let (bq, per) = hw_rotation_losing(&|net, b, bq| {
            net.lose_packets(1, bq[lost], 1_000_000);
            net.run_until(1 + t);
            net.call_as(1, b, |v| v.modify_qp(bq[errored], QpModify::Error))
                .unwrap();
        });
        assert_others_complete(&bq, &per, &[lost, errored]);
        let st: Vec<WcStatus> = per[&bq[lost]].iter().map(|g| g.1).collect();
        assert_eq!(st.first(), Some(&WcStatus::RetryExceeded), "{t}: {st:?}");
        assert_eq!(st.len(), 6, "{t}: {st:?}");
        let e = &per.get(&bq[errored]).cloned().unwrap_or_default();
        assert_eq!(e.len(), 6, "{t}: {e:?}");
    }
}
