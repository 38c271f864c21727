//! Tests of the virtuoso layer over braid-verbs' fake NIC: ibverbs semantics, bytes tracked,
//! packets lost.

use super::conn::board_key;
use super::*;
use braid_verbs::rendezvous::Side;
use braid_verbs::testing::FakeNet;
use braid_verbs::*;

const BUF: u64 = 0x100_0000;

/// Two hosts with four addresses each (vNICs), one virtuoso tenant on each.
fn net(cfg: &VirtuosoConfig) -> (FakeNet, TenantId, TenantId) {
    let mut net = FakeNet::new(2);
    for h in 1..=2u32 {
        let mut caps = FakeNet::default_caps(h);
        caps.local_addrs = (0..4).map(|k| h | k << 24).collect();
        net.set_caps(h, caps);
    }
    let a = net.add_tenant_with(1, Box::new(Idle), &[cfg]).unwrap();
    let b = net.add_tenant_with(2, Box::new(Idle), &[cfg]).unwrap();
    (net, a, b)
}

struct End {
    cq: CqId,
    qp: QpNum,
    mr: MemoryRegion,
}

fn end(v: &mut dyn Verbs, len: u64) -> End {
    let cq = v.create_cq(4096).unwrap();
    let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
    let mr = v.reg_mr(BUF, len, Access::ALL.tracked()).unwrap();
    End { cq, qp, mr }
}

/// Both ends created and connected as an application does it (the peer's QP number learned
/// out of band).
fn pair(net: &mut FakeNet, a: TenantId, b: TenantId, len: u64) -> (End, End) {
    let ea = net.call_as(1, a, |v| end(v, len));
    let eb = net.call_as(2, b, |v| end(v, len));
    let r = |host, qpn| RemoteQp {
        host,
        qpn,
        udp_sport: None,
    };
    net.call_as(1, a, |v| v.connect_qp(ea.qp, r(2, eb.qp)))
        .unwrap();
    net.call_as(2, b, |v| v.connect_qp(eb.qp, r(1, ea.qp)))
        .unwrap();
    (ea, eb)
}

fn pattern(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 131 + seed * 7) % 251) as u8)
        .collect()
}

fn poll_all(net: &mut FakeNet, host: u32, t: TenantId, cq: CqId) -> Vec<WorkCompletion> {
    let mut wcs = Vec::new();
    net.call_as(host, t, |v| while v.poll_cq(cq, 64, &mut wcs) > 0 {});
    wcs
}

