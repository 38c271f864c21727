//! Unit tests of synchronise (§3.4).

use super::*;

#[test]
fn a_sync_message_leaves_delta_t_after_its_predecessors_and_keeps_its_clock() {
    // Δ = 32, α = 1.0 (defaults), srtt = initial_rtt = 12 µs (no sample taken below).
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    m.sync_at(8);
    // An ACK for PSN 3 (not the timed PSN 0: no RTT sample) clocks a packet onto its VP.
    ack(&mut m, US, 0, 3, sent[3].1, false);
    m.cwnd = 64.0;
    // Δt = α·Δ / (cwnd / RTT) = 32 / (64 / 12 µs) = 6 µs after the last predecessor (t = 0).
    assert_eq!(m.plan(US, 8, true), Plan::Wait(6 * US));
    assert_eq!(m.plan(5 * US, 8, true), Plan::Wait(6 * US));
    assert!(
        m.credits() >= 1,
        "the clock is kept for the held message, not lost"
    );
    assert_eq!(m.stats.window_reductions + m.stats.early_retx, 0);
    let Plan::Send { psn, sport } = m.plan(6 * US, 8, true) else {
        panic!("Δt has passed")
    };
    assert_eq!(
        (psn, sport),
        (8, sent[3].1),
        "on the VP of the ACK that clocked it"
    );
    m.on_sent(6 * US, 8, 1, 1058, true, &mut TxFx::default());
    let c: std::collections::BTreeMap<_, _> = m.counters().into_iter().collect();
    assert_eq!(
        (c["sync_sent"], c["sync_held_us"]),
        (1.0, 5.0),
        "held from 1 µs (ready) to 6 µs"
    );
    // The rest of the message is not held.
    assert!(matches!(
        m.plan(6 * US, 9, true),
        Plan::Send { psn: 9, .. } | Plan::Blocked
    ));
}

#[test]
fn with_alpha_zero_or_acknowledged_predecessors_a_sync_message_goes_at_once() {
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        alpha: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    m.sync_at(8);
    ack(&mut m, US, 0, 3, sent[3].1, false);
    assert!(
        matches!(m.plan(US, 8, true), Plan::Send { psn: 8, .. }),
        "α = 0: Δt = 0"
    );
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    m.sync_at(8);
    ack(&mut m, US, 8, 7, sent[7].1, false);
    assert!(
        matches!(m.plan(US, 8, true), Plan::Send { psn: 8, .. }),
        "nothing earlier is outstanding"
    );
}

#[test]
fn stop_wait_sends_a_sync_message_only_when_everything_before_is_acknowledged() {
    use crate::transport::config::SyncMode;
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        sync_mode: SyncMode::StopWait,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    m.sync_at(8);
    // 0..6 acknowledged at 10 µs; PSN 7 is lost. Held long past Δt (6 µs at cwnd 64).
    ack(&mut m, 10 * US, 7, 6, sent[6].1, false);
    m.cwnd = 64.0;
    // Nothing goes beyond the predecessors, so no NACK will report PSN 7: 2 srtt after the
    // last progress (10 µs) the oldest unacknowledged packet is probed.
    assert_eq!(m.plan(20 * US, 8, true), Plan::Wait(34 * US));
    let Plan::Send { psn, .. } = m.plan(34 * US, 8, true) else {
        panic!("tail-loss probe")
    };
    assert_eq!(psn, 7);
    m.on_sent(34 * US, 7, 1, 1058, true, &mut TxFx::default());
    assert_eq!(m.sync.stats.probes, 1);
    assert_eq!(
        m.plan(35 * US, 8, true),
        Plan::Wait(58 * US),
        "next probe 2 srtt after it"
    );
    // Its ACK completes the predecessors: the synchronise message goes.
    let mut fx = TxFx::default();
    m.on_feedback(
        40 * US,
        Feedback::Ack {
            cum: 8,
            sack: Some(7),
            echo_sport: sent[0].1,
            ece: false,
            retx: true,
            endpoint: 0,
        },
        &mut fx,
    );
    assert!(fx.kick);
    assert!(matches!(
        m.plan(40 * US, 8, true),
        Plan::Send { psn: 8, .. }
    ));
    // With delta = 0 (no OOO bound) the delay mode falls back to the same wait.
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        delta: 0,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    m.sync_at(8);
    ack(&mut m, 10 * US, 7, 6, sent[6].1, false);
    assert_eq!(m.plan(20 * US, 8, true), Plan::Wait(34 * US));
}

