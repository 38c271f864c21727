//! A shared QP that fails (a dead peer, retries exhausted under loss): every connection on it
//! sees it, in order, and connections on other shared QPs do not (`drum/fail.rs`).

use super::*;

#[test]
fn a_dead_peer_fails_every_connection_of_the_shared_qp_in_order() {
    let cfg = DrumConfig {
        pipe_depth: 4,
        ..DrumConfig::default()
    };
    let (mut net, ea, _eb) = setup(&cfg, 3);
    assert_eq!(pipes(&net, H1).len(), 1, "one shared QP");
    // Connection 2 only waits for a message; 0 and 1 have WRITEs on the pipe and in the pool.
    net.call_as(H1, ea[2].t, |v| v.post_recv(ea[2].qp, recv(&ea[2], 77)))
        .unwrap();
    net.kill_host(H2);
    for k in 0..3 {
        for e in &ea[..2] {
            net.call_as(H1, e.t, |v| v.post_send(e.qp, write(e, e, 10 + k, 0, 64)))
                .unwrap();
        }
    }
    net.run();
    // The first WR on the pipe was connection 0's: it reports the transport's error, as its
    // own RC QP would; the rest of its WRs and all of connection 1's are flushed, in order.
    let w0 = statuses(&mut net, &ea[0]);
    assert_eq!(
        w0,
        vec![
            (10, WcStatus::RetryExceeded),
            (11, WcStatus::Flushed),
            (12, WcStatus::Flushed)
        ]
    );
    let w1 = statuses(&mut net, &ea[1]);
    assert_eq!(
        w1,
        vec![
            (10, WcStatus::Flushed),
            (11, WcStatus::Flushed),
            (12, WcStatus::Flushed)
        ]
    );
    // The idle connection's receive is flushed, and every connection is in Error.
    let w2 = poll(&mut net, &ea[2]);
    assert_eq!(w2.len(), 1);
    assert_eq!((w2[0].wr_id, w2[0].status), (77, WcStatus::Flushed));
    for e in &ea {
        assert_eq!(state(&mut net, e), QpState::Error);
    }
    // A later post completes flushed at once, as on a QP in Error.
    net.call_as(H1, ea[2].t, |v| {
        v.post_send(ea[2].qp, write(&ea[2], &ea[2], 5, 0, 8))
    })
    .unwrap();
    net.run();
    let w = poll(&mut net, &ea[2]);
    assert_eq!((w[0].wr_id, w[0].status), (5, WcStatus::Flushed));
    assert_eq!(counter(&net, H1, AGENT, "pipes_failed"), 1.0);
    // Every completion exactly once: nothing left behind.
    for e in &ea {
        assert!(poll(&mut net, e).is_empty());
    }
}

#[test]
fn a_loss_burst_that_exhausts_retries_fails_one_shared_qp_and_spares_the_other() {
    // Two connections per shared QP: 0 and 1 share pipe 0, 2 has pipe 1 to itself.
    let cfg = DrumConfig {
        mux_ratio: 2,
        ..DrumConfig::default()
    };
    let (mut net, ea, eb) = setup(&cfg, 3);
    let p = pipes(&net, H1);
    assert_eq!(p.len(), 2);
    // Every packet pipe 0 sends from now on is lost (more than retry_cnt = 7 retries).
    net.lose_packets(H1, p[0], 1000);
    for k in 0..2 {
        for i in 0..3 {
            net.call_as(H1, ea[i].t, |v| {
                v.post_send(ea[i].qp, write(&ea[i], &eb[i], k, 0, 32))
            })
            .unwrap();
        }
    }
    net.run();
    let st = |w: &[WorkCompletion]| w.iter().map(|w| w.status).collect::<Vec<_>>();
    let w0 = poll(&mut net, &ea[0]);
    let w1 = poll(&mut net, &ea[1]);
    let w2 = poll(&mut net, &ea[2]);
    assert_eq!(st(&w0), vec![WcStatus::RetryExceeded, WcStatus::Flushed]);
    assert_eq!(st(&w1), vec![WcStatus::Flushed, WcStatus::Flushed]);
    assert_eq!(st(&w2), vec![WcStatus::Success, WcStatus::Success]);
    assert_eq!(state(&mut net, &ea[0]), QpState::Error);
    assert_eq!(state(&mut net, &ea[1]), QpState::Error);
    assert_eq!(state(&mut net, &ea[2]), QpState::Rts);
    // The peer's end of pipe 0 learns when its own sends find our QP in Error: its connections
    // fail too (their WRs time out), while connection 2's peer still talks.
    for i in [0, 2] {
        net.call_as(H2, eb[i].t, |v| {
            v.post_send(eb[i].qp, write(&eb[i], &ea[i], 9, 0, 8))
        })
        .unwrap();
    }
    net.run();
    let b0 = poll(&mut net, &eb[0]);
    assert_eq!(b0.len(), 1);
    assert_ne!(b0[0].status, WcStatus::Success);
    assert_eq!(state(&mut net, &eb[0]), QpState::Error);
    assert_eq!(state(&mut net, &eb[1]), QpState::Error);
    assert_eq!(st(&poll(&mut net, &eb[2])), vec![WcStatus::Success]);
    assert_eq!(state(&mut net, &eb[2]), QpState::Rts);
}

