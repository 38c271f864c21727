//! `pipe = "ud"`: one UD QP per host carrying several tenants' connections to several peers,
//! without mixing their completions, segmented, in order, once, under loss (`drum/ud.rs`).

use super::*;

fn ud_cfg() -> DrumConfig {
    DrumConfig {
        pipe: PipeKind::Ud,
        ud_rto: braid_units::Duration(50_000_000),
        ..DrumConfig::default()
    }
}

/// Host 1's two tenants each talk to a tenant on host 2 and one on host 3 (4 connections);
/// each sends SENDs of 1 B to 20 KB (up to 6 UD segments), some with immediate data, a WRITE
/// between them, with `lose` packets lost on host 1's carrier. Returns every end's completions
/// and every receiver's region.
#[allow(clippy::type_complexity)]
fn run(f: &dyn MiddlewareFactory, lose: u32) -> (Vec<Vec<WorkCompletion>>, Vec<Vec<u8>>, FakeNet) {
    let mut net = FakeNet::with_config(
        3,
        NetConfig {
            host_memory: true,
            ..NetConfig::default()
        },
    );
    let t1: Vec<TenantId> = (0..2)
        .map(|_| net.add_tenant_with(H1, Box::new(Idle), &[f]).unwrap())
        .collect();
    let t2: Vec<TenantId> = (0..2)
        .map(|_| net.add_tenant_with(H2, Box::new(Idle), &[f]).unwrap())
        .collect();
    let t3: Vec<TenantId> = (0..2)
        .map(|_| net.add_tenant_with(H3, Box::new(Idle), &[f]).unwrap())
        .collect();
    net.run();
    let tracked = Access::ALL.tracked();
    // (sender, receiver) pairs: tenant i of H1 with tenant i of H2 and of H3.
    let mut pairs = Vec::new();
    for i in 0..2 {
        for (h, t) in [(H2, t2[i]), (H3, t3[i])] {
            let k = pairs.len() as u64;
            let a = end(&mut net, H1, t1[i], 0x1000_0000 * (k + 1), tracked);
            let b = end(&mut net, h, t, 0x1000_0000 * (k + 1), tracked);
            connect(&mut net, &a, &b);
            pairs.push((a, b));
        }
    }
    net.run();
    for (k, (a, b)) in pairs.iter().enumerate() {
        net.call_as(H1, a.t, |v| {
            v.write_local(a.mr.addr, &pattern(k as u64, 1 << 20))
        })
        .unwrap();
        for r in 0..6u64 {
            let rw = RecvWr {
                wr_id: 1000 + r,
                sg_list: vec![Sge {
                    addr: b.mr.addr + (512 << 10) + r * 32768,
                    length: 32768,
                    lkey: b.mr.lkey,
                }],
            };
            net.call_as(b.host, b.t, |v| v.post_recv(b.qp, rw)).unwrap();
        }
    }
    let carrier: Vec<QpNum> = net
        .calls_of(H1, AGENT)
        .into_iter()
        .filter_map(|c| match c {
            Call::Connect(q, r) if r.qpn == q && r.host == H1 => Some(q),
            _ => None,
        })
        .collect();
    if lose > 0 {
        if carrier.is_empty() {
            for (a, _) in &pairs {
                net.lose_packets(H1, a.qp, lose);
            }
        } else {
            net.lose_packets(H1, carrier[0], lose);
        }
    }
    for (k, (a, b)) in pairs.iter().enumerate() {
        for r in 0..6u64 {
            let len = [1u32, 4000, 4097, 9000, 20000, 333][r as usize] + k as u32;
            let mut wr = send(a, r, len);
            wr.sg_list[0].addr = a.mr.addr + r * 65536;
            if r % 2 == 1 {
                wr.op = SendOp::SendWithImm(0xC0DE_0000 | (k as u32) << 8 | r as u32);
            }
            net.call_as(H1, a.t, |v| v.post_send(a.qp, wr)).unwrap();
            if r == 2 {
                // A WRITE between the SENDs: it stays on the RC pipe, in order.
                let w = write(a, b, 77, 256 << 10, 5000);
                net.call_as(H1, a.t, |v| v.post_send(a.qp, w)).unwrap();
            }
        }
    }
    net.run();
    let mut wcs = Vec::new();
    let mut mem = Vec::new();
    // Everything but QP numbers (a virtual QP's differs from a real one's).
    let strip = |w: Vec<WorkCompletion>| {
        w.into_iter()
            .map(|w| WorkCompletion {
                qp_num: 0,
                src_qp: 0,
                ..w
            })
            .collect::<Vec<_>>()
    };
    for (a, b) in &pairs {
        wcs.push(strip(poll(&mut net, a)));
        wcs.push(strip(poll(&mut net, b)));
        mem.push(
            net.call_as(b.host, b.t, |v| v.read_local(b.mr.addr, 1 << 20))
                .unwrap(),
        );
    }
    (wcs, mem, net)
}