fn counter(net: &FakeNet, host: u32, t: TenantId, name: &str) -> f64 {
    net.counters(host, t)
        .into_iter()
        .find(|(l, k, _)| *l == "virtuoso" && *k == name)
        .map(|x| x.2)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

fn write_wr(wr_id: u64, e: &End, peer: &End, off: u64, len: u64, op: SendOp) -> SendWr {
    let mut w = SendWr::new(
        wr_id,
        op,
        vec![Sge {
            addr: e.mr.addr + off,
            length: len as u32,
            lkey: e.mr.lkey,
        }],
    );
    w.remote_addr = peer.mr.addr + off;
    w.rkey = peer.mr.rkey;
    w
}

#[test]
fn mp_write_lands_byte_for_byte_on_every_path_with_one_completion() {
    let cfg = VirtuosoConfig::default();
    let (mut net, a, b) = net(&cfg);
    const LEN: u64 = 3_000_017;
    let (ea, eb) = pair(&mut net, a, b, LEN);
    let data = pattern(LEN, 1);
    net.call_as(1, a, |v| v.write_local(ea.mr.addr, &data))
        .unwrap();
    net.call_as(1, a, |v| {
        v.post_send(ea.qp, write_wr(42, &ea, &eb, 0, LEN, SendOp::Write))
    })
    .unwrap();
    net.run();
    assert_eq!(
        net.nic(2).read_mem(b, eb.mr.addr, LEN),
        data,
        "every byte once, in place"
    );
    let wcs = poll_all(&mut net, 1, a, ea.cq);
    assert_eq!(wcs.len(), 1, "{wcs:?}");
    assert_eq!(
        (wcs[0].wr_id, wcs[0].status, wcs[0].opcode, wcs[0].qp_num),
        (42, WcStatus::Success, WcOpcode::Write, ea.qp)
    );
    // The paths were probed first, then all four carried data.
    assert_eq!(counter(&net, 1, a, "probes"), 4.0);
    let per_path: Vec<f64> = (0..4)
        .map(|i| counter(&net, 1, a, &format!("path{i}_bytes")))
        .collect();
    assert_eq!(per_path.iter().sum::<f64>(), LEN as f64);
    // (The fake NIC sends whole messages FIFO, so parallel probes finish one after the other
    // and the first path looks fastest; the simulator's tests check the split itself.)
    assert!(per_path.iter().all(|b| *b > 0.0), "{per_path:?}");
    // Each path QP sends from its own address.
    for i in 0..4u8 {
        let ep = net
            .board()
            .borrow()
            .lookup(board_key(1, ea.qp, i), Side::Client)
            .unwrap();
        assert_eq!(
            net.nic(1).qp_attr(ep.qpn).unwrap().local_addr,
            1 | (i as u32) << 24
        );
    }
    // The layer built every constituent WR on the CPU.
    let cpu = net.cpu(1, a);
    assert!(
        cpu.by_layer.get("virtuoso").copied().unwrap_or(0)
            >= 75_000 * counter(&net, 1, a, "wrs") as u64
    );
}

#[test]
fn split_follows_the_given_capacities() {
    let cfg = VirtuosoConfig {
        paths: 3,
        capacities: Some(vec![
            braid_units::Rate(10_000_000_000),
            braid_units::Rate(20_000_000_000),
            braid_units::Rate(40_000_000_000),
        ]),
        ..Default::default()
    };
    let (mut net, a, b) = net(&cfg);
    const LEN: u64 = 7 << 20;
    let (ea, eb) = pair(&mut net, a, b, LEN);
    net.call_as(1, a, |v| {
        v.post_send(ea.qp, write_wr(1, &ea, &eb, 0, LEN, SendOp::Write))
    })
    .unwrap();
    net.run();
    assert_eq!(
        counter(&net, 1, a, "probes"),
        0.0,
        "capacities given: no probe"
    );
    let p: Vec<f64> = (0..3)
        .map(|i| counter(&net, 1, a, &format!("path{i}_bytes")))
        .collect();
    assert_eq!(p, vec![1048576.0, 2097152.0, 4194304.0]);
    assert_eq!(poll_all(&mut net, 1, a, ea.cq).len(), 1);
}

#[test]
fn mp_send_splits_into_the_advertised_buffer_and_small_ones_go_whole_in_order() {
    let cfg = VirtuosoConfig::default();
    let (mut net, a, b) = net(&cfg);
    const LEN: u64 = 4 << 20;
    let (ea, eb) = pair(&mut net, a, b, 2 * LEN);
    let data = pattern(2 * LEN, 2);
    net.call_as(1, a, |v| v.write_local(ea.mr.addr, &data))
        .unwrap();
    // Three RECVs: 1 KB, 3 MB, 1 KB, at distinct places.
    let offs = [0u64, 4096, 7 << 20];
    let lens = [1024u64, 3 << 20, 1024];
    for k in 0..3 {
        let r = RecvWr {
            wr_id: 100 + k as u64,
            sg_list: vec![Sge {
                addr: eb.mr.addr + offs[k],
                length: lens[k] as u32,
                lkey: eb.mr.lkey,
            }],
        };
        net.call_as(2, b, |v| v.post_recv(eb.qp, r)).unwrap();
    }
    net.run();
    // Small, large (one byte short of its buffer), small.
    let sends = [(0u64, 100u64), (1 << 20, (3 << 20) - 1), (5 << 20, 1000)];
    for (k, (off, len)) in sends.iter().enumerate() {
        let w = SendWr::new(
            10 + k as u64,
            SendOp::Send,
            vec![Sge {
                addr: ea.mr.addr + off,
                length: *len as u32,
                lkey: ea.mr.lkey,
            }],
        );
        net.call_as(1, a, |v| v.post_send(ea.qp, w)).unwrap();
    }
    net.run();
    let rw = poll_all(&mut net, 2, b, eb.cq);
    let got: Vec<(u64, WcStatus, WcOpcode, u64, Option<u32>)> = rw
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len, w.imm))
        .collect();
    assert_eq!(
        got,
        (0..3)
            .map(|k| (
                100 + k as u64,
                WcStatus::Success,
                WcOpcode::Recv,
                sends[k].1,
                None
            ))
            .collect::<Vec<_>>()
    );
    for k in 0..3 {
        let (off, len) = sends[k];
        let placed = net.nic(2).read_mem(b, eb.mr.addr + offs[k], len);
        assert!(
            placed == data[off as usize..(off + len) as usize],
            "message {k} in its RECV's buffer"
        );
    }
    let sw = poll_all(&mut net, 1, a, ea.cq);
    assert_eq!(
        sw.iter().map(|w| (w.wr_id, w.opcode)).collect::<Vec<_>>(),
        vec![
            (10, WcOpcode::Send),
            (11, WcOpcode::Send),
            (12, WcOpcode::Send)
        ]
    );
    assert_eq!(counter(&net, 1, a, "split_sends"), 1.0);
    assert_eq!(counter(&net, 1, a, "single_sends"), 2.0);
    let p: Vec<f64> = (1..4)
        .map(|i| counter(&net, 1, a, &format!("path{i}_bytes")))
        .collect();
    assert!(
        p.iter().all(|b| *b > 0.0),
        "the large SEND used every path: {p:?}"
    );
}

