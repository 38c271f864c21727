//! DRUM's agent and SHARE on the fake NIC: the pool, connection ids through wr_id and immediate
//! data, a shared QP carrying several tenants' connections, the poller's rates, sharing without
//! leaking, conservation under loss, determinism.

use super::*;
use braid_verbs::testing::{Call, FakeNet, NetConfig};
use braid_verbs::*;

mod setup;
use setup::*;

#[test]
fn work_requests_go_to_the_pool_and_come_back_in_order_with_their_ids() {
    // No path delay: with it the scheduler posts one WR per turn of its thread and the first
    // round below would hold one, not pipe_depth (tests/path.rs covers the delay).
    let cfg = DrumConfig {
        pipe_depth: 2,
        path_delay: false,
        ..DrumConfig::default()
    };
    let (mut net, a, b) = net_of(&cfg, 1);
    let ea = end(&mut net, H1, a[0], 0x1000_0000, Access::ALL);
    let eb = end(&mut net, H2, b[0], 0x1000_0000, Access::ALL);
    connect(&mut net, &ea, &eb);
    net.run();
    for i in 0..10 {
        net.call_as(H1, ea.t, |v| {
            v.post_send(ea.qp, write(&ea, &eb, 100 + i, 0, 64))
        })
        .unwrap();
    }
    net.run();
    let wcs = poll(&mut net, &ea);
    let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (100..110).collect::<Vec<_>>());
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success
        && w.qp_num == ea.qp
        && w.opcode == WcOpcode::Write
        && w.byte_len == 64));
    // The tenant never reached the NIC: the agent posted every WR, with the connection id in
    // the top half of wr_id.
    assert!(!net
        .calls_of(H1, ea.t)
        .iter()
        .any(|c| matches!(c, Call::PostSend(..) | Call::CreateQp(..) | Call::RegMr(..))));
    let sends = agent_sends(&net, H1);
    assert_eq!(sends.len(), 10);
    assert!(sends.iter().all(|(_, w)| (w.wr_id >> 32) as u32 == ea.qp));
    // At most pipe_depth on the shared QP: the 10 posts took several completion rounds.
    let posts_at: Vec<u64> = net
        .calls()
        .iter()
        .filter(|l| l.host == H1 && l.tenant == AGENT && matches!(l.call, Call::PostSend(..)))
        .map(|l| l.at)
        .collect();
    let first_round = posts_at.iter().filter(|&&t| t == posts_at[0]).count();
    assert_eq!(first_round, 2, "{posts_at:?}");
}

#[test]
fn a_shared_qp_carries_several_tenants_connections_without_mixing_them() {
    let (mut net, a, b) = net_of(&DrumConfig::default(), 2);
    let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL, false);
    for (i, e) in eb.iter().enumerate() {
        for k in 0..3 {
            net.call_as(H2, e.t, |v| v.post_recv(e.qp, recv(e, 10 * i as u64 + k)))
                .unwrap();
        }
    }
    for (i, e) in ea.iter().enumerate() {
        for k in 0..3 {
            let len = 100 * (i as u32 + 1);
            net.call_as(H1, e.t, |v| v.post_send(e.qp, send(e, k, len)))
                .unwrap();
        }
    }
    net.run();
    for (i, e) in eb.iter().enumerate() {
        let wcs = poll(&mut net, e);
        assert_eq!(wcs.len(), 3, "receiver {i}: {wcs:?}");
        for (k, w) in wcs.iter().enumerate() {
            assert_eq!(w.status, WcStatus::Success);
            assert_eq!(w.opcode, WcOpcode::Recv);
            assert_eq!(
                w.byte_len,
                100 * (i as u64 + 1),
                "receiver {i} got another's"
            );
            assert_eq!(w.wr_id, 10 * i as u64 + k as u64);
            assert_eq!(w.qp_num, e.qp);
            assert_eq!(w.src_qp, ea[i].qp);
        }
    }
    for e in &ea {
        let wcs = poll(&mut net, e);
        assert_eq!(
            wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
    }
    // One shared QP carried both connections; the immediate data named the sender's connection.
    let sends = agent_sends(&net, H1);
    assert_eq!(sends.len(), 6);
    assert!(sends.iter().all(|(q, _)| *q == sends[0].0), "one pipe");
    for (_, w) in &sends {
        let SendOp::SendWithImm(imm) = w.op else {
            panic!("a SEND goes out with the connection id: {:?}", w.op)
        };
        assert_eq!(imm & 0xFF_FFFF, (w.wr_id >> 32) as u32);
        assert!(ea.iter().any(|e| e.qp == imm & 0xFF_FFFF));
    }
    assert_eq!(counter(&net, H1, AGENT, "pipes_ready"), 1.0);
}

