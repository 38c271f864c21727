//! The agent's software path costs time (`path_delay`): with every connection backlogged and
//! the rates not binding, the scheduler's thread is the bottleneck, and a connection's WRs
//! leave the pool one pass of the round robin apart, (connections) x (convert_ns, qp_map_ns
//! and post_ns summed). So a WR's wait grows with the host's connections, as DRUM's latency
//! does in the paper's Fig. 10.

use super::*;

/// Gaps between the agent's posts of connection `fg`'s WRs on H1, picoseconds.
fn gaps_of(net: &FakeNet, fg: QpNum) -> Vec<u64> {
    let at: Vec<u64> = net
        .calls()
        .iter()
        .filter(|l| l.host == H1 && l.tenant == AGENT)
        .filter_map(|l| match &l.call {
            Call::PostSend(_, w) if (w.wr_id >> 32) as u32 == fg => Some(l.at),
            _ => None,
        })
        .collect();
    at.windows(2).map(|w| w[1] - w[0]).collect()
}

/// `n` connections (mux_ratio 5: shared QPs of 5 and one of the rest), 60 WRITEs each posted
/// at once; the gaps of connection `which`'s posts, and the agent's counters.
fn pass(n: u32, which: usize, path_delay: bool) -> (Vec<u64>, f64, f64, f64) {
    let cfg = DrumConfig {
        // Rates far above what the thread can do: the thread binds, not the tokens.
        wqe_rate: 1e9,
        cqe_rate: 1e9,
        pipe_depth: 64,
        // Decisions only when connections come or go.
        solve_interval: braid_units::Duration(1_000_000_000_000),
        path_delay,
        ..DrumConfig::default()
    };
    let (mut net, ea, eb) = setup(&cfg, n as usize);
    for (i, e) in ea.iter().enumerate() {
        for k in 0..60 {
            net.call_as(H1, e.t, |v| {
                v.post_send(e.qp, write(e, &eb[i], k, 64 * k, 64))
            })
            .unwrap();
        }
    }
    net.run();
    for e in &ea {
        assert_eq!(poll(&mut net, e).len(), 60);
    }
    (
        gaps_of(&net, ea[which].qp),
        counter(&net, H1, AGENT, "busy_ns_scheduler"),
        counter(&net, H1, AGENT, "wr_posted"),
        counter(&net, H1, AGENT, "cqe_delivered"),
    )
}

#[test]
fn a_connections_wrs_leave_one_pass_of_the_scheduler_apart() {
    let d = DrumConfig::default();
    let per_wr = d.convert_ns + d.qp_map_ns + d.post_ns; // 165 ns
    for n in [10u32, 40] {
        let (gaps, busy, posted, _) = pass(n, 0, true);
        // Steady state: past the first pass, before the connections start running dry.
        let mid = &gaps[5..gaps.len() - 5];
        let want = n as f64 * per_wr * 1e3;
        for &g in mid {
            assert!(
                (g as f64 - want).abs() <= 0.02 * want,
                "n = {n}: gap {g} ps, one pass of {n} WRs at {per_wr} ns is {want} ps ({mid:?})"
            );
        }
        // The thread was busy for every WR it posted and the decisions' qp_sche.
        assert!(busy >= posted * per_wr, "{busy} < {posted} x {per_wr}");
    }
    // Without the delay the same WRs leave as the tokens and the shared QPs' completions
    // allow, far more often than once a pass.
    let (gaps, busy, _, _) = pass(40, 0, false);
    let mid = &gaps[5..gaps.len() - 5];
    let mean = mid.iter().sum::<u64>() as f64 / mid.len() as f64;
    assert!(mean < 0.25 * 40.0 * per_wr * 1e3, "{mean} ps: {mid:?}");
    assert_eq!(busy, 0.0);
}

/// The round robin is over connections, not shared QPs: a connection alone on its shared QP
/// (the 11th, with mux_ratio 5) still waits for the other ten, not for the other two QPs.
#[test]
fn a_connection_alone_on_its_shared_qp_waits_for_every_other_connection() {
    let d = DrumConfig::default();
    let per_wr = d.convert_ns + d.qp_map_ns + d.post_ns;
    let (gaps, _, _, _) = pass(11, 10, true);
    let mid = &gaps[5..gaps.len() - 5];
    let want = 11.0 * per_wr * 1e3;
    for &g in mid {
        assert!(
            (g as f64 - want).abs() <= 0.02 * want,
            "gap {g} ps, a pass over 11 connections is {want} ps ({mid:?})"
        );
    }
}

#[test]
fn the_poller_hands_out_a_completion_per_turn_of_its_thread() {
    let (_, _, _, delivered) = pass(10, 0, true);
    assert_eq!(delivered, 600.0);
    // The scheduler free and the WRs all in flight at once, so that their completions reach
    // the shared CQ together; the poller takes 1 µs a completion.
    let cfg = DrumConfig {
        wqe_rate: 1e9,
        cqe_rate: 1e9,
        pipe_depth: 128,
        burst: 128,
        convert_ns: 0.0,
        qp_map_ns: 0.0,
        post_ns: 0.0,
        poll_cqe_ns: 1000.0,
        path_delay: true,
        ..DrumConfig::default()
    };
    let (mut net, ea, eb) = setup(&cfg, 1);
    for k in 0..100 {
        net.call_as(H1, ea[0].t, |v| {
            v.post_send(ea[0].qp, write(&ea[0], &eb[0], k, 64 * k, 64))
        })
        .unwrap();
    }
    // When each completion reached the tenant, to 10 ns.
    let mut seen: Vec<u64> = Vec::new();
    while seen.len() < 100 && net.now() < 1_000_000_000 {
        let t = net.now() + 10_000;
        net.run_until(t);
        seen.extend(poll(&mut net, &ea[0]).iter().map(|_| t));
    }
    assert_eq!(seen.len(), 100);
    let busy = counter(&net, H1, AGENT, "busy_ns_poller");
    let per_cqe = cfg.poll_cqe_ns + cfg.convert_ns;
    assert!(
        (busy - 100.0 * per_cqe).abs() < 1e-6,
        "{busy} ns for 100 completions at {per_cqe} ns"
    );
    // One completion per turn of the poller's thread: never more than one per 10 ns step.
    let per_step = |t: u64| seen.iter().filter(|&&s| s == t).count();
    assert!(
        seen.iter().all(|&t| per_step(t) <= 1),
        "several completions in one 10 ns step: {seen:?}"
    );
    let span = (seen[99] - seen[0]) as f64;
    assert!(span >= 99.0 * per_cqe * 1e3 - 10_000.0, "{span} ps for 100");
}