#[test]
fn mp_read_fetches_byte_for_byte() {
    let cfg = VirtuosoConfig::default();
    let (mut net, a, b) = net(&cfg);
    const LEN: u64 = 2_500_001;
    let (ea, eb) = pair(&mut net, a, b, LEN);
    let data = pattern(LEN, 3);
    net.call_as(2, b, |v| v.write_local(eb.mr.addr, &data))
        .unwrap();
    net.call_as(1, a, |v| {
        v.post_send(ea.qp, write_wr(9, &ea, &eb, 0, LEN, SendOp::Read))
    })
    .unwrap();
    net.run();
    assert_eq!(net.nic(1).read_mem(a, ea.mr.addr, LEN), data);
    let wcs = poll_all(&mut net, 1, a, ea.cq);
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id, w.opcode, w.byte_len))
            .collect::<Vec<_>>(),
        vec![(9, WcOpcode::Read, LEN)]
    );
    assert!(counter(&net, 1, a, "path3_bytes") > 0.0);
}

/// A path QP gives up (RetryExceeded): its chunk is re-sent on the paths that are up, the path
/// is reset and reconnected at both ends, and it carries data again afterwards.
#[test]
fn a_failing_path_has_its_chunk_resent_and_comes_back() {
    let cfg = VirtuosoConfig {
        retry_cnt: Some(0),
        capacities: Some(vec![braid_units::Rate(1_000_000_000); 4]),
        ..Default::default()
    };
    let (mut net, a, b) = net(&cfg);
    const LEN: u64 = 4 << 20;
    let (ea, eb) = pair(&mut net, a, b, 2 * LEN);
    let data = pattern(2 * LEN, 4);
    net.call_as(1, a, |v| v.write_local(ea.mr.addr, &data))
        .unwrap();
    let p2 = net
        .board()
        .borrow()
        .lookup(board_key(1, ea.qp, 2), Side::Client)
        .unwrap()
        .qpn;
    net.lose_packets(1, p2, 1);
    net.call_as(1, a, |v| {
        v.post_send(ea.qp, write_wr(1, &ea, &eb, 0, LEN, SendOp::Write))
    })
    .unwrap();
    net.run();
    assert_eq!(
        net.nic(2).read_mem(b, eb.mr.addr, LEN),
        &data[..LEN as usize]
    );
    let wcs = poll_all(&mut net, 1, a, ea.cq);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success)]
    );
    assert_eq!(counter(&net, 1, a, "retry_exceeded"), 1.0);
    assert!(counter(&net, 1, a, "resends") >= 1.0);
    assert_eq!(counter(&net, 1, a, "resets"), 1.0);
    assert_eq!(
        counter(&net, 2, b, "resets"),
        1.0,
        "the peer reset its end too"
    );
    // Path 2 carried nothing of the first message (its only chunk failed) ...
    assert_eq!(counter(&net, 1, a, "path2_bytes"), 0.0);
    // ... and is back for the second.
    net.call_as(1, a, |v| {
        v.post_send(ea.qp, write_wr(2, &ea, &eb, LEN, LEN, SendOp::Write))
    })
    .unwrap();
    net.run();
    assert_eq!(
        net.nic(2).read_mem(b, eb.mr.addr + LEN, LEN),
        &data[LEN as usize..]
    );
    assert!(counter(&net, 1, a, "path2_bytes") > 0.0);
    assert_eq!(poll_all(&mut net, 1, a, ea.cq).len(), 1);
}