#[test]
fn mux_ratio_bounds_the_connections_per_shared_qp() {
    let cfg = DrumConfig {
        mux_ratio: 2,
        ..DrumConfig::default()
    };
    let (mut net, a, b) = net_of(&cfg, 5);
    let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL, false);
    for i in 0..5 {
        net.call_as(H1, ea[i].t, |v| {
            v.post_send(ea[i].qp, write(&ea[i], &eb[i], 1, 0, 8))
        })
        .unwrap();
    }
    net.run();
    for e in &ea {
        assert_eq!(poll(&mut net, e).len(), 1);
    }
    assert_eq!(counter(&net, H1, AGENT, "pipes_ready"), 3.0);
    assert_eq!(counter(&net, H2, AGENT, "pipes_ready"), 3.0);
    let mut qps: Vec<QpNum> = agent_sends(&net, H1).iter().map(|s| s.0).collect();
    qps.sort();
    qps.dedup();
    assert_eq!(qps.len(), 3);
}

#[test]
fn the_poller_hands_out_completions_at_the_decided_rate() {
    // z = 1e5 CQE/s: one completion per 10 µs once the burst of 1 is spent.
    let cfg = DrumConfig {
        wqe_rate: 1e9,
        cqe_rate: 1e5,
        burst: 1,
        ..DrumConfig::default()
    };
    let (mut net, a, b) = net_of(&cfg, 1);
    let ea = end(&mut net, H1, a[0], 0x1000_0000, Access::ALL);
    let eb = end(&mut net, H2, b[0], 0x1000_0000, Access::ALL);
    connect(&mut net, &ea, &eb);
    net.run();
    for i in 0..40 {
        net.call_as(H1, ea.t, |v| v.post_send(ea.qp, write(&ea, &eb, i, 0, 8)))
            .unwrap();
    }
    let t0 = net.now();
    let mut got = 0usize;
    let mut seen = Vec::new();
    for step in 1..=30u64 {
        net.run_until(t0 + step * 10_000_000);
        got += poll(&mut net, &ea).len();
        seen.push(got);
    }
    // After k steps of 10 µs: k completions, give or take the first round trip and the burst.
    for (k, &g) in seen.iter().enumerate() {
        let k = k as i64 + 1;
        assert!(
            (g as i64 - k).abs() <= 2,
            "after {k} x 10 us: {g} ({seen:?})"
        );
    }
    net.run();
    got += poll(&mut net, &ea).len();
    assert_eq!(got, 40);
}

#[test]
fn a_tenant_cannot_use_another_tenants_slice_qp_or_completions() {
    let (mut net, a, b) = net_of(&DrumConfig::default(), 2);
    let e1 = end(&mut net, H1, a[0], 0x1000_0000, Access::ALL);
    let e2 = end(&mut net, H1, a[1], 0x2000_0000, Access::ALL);
    let p1 = end(&mut net, H2, b[0], 0x1000_0000, Access::ALL);
    let p2 = end(&mut net, H2, b[1], 0x3000_0000, Access::ALL);
    connect(&mut net, &e1, &p1);
    connect(&mut net, &e2, &p2);
    net.run();
    // Tenant 2 posting with tenant 1's lkey (at tenant 1's address, or its own): BadKey, as on
    // its own QP with a foreign key.
    let mut bad = write(&e2, &p2, 1, 0, 8);
    bad.sg_list[0].lkey = e1.mr.lkey;
    assert_eq!(
        net.call_as(H1, e2.t, |v| v.post_send(e2.qp, bad.clone())),
        Err(VerbsError::BadKey(e1.mr.lkey))
    );
    bad.sg_list[0].addr = e1.mr.addr;
    assert_eq!(
        net.call_as(H1, e2.t, |v| v.post_send(e2.qp, bad)),
        Err(VerbsError::BadKey(e1.mr.lkey))
    );
    // Its own key outside its own region: refused too.
    let mut out = write(&e2, &p2, 1, 0, 8);
    out.sg_list[0].addr = e1.mr.addr;
    assert!(matches!(
        net.call_as(H1, e2.t, |v| v.post_send(e2.qp, out)),
        Err(VerbsError::BadKey(_))
    ));
    // Another tenant's QP does not exist for it.
    assert_eq!(
        net.call_as(H1, e2.t, |v| v.post_send(e1.qp, write(&e2, &p2, 1, 0, 8))),
        Err(VerbsError::NoSuchQp(e1.qp))
    );
    assert_eq!(
        net.call_as(H1, e2.t, |v| v.query_qp(e1.qp)).err(),
        Some(VerbsError::NoSuchQp(e1.qp))
    );
    // Completions go to their own tenant only.
    net.call_as(H1, e1.t, |v| v.post_send(e1.qp, write(&e1, &p1, 7, 0, 8)))
        .unwrap();
    net.run();
    assert_eq!(poll(&mut net, &e2).len(), 0);
    let w = poll(&mut net, &e1);
    assert_eq!((w.len(), w[0].wr_id), (1, 7));
}