#[test]
fn an_early_sync_packet_is_dropped_and_nacked_and_accepted_once_earlier_messages_complete() {
    let mut m = t(MpRdmaConfig {
        bitmap: 64,
        ..Default::default()
    });
    // Message A = PSNs 0..=4, synchronise message B = 5..=6.
    let d = |psn: u32| DataInfo {
        psn,
        first: psn == 0 || psn == 5,
        last: psn == 4 || psn == 6,
        ce: false,
        sport: 9,
        read_response: false,
        retx: false,
        completion: false,
        sync_first: (psn >= 5).then_some(5),
    };
    let mut out = vec![];
    for psn in [0, 1, 2, 4] {
        assert_eq!(m.on_data(0, d(psn), &mut out), RxClass::Accept);
        m.on_accepted(0, d(psn), &mut out);
    }
    out.clear();
    // PSN 3 of A is missing: B must not touch memory.
    assert_eq!(m.on_data(0, d(5), &mut out), RxClass::Drop);
    assert_eq!(m.on_data(0, d(6), &mut out), RxClass::Drop);
    assert_eq!(
        out,
        vec![
            Reply::SyncNak {
                expected: 3,
                psn: 5
            },
            Reply::SyncNak {
                expected: 3,
                psn: 6
            }
        ]
    );
    assert_eq!(
        (m.stats.sync_early, m.stats.sync_dropped),
        (1, 2),
        "one message early, two packets dropped"
    );
    // A completes; B's resent packets are placed.
    for psn in [3, 6, 5] {
        assert_eq!(m.on_data(0, d(psn), &mut out), RxClass::Accept, "PSN {psn}");
        m.on_accepted(0, d(psn), &mut out);
    }
    assert_eq!(m.rcv_nxt, 7);
    assert_eq!(m.stats.sync_early, 1);
}

#[test]
fn a_sync_nack_recovers_the_hole_then_resends_the_dropped_packets() {
    let mut m = t(MpRdmaConfig {
        iw: Some(16),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    drain(&mut m, 0, &mut next);
    // PSNs 10..=15 are a synchronise message; the receiver waits for PSN 3 and dropped 10, 11.
    let mut fx = TxFx::default();
    m.on_feedback(
        20 * US,
        Feedback::SyncNak {
            expected: 3,
            psn: 10,
            echo_sport: 5,
        },
        &mut fx,
    );
    m.on_feedback(
        20 * US,
        Feedback::SyncNak {
            expected: 3,
            psn: 11,
            echo_sport: 5,
        },
        &mut fx,
    );
    assert!(fx.kick && m.in_recovery);
    let Plan::Send { psn, .. } = m.plan(20 * US, 16, true) else {
        panic!("the hole goes first")
    };
    assert_eq!(psn, 3);
    m.on_sent(20 * US, 3, 1, 1058, true, &mut TxFx::default());
    // The hole's ACK: the receiver now waits for 10 (the first dropped synchronise packet).
    let mut fx = TxFx::default();
    m.on_feedback(
        30 * US,
        Feedback::Ack {
            cum: 10,
            sack: Some(3),
            echo_sport: 7,
            ece: false,
            retx: true,
            endpoint: 0,
        },
        &mut fx,
    );
    let mut got = vec![];
    while let Plan::Send { psn, .. } = m.plan(30 * US, 16, true) {
        m.on_sent(30 * US, psn, 1, 1058, true, &mut TxFx::default());
        got.push(psn);
        if got.len() == 3 {
            break;
        }
    }
    assert_eq!(
        &got[..2],
        &[10, 11],
        "each dropped packet resent once: {got:?}"
    );
    assert_eq!(m.sync.stats.nacks, 2);
}