#[test]
fn a_connection_that_joins_a_failed_shared_qp_is_in_error() {
    let (mut net, a, b) = net_of(&DrumConfig::default(), 2);
    let e0 = end(&mut net, H1, a[0], 0x1000_0000, Access::ALL);
    let p0 = end(&mut net, H2, b[0], 0x1000_0000, Access::ALL);
    connect(&mut net, &e0, &p0);
    net.run();
    net.kill_host(H2);
    net.call_as(H1, e0.t, |v| v.post_send(e0.qp, write(&e0, &p0, 1, 0, 8)))
        .unwrap();
    net.run();
    assert_eq!(poll(&mut net, &e0)[0].status, WcStatus::RetryExceeded);
    // A second connection to the dead host lands on the same (failed) shared QP.
    let e1 = end(&mut net, H1, a[1], 0x2000_0000, Access::ALL);
    net.call_as(H1, e1.t, |v| {
        v.connect_qp(
            e1.qp,
            RemoteQp {
                host: H2,
                qpn: p0.qp + 1,
                udp_sport: None,
            },
        )
    })
    .unwrap();
    net.run();
    assert_eq!(state(&mut net, &e1), QpState::Error);
    net.call_as(H1, e1.t, |v| v.post_send(e1.qp, write(&e1, &p0, 2, 0, 8)))
        .unwrap();
    net.run();
    assert_eq!(poll(&mut net, &e1)[0].status, WcStatus::Flushed);
}

#[test]
fn a_region_deregistered_while_a_write_waits_in_the_pool_is_not_written() {
    // One WR in flight at a time: the second waits in the pool while the peer deregisters.
    let cfg = DrumConfig {
        pipe_depth: 1,
        ..DrumConfig::default()
    };
    let (mut net, a, b) = net_of(&cfg, 1);
    let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL.tracked(), false);
    let (ea, eb) = (ea[0], eb[0]);
    net.call_as(H1, ea.t, |v| v.write_local(ea.mr.addr, &[7u8; 64]))
        .unwrap();
    net.call_as(H1, ea.t, |v| v.post_send(ea.qp, write(&ea, &eb, 1, 0, 64)))
        .unwrap();
    // The agent puts it on the shared QP; the next one waits in the pool (depth 1).
    let t0 = net.now();
    net.run_until(t0 + 1000);
    net.call_as(H1, ea.t, |v| v.post_send(ea.qp, write(&ea, &eb, 2, 64, 64)))
        .unwrap();
    net.call_as(H2, eb.t, |v| v.dereg_mr(&eb.mr)).unwrap();
    net.run();
    let w = statuses(&mut net, &ea);
    // The first WRITE was already on the shared QP; the second is refused as the peer's NIC
    // would refuse it on the connection's own QP, and the connection goes to Error.
    assert_eq!(
        w,
        vec![(1, WcStatus::Success), (2, WcStatus::RemoteAccessError)]
    );
    assert_eq!(state(&mut net, &ea), QpState::Error);
    // The second never reached the NIC as a WRITE: a zero-byte control message went in its
    // place, and the peer's end went to Error, as the responder's RC QP would.
    let sends = agent_sends(&net, H1);
    assert_eq!(sends.len(), 2);
    assert!(matches!(sends[1].1.op, SendOp::SendWithImm(_)) && sends[1].1.is_empty());
    assert_eq!(state(&mut net, &eb), QpState::Error);
}