/// What a peer that holds tenant 1's rkey gets when it aims at tenant 2's memory: the status
/// and QP state, under `f` on every tenant (`None`: plain RDMA, each its own QP and region).
fn foreign_rkey(f: Option<&dyn MiddlewareFactory>, read: bool) -> (WcStatus, QpState, WcStatus) {
    let raw = crate::RawConfig::default();
    let f = f.unwrap_or(&raw);
    let (mut net, a, b) = net_of(f, 2);
    let e1 = end(&mut net, H1, a[0], 0x1000_0000, Access::ALL);
    let _e2 = end(&mut net, H1, a[1], 0x2000_0000, Access::ALL);
    let p = end(&mut net, H2, b[0], 0x1000_0000, Access::ALL);
    connect(&mut net, &p, &e1);
    net.run();
    // Within tenant 1's region: fine.
    net.call_as(H2, p.t, |v| v.post_send(p.qp, write(&p, &e1, 1, 0, 8)))
        .unwrap();
    net.run();
    let ok = poll(&mut net, &p)[0].status;
    // Tenant 1's rkey at tenant 2's address.
    let mut wr = write(&p, &e1, 2, 0, 8);
    wr.remote_addr = 0x2000_0000;
    if read {
        wr.op = SendOp::Read;
    }
    net.call_as(H2, p.t, |v| v.post_send(p.qp, wr)).unwrap();
    net.run();
    let st = poll(&mut net, &p)[0].status;
    let state = net.call_as(H2, p.t, |v| v.query_qp(p.qp)).unwrap().state;
    assert_eq!(ok, WcStatus::Success);
    (st, state, ok)
}

#[test]
fn a_remote_peer_with_one_tenants_rkey_cannot_touch_anothers_slice() {
    for read in [false, true] {
        let raw = foreign_rkey(None, read);
        let drum = foreign_rkey(Some(&DrumConfig::default()), read);
        let share = foreign_rkey(Some(&ShareConfig::default()), read);
        assert_eq!(raw.0, WcStatus::RemoteAccessError, "raw, read={read}");
        assert_eq!(raw.1, QpState::Error);
        assert_eq!(drum, raw, "drum, read={read}");
        assert_eq!(share, raw, "share, read={read}");
    }
}

#[test]
fn every_byte_is_delivered_once_through_a_shared_qp_under_loss() {
    let (mut net, a, b) = net_of(&DrumConfig::default(), 3);
    let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL, false);
    let pipe = net
        .calls_of(H1, AGENT)
        .into_iter()
        .find_map(|c| match c {
            Call::Connect(q, _) => Some(q),
            _ => None,
        })
        .expect("the agent connected a shared QP");
    for (i, e) in eb.iter().enumerate() {
        for k in 0..20 {
            net.call_as(H2, e.t, |v| v.post_recv(e.qp, recv(e, k + 100 * i as u64)))
                .unwrap();
        }
    }
    net.lose_packets(H1, pipe, 4);
    let mut posted = [0u64; 3];
    for (i, e) in ea.iter().enumerate() {
        for k in 0..20u32 {
            let len = 10 + k + 50 * i as u32;
            posted[i] += len as u64;
            net.call_as(H1, e.t, |v| v.post_send(e.qp, send(e, k as u64, len)))
                .unwrap();
        }
    }
    net.run();
    for i in 0..3 {
        let wcs = poll(&mut net, &eb[i]);
        assert_eq!(wcs.len(), 20);
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
        let got: u64 = wcs.iter().map(|w| w.byte_len).sum();
        assert_eq!(got, posted[i], "connection {i}");
        let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
        assert_eq!(ids, (0..20).map(|k| k + 100 * i as u64).collect::<Vec<_>>());
        assert_eq!(poll(&mut net, &ea[i]).len(), 20);
    }
}