/// Path 0 (the SEND path) fails under a split MP_SEND and small SENDs: the receiver's RECVs,
/// dropped by the reset, are posted again and every message lands in its own RECV once.
#[test]
fn sends_survive_a_failure_of_path_zero() {
    let cfg = VirtuosoConfig {
        retry_cnt: Some(0),
        capacities: Some(vec![braid_units::Rate(1_000_000_000); 4]),
        ..Default::default()
    };
    let (mut net, a, b) = net(&cfg);
    let (ea, eb) = pair(&mut net, a, b, 9 << 20);
    let data = pattern(9 << 20, 5);
    net.call_as(1, a, |v| v.write_local(ea.mr.addr, &data))
        .unwrap();
    let lens = [200u64, 2 << 20, 300];
    for k in 0..3 {
        let r = RecvWr {
            wr_id: k as u64,
            sg_list: vec![Sge {
                addr: eb.mr.addr + (k as u64) * (3 << 20),
                length: 3 << 20,
                lkey: eb.mr.lkey,
            }],
        };
        net.call_as(2, b, |v| v.post_recv(eb.qp, r)).unwrap();
    }
    net.run();
    net.lose_packets(1, ea.qp, 1);
    for (k, len) in lens.iter().enumerate() {
        let w = SendWr::new(
            k as u64,
            SendOp::Send,
            vec![Sge {
                addr: ea.mr.addr + (k as u64) * (3 << 20),
                length: *len as u32,
                lkey: ea.mr.lkey,
            }],
        );
        net.call_as(1, a, |v| v.post_send(ea.qp, w)).unwrap();
    }
    net.run();
    let rw = poll_all(&mut net, 2, b, eb.cq);
    assert_eq!(
        rw.iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect::<Vec<_>>(),
        (0..3)
            .map(|k| (k as u64, WcStatus::Success, lens[k]))
            .collect::<Vec<_>>()
    );
    for k in 0..3usize {
        let at = (k as u64) * (3 << 20);
        assert!(
            net.nic(2).read_mem(b, eb.mr.addr + at, lens[k])
                == data[at as usize..(at + lens[k]) as usize]
        );
    }
    assert_eq!(poll_all(&mut net, 1, a, ea.cq).len(), 3);
    assert!(counter(&net, 1, a, "retry_exceeded") >= 1.0);
}

/// A peer without virtuoso: plain RDMA on path 0.
#[test]
fn a_plain_peer_gets_plain_rdma() {
    let cfg = VirtuosoConfig::default();
    let mut net = FakeNet::new(2);
    let a = net.add_tenant_with(1, Box::new(Idle), &[&cfg]).unwrap();
    let b = net.add_tenant(2, Box::new(Idle), vec![]);
    const LEN: u64 = 2 << 20;
    let (ea, eb) = pair(&mut net, a, b, LEN);
    let data = pattern(LEN, 6);
    net.call_as(1, a, |v| v.write_local(ea.mr.addr, &data))
        .unwrap();
    net.call_as(1, a, |v| {
        v.post_send(ea.qp, write_wr(3, &ea, &eb, 0, LEN, SendOp::Write))
    })
    .unwrap();
    net.run();
    assert_eq!(net.nic(2).read_mem(b, eb.mr.addr, LEN), data);
    assert_eq!(
        poll_all(&mut net, 1, a, ea.cq)
            .iter()
            .map(|w| w.wr_id)
            .collect::<Vec<_>>(),
        vec![3]
    );
    assert_eq!(counter(&net, 1, a, "conns"), 0.0);
}