#[test]
fn one_ud_qp_carries_several_tenants_connections_to_several_peers_without_mixing_them() {
    let (raw_wcs, raw_mem, _) = run(&crate::RawConfig::default(), 0);
    assert_eq!(raw_wcs[0].len(), 7);
    assert_eq!(raw_wcs[1].len(), 6);
    for lose in [0, 9] {
        let (wcs, mem, net) = run(&ud_cfg(), lose);
        // Every end's completions (ids, order, lengths, immediate values, sources) and every
        // receiver's bytes: as with a QP of its own.
        assert_eq!(wcs, raw_wcs, "loss {lose}");
        assert_eq!(mem, raw_mem, "loss {lose}");
        // One UD QP on host 1 carried the SENDs of all four connections, to both peers, in
        // segments of at most one MTU; the WRITEs went on shared RC QPs.
        let sends = agent_sends(&net, H1);
        let ud: Vec<&(QpNum, SendWr)> = sends.iter().filter(|(_, w)| w.ud_dest.is_some()).collect();
        let qps: std::collections::BTreeSet<QpNum> = ud.iter().map(|s| s.0).collect();
        assert_eq!(qps.len(), 1);
        let dests: std::collections::BTreeSet<u32> =
            ud.iter().map(|s| s.1.ud_dest.unwrap().host).collect();
        assert_eq!(dests, [H2, H3].into_iter().collect());
        assert!(ud.iter().all(|s| s.1.len() <= 4096));
        assert!(sends
            .iter()
            .filter(|(_, w)| w.ud_dest.is_none())
            .all(|(_, w)| matches!(w.op, SendOp::Write)));
        let retx = counter(&net, H1, AGENT, "ud_retransmits");
        assert_eq!(retx > 0.0, lose > 0, "retransmits {retx}");
    }
}

#[test]
fn a_dead_peer_fails_only_its_own_connections_on_the_ud_qp() {
    let cfg = ud_cfg();
    let mut net = FakeNet::with_config(
        3,
        NetConfig {
            host_memory: true,
            ..NetConfig::default()
        },
    );
    let a: Vec<TenantId> = (0..2)
        .map(|_| net.add_tenant_with(H1, Box::new(Idle), &[&cfg]).unwrap())
        .collect();
    let b = net.add_tenant_with(H2, Box::new(Idle), &[&cfg]).unwrap();
    let c = net.add_tenant_with(H3, Box::new(Idle), &[&cfg]).unwrap();
    net.run();
    let e1 = end(&mut net, H1, a[0], 0x1000_0000, Access::ALL);
    let e2 = end(&mut net, H1, a[1], 0x2000_0000, Access::ALL);
    let pb = end(&mut net, H2, b, 0x1000_0000, Access::ALL);
    let pc = end(&mut net, H3, c, 0x1000_0000, Access::ALL);
    connect(&mut net, &e1, &pb);
    connect(&mut net, &e2, &pc);
    net.run();
    net.call_as(H3, pc.t, |v| v.post_recv(pc.qp, recv(&pc, 5)))
        .unwrap();
    net.kill_host(H2);
    for k in 0..3 {
        net.call_as(H1, e1.t, |v| v.post_send(e1.qp, send(&e1, k, 100)))
            .unwrap();
    }
    net.call_as(H1, e2.t, |v| v.post_send(e2.qp, send(&e2, 9, 100)))
        .unwrap();
    net.run();
    let w1 = statuses(&mut net, &e1);
    assert_eq!(
        w1,
        vec![
            (0, WcStatus::RetryExceeded),
            (1, WcStatus::Flushed),
            (2, WcStatus::Flushed)
        ]
    );
    let w2 = poll(&mut net, &e2);
    assert_eq!((w2[0].wr_id, w2[0].status), (9, WcStatus::Success));
    assert_eq!(poll(&mut net, &pc)[0].byte_len, 100);
    assert_eq!(state(&mut net, &e1), QpState::Error);
    assert_eq!(state(&mut net, &e2), QpState::Rts);
}

#[test]
fn ud_needs_a_large_enough_global_buffer() {
    let mut h = HostCtx::new(1, FakeNet::default_caps(1)).with_board(rendezvous::board());
    let cfg = DrumConfig {
        global_buffer: braid_units::Bytes(16 << 20),
        ..ud_cfg()
    };
    assert_eq!(cfg.build(&mut h, 1).err().unwrap().key, "global_buffer");
    let json: DrumConfig = serde_json::from_str(r#"{"pipe": "ud"}"#).unwrap();
    assert_eq!(json.pipe, PipeKind::Ud);
    assert!(serde_json::from_str::<DrumConfig>(r#"{"pipe": "uc"}"#).is_err());
}