#[test]
fn share_charges_lock_contention_and_drum_does_not() {
    for (f, want) in [
        (&ShareConfig::default() as &dyn MiddlewareFactory, true),
        (&DrumConfig::default(), false),
    ] {
        let (mut net, a, b) = net_of(f, 2);
        let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL, false);
        for k in 0..4 {
            for i in 0..2 {
                net.call_as(H1, ea[i].t, |v| {
                    v.post_send(ea[i].qp, write(&ea[i], &eb[i], k, 0, 8))
                })
                .unwrap();
            }
        }
        net.run();
        let lock = counter(&net, H1, AGENT, "lock_ns");
        assert_eq!(lock > 0.0, want, "{} lock_ns = {lock}", f.name());
        for e in &ea {
            assert_eq!(poll(&mut net, e).len(), 4);
        }
    }
}

#[test]
fn topk_schedules_at_most_k_connections_and_starves_none() {
    let cfg = DrumConfig {
        qp_budget: 1,
        max_wait: 2,
        solve_interval: braid_units::Duration(5_000_000),
        wqe_rate: 1e6,
        ..DrumConfig::default()
    };
    let (mut net, a, b) = net_of(&cfg, 3);
    let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL, false);
    for k in 0..30 {
        for i in 0..3 {
            net.call_as(H1, ea[i].t, |v| {
                v.post_send(ea[i].qp, write(&ea[i], &eb[i], k, 0, 8))
            })
            .unwrap();
        }
    }
    net.run();
    for e in &ea {
        let n = poll(&mut net, e).len();
        assert_eq!(n, 30, "{:?} {:?}", net.counters(H1, AGENT), net.now());
    }
    assert!(counter(&net, H1, AGENT, "active") <= 1.0);
}

#[test]
fn the_same_run_twice_is_identical() {
    let run = || {
        let (mut net, a, b) = net_of(&DrumConfig::default(), 2);
        let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL, false);
        for k in 0..10 {
            for i in 0..2 {
                net.call_as(H1, ea[i].t, |v| {
                    v.post_send(ea[i].qp, write(&ea[i], &eb[i], k, 0, 100 * (i as u32 + 1)))
                })
                .unwrap();
            }
        }
        net.run();
        net.calls()
            .iter()
            .map(|l| format!("{} {} {} {:?}", l.at, l.host, l.tenant, l.call))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[test]
fn bad_parameters_are_refused_by_name() {
    let mut h = HostCtx::new(1, FakeNet::default_caps(1)).with_board(rendezvous::board());
    for (cfg, key) in [
        (
            DrumConfig {
                mux_ratio: 0,
                ..Default::default()
            },
            "mux_ratio",
        ),
        (
            DrumConfig {
                pipe_depth: 0,
                ..Default::default()
            },
            "pipe_depth",
        ),
        (
            DrumConfig {
                pipe_bdp: -1.0,
                ..Default::default()
            },
            "pipe_bdp",
        ),
        (
            DrumConfig {
                pipe_bdp: f64::NAN,
                ..Default::default()
            },
            "pipe_bdp",
        ),
        (
            DrumConfig {
                wqe_rate: -1.0,
                ..Default::default()
            },
            "wqe_rate",
        ),
        (
            DrumConfig {
                weight: 0.0,
                ..Default::default()
            },
            "weight",
        ),
        (
            DrumConfig {
                burst: 0,
                ..Default::default()
            },
            "burst",
        ),
    ] {
        let e = cfg.build(&mut h, 1).err().expect("refused");
        assert_eq!(e.key, key);
    }
    // Tenants of one host must agree on the host-wide parameters (weights may differ).
    DrumConfig::default().build(&mut h, 1).ok().unwrap();
    DrumConfig {
        weight: 3.0,
        ..Default::default()
    }
    .build(&mut h, 2)
    .ok()
    .unwrap();
    assert!(DrumConfig {
        pipe_depth: 9,
        ..Default::default()
    }
    .build(&mut h, 3)
    .is_err());
    // Without a board there are no peers' agents to meet.
    let mut lone = HostCtx::new(1, FakeNet::default_caps(1));
    assert!(DrumConfig::default().build(&mut lone, 1).is_err());
}

mod alpha;
mod data;
mod errors;
mod fail;
mod path;
mod protect;
mod ud;