#[test]
fn bad_parameters_name_their_key() {
    let mut host = HostCtx::new(1, FakeNet::default_caps(1)).with_board(rendezvous::board());
    let cases: Vec<(VirtuosoConfig, &str)> = vec![
        (
            VirtuosoConfig {
                paths: 0,
                ..Default::default()
            },
            "paths",
        ),
        (
            VirtuosoConfig {
                paths: 17,
                ..Default::default()
            },
            "paths",
        ),
        (
            VirtuosoConfig {
                probe: braid_units::Bytes(1000),
                ..Default::default()
            },
            "probe",
        ),
        (
            VirtuosoConfig {
                capacities: Some(vec![braid_units::Rate(1)]),
                ..Default::default()
            },
            "capacities",
        ),
        (
            VirtuosoConfig {
                retry_cnt: Some(9),
                ..Default::default()
            },
            "retry_cnt",
        ),
        (
            VirtuosoConfig {
                window: 0,
                ..Default::default()
            },
            "window",
        ),
        (
            VirtuosoConfig {
                trunk_init: braid_units::Bytes(0),
                ..Default::default()
            },
            "trunk_init",
        ),
        (
            VirtuosoConfig {
                ewma: 0.0,
                ..Default::default()
            },
            "ewma",
        ),
    ];
    for (cfg, key) in cases {
        let e = cfg.build(&mut host, 1).err().expect("refused");
        assert_eq!(e.key, key, "{e}");
    }
    let mut no_board = HostCtx::new(1, FakeNet::default_caps(1));
    assert!(VirtuosoConfig::default().build(&mut no_board, 1).is_err());
    let spec: crate::MiddlewareEntry = serde_json::from_str(
        r#"{"kind": "virtuoso", "paths": 8, "policy": "equal", "probe": "1MB"}"#,
    )
    .unwrap();
    assert_eq!(spec.0.name(), "virtuoso");
}

/// Lossy mode: each path's WRs double in size from `trunk_init` and a path has one WR in
/// flight at a time (the next is posted after the previous one's success: Fig. 3b).
#[test]
fn lossy_mode_posts_doubling_trunks_one_at_a_time_per_path() {
    let cfg = VirtuosoConfig {
        paths: 2,
        lossy: true,
        trunk_init: braid_units::Bytes(64 * 1024),
        capacities: Some(vec![braid_units::Rate(1_000_000_000); 2]),
        ..Default::default()
    };
    let (mut net, a, b) = net(&cfg);
    const LEN: u64 = 2 << 20;
    let (ea, eb) = pair(&mut net, a, b, LEN);
    let data = pattern(LEN, 7);
    net.call_as(1, a, |v| v.write_local(ea.mr.addr, &data))
        .unwrap();
    net.call_as(1, a, |v| {
        v.post_send(ea.qp, write_wr(5, &ea, &eb, 0, LEN, SendOp::Write))
    })
    .unwrap();
    net.run();
    assert_eq!(net.nic(2).read_mem(b, eb.mr.addr, LEN), data);
    let p1 = net
        .board()
        .borrow()
        .lookup(board_key(1, ea.qp, 1), Side::Client)
        .unwrap()
        .qpn;
    let sizes = |qp: QpNum| -> Vec<u64> {
        net.calls_of(1, a)
            .into_iter()
            .filter_map(|c| match c {
                testing::Call::PostSend(q, w) if q == qp && w.op == SendOp::Write => Some(w.len()),
                _ => None,
            })
            .collect()
    };
    let k = 64 * 1024;
    assert_eq!(
        sizes(ea.qp),
        vec![k, 2 * k, 4 * k, 8 * k, (1 << 20) - 15 * k]
    );
    assert_eq!(sizes(p1), sizes(ea.qp));
    // One in flight per path: every post on a path comes after the previous WR there completed.
    let wc = poll_all(&mut net, 1, a, ea.cq);
    assert_eq!(wc.len(), 1);
    assert_eq!(counter(&net, 1, a, "path0_trunk"), (16 * k) as f64);
}

/// The completion-driven policy hands chunks to whichever path frees up; every byte lands.
#[test]
fn completion_policy_hands_out_chunks_and_places_every_byte() {
    let cfg = VirtuosoConfig {
        policy: Policy::Completion,
        chunk: braid_units::Bytes(256 * 1024),
        window: 1,
        capacities: Some(vec![braid_units::Rate(1_000_000_000); 4]),
        ..Default::default()
    };
    let (mut net, a, b) = net(&cfg);
    const LEN: u64 = 5_000_001;
    let (ea, eb) = pair(&mut net, a, b, LEN);
    let data = pattern(LEN, 8);
    net.call_as(1, a, |v| v.write_local(ea.mr.addr, &data))
        .unwrap();
    net.call_as(1, a, |v| {
        v.post_send(ea.qp, write_wr(6, &ea, &eb, 0, LEN, SendOp::Write))
    })
    .unwrap();
    net.run();
    assert_eq!(net.nic(2).read_mem(b, eb.mr.addr, LEN), data);
    let per: Vec<f64> = (0..4)
        .map(|i| counter(&net, 1, a, &format!("path{i}_bytes")))
        .collect();
    assert_eq!(per.iter().sum::<f64>(), LEN as f64);
    assert!(per.iter().all(|x| *x >= 256.0 * 1024.0), "{per:?}");
    assert_eq!(
        counter(&net, 1, a, "wrs") as u64,
        19 + 1,
        "19 chunks of 256 KiB and the rest"
    );
    assert_eq!(poll_all(&mut net, 1, a, ea.cq).len(), 1);
}

/// The application's own error (a bad rkey) fails its operation once, with that status; the
/// paths it broke are reset and the next operation succeeds.
#[test]
fn an_application_error_fails_the_operation_once() {
    let cfg = VirtuosoConfig {
        capacities: Some(vec![braid_units::Rate(1_000_000_000); 4]),
        ..Default::default()
    };
    let (mut net, a, b) = net(&cfg);
    const LEN: u64 = 1 << 20;
    let (ea, eb) = pair(&mut net, a, b, LEN);
    let mut bad = write_wr(1, &ea, &eb, 0, LEN, SendOp::Write);
    bad.rkey ^= 0x5555;
    net.call_as(1, a, |v| v.post_send(ea.qp, bad)).unwrap();
    net.run();
    let wcs = poll_all(&mut net, 1, a, ea.cq);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::RemoteAccessError)]
    );
    assert_eq!(
        counter(&net, 1, a, "resends"),
        0.0,
        "an access error is not re-sent"
    );
    let data = pattern(LEN, 9);
    net.call_as(1, a, |v| v.write_local(ea.mr.addr, &data))
        .unwrap();
    net.call_as(1, a, |v| {
        v.post_send(ea.qp, write_wr(2, &ea, &eb, 0, LEN, SendOp::Write))
    })
    .unwrap();
    net.run();
    assert_eq!(net.nic(2).read_mem(b, eb.mr.addr, LEN), data);
    let wcs = poll_all(&mut net, 1, a, ea.cq);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(2, WcStatus::Success)]
    );
}

/// A WRITE with immediate consumes the peer's RECV: it goes whole on path 0 (where the RECVs
/// are), after the bytes of the MP_WRITE before it; the receiver sees its immediate.
#[test]
fn write_with_immediate_goes_on_path_zero_after_earlier_writes() {
    let cfg = VirtuosoConfig {
        capacities: Some(vec![braid_units::Rate(1_000_000_000); 4]),
        ..Default::default()
    };
    let (mut net, a, b) = net(&cfg);
    const LEN: u64 = 2 << 20;
    let (ea, eb) = pair(&mut net, a, b, LEN + 64);
    let data = pattern(LEN + 64, 10);
    net.call_as(1, a, |v| v.write_local(ea.mr.addr, &data))
        .unwrap();
    net.call_as(2, b, |v| {
        v.post_recv(
            eb.qp,
            RecvWr {
                wr_id: 77,
                sg_list: vec![],
            },
        )
    })
    .unwrap();
    net.run();
    net.call_as(1, a, |v| {
        v.post_send(ea.qp, write_wr(1, &ea, &eb, 0, LEN, SendOp::Write))?;
        v.post_send(
            ea.qp,
            write_wr(2, &ea, &eb, LEN, 64, SendOp::WriteWithImm(4242)),
        )
    })
    .unwrap();
    net.run();
    assert_eq!(net.nic(2).read_mem(b, eb.mr.addr, LEN + 64), data);
    let rw = poll_all(&mut net, 2, b, eb.cq);
    assert_eq!(
        rw.iter()
            .map(|w| (w.wr_id, w.opcode, w.imm))
            .collect::<Vec<_>>(),
        vec![(77, WcOpcode::RecvWithImm, Some(4242))]
    );
    let sw = poll_all(&mut net, 1, a, ea.cq);
    assert_eq!(
        sw.iter().map(|w| (w.wr_id, w.opcode)).collect::<Vec<_>>(),
        vec![(1, WcOpcode::Write), (2, WcOpcode::Write)]
    );
    // The immediate went on path 0, after the pieces of the first operation.
    let calls = net.calls_of(1, a);
    let imm_at = calls
        .iter()
        .position(|c| matches!(c, testing::Call::PostSend(q, w) if *q == ea.qp && matches!(w.op, SendOp::WriteWithImm(4242))))
        .expect("posted on path 0");
    let writes = calls[..imm_at]
        .iter()
        .filter(|c| matches!(c, testing::Call::PostSend(_, w) if w.op == SendOp::Write))
        .count();
    assert!(writes >= 4, "{writes}");
}
