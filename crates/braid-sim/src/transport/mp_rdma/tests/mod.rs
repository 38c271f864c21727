use super::*;
use crate::transport::{DataInfo, Feedback, Plan, Reply, RxClass, TimerKind, Transport, TxFx};
use braid_engine::time::US;

mod read;
mod sync;

fn t(cfg: MpRdmaConfig) -> MpRdmaTransport {
    MpRdmaTransport::new(MpRdmaParams {
        cfg,
        mtu: 1000,
        rto: 1_000 * US,
        rnr_delay: 10 * US,
        sport: 50000,
        seed: 7,
        host: 0,
        qpn: 0,
        retry: Default::default(),
    })
}

/// Sends everything the transport allows now (new data always available); returns (psn, vp).
fn drain(m: &mut MpRdmaTransport, now: Time, next: &mut u32) -> Vec<(u32, u16)> {
    let mut out = vec![];
    let mut fx = TxFx::default();
    while let Plan::Send { psn, sport } = m.plan(now, *next, true) {
        m.on_sent(now, psn, 1, 1058, true, &mut fx);
        if psn == *next {
            *next += 1;
        }
        out.push((psn, sport));
    }
    out
}

fn ack(m: &mut MpRdmaTransport, now: Time, cum: u32, sack: u32, vp: u16, ece: bool) -> TxFx {
    let mut fx = TxFx::default();
    m.on_feedback(
        now,
        Feedback::Ack {
            cum,
            sack: Some(sack),
            echo_sport: vp,
            ece,
            retx: false,
            endpoint: 0,
        },
        &mut fx,
    );
    fx
}

#[test]
fn initial_window_goes_to_iw_random_vps() {
    let mut m = t(MpRdmaConfig {
        iw: Some(16),
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    assert_eq!(sent.len(), 16);
    let vps: std::collections::BTreeSet<u16> = sent.iter().map(|x| x.1).collect();
    assert!(vps.len() >= 14, "IW packets on IW random VPs: {vps:?}");
}

#[test]
fn an_ack_clocks_its_packets_onto_its_own_vp() {
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    // Each in-order ACK clocks one packet (and a second when cwnd grows past an integer) onto
    // the VP it echoes.
    for (i, &(psn, vp)) in sent.iter().enumerate() {
        let now = 10 * US + i as Time;
        ack(&mut m, now, psn + 1, psn, vp, false);
        let out = drain(&mut m, now, &mut next);
        assert!(
            !out.is_empty() && out.len() <= 2,
            "one ACK clocks one or two packets: {out:?}"
        );
        assert!(
            out.iter().all(|&(_, v)| v == vp),
            "clocked onto the ACK's VP {vp}: {out:?}"
        );
    }
    // cwnd grew by about 1/cwnd per ACK: 8 ACKs ≈ +1.
    assert!((m.cwnd - 9.0).abs() < 0.1, "cwnd {}", m.cwnd);
}

#[test]
fn ecn_acks_shrink_the_window_by_half_a_packet_and_clock_less() {
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    let mut clocked = 0;
    for &(psn, vp) in &sent {
        ack(&mut m, 10 * US, psn + 1, psn, vp, true);
        clocked += drain(&mut m, 10 * US, &mut next).len();
    }
    assert!(
        (m.cwnd - 4.0).abs() < 1e-9,
        "8 ECN ACKs: 8 - 8/2 = 4, got {}",
        m.cwnd
    );
    assert_eq!(
        clocked, 4,
        "the window shrank by 4, so 4 of 8 ACKs clocked a packet"
    );
}

#[test]
fn an_ack_far_behind_the_highest_sack_prunes_its_path() {
    let mut m = t(MpRdmaConfig {
        iw: Some(64),
        delta: 16,
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    // The fast path delivered PSN 40 first (cum stays 0: 0..39 outstanding).
    let (_, fast) = sent[40];
    ack(&mut m, 10 * US, 0, 40, fast, false);
    let c0 = m.cwnd;
    let before = drain(&mut m, 10 * US, &mut next);
    assert!(before.iter().all(|x| x.1 == fast));
    // PSN 10 arrives late on its own (slow) VP: 10 < snd_ool = 40 − 16. No clock, cwnd − 1.
    let (_, slow) = sent[10];
    ack(&mut m, 20 * US, 0, 10, slow, false);
    assert!(
        drain(&mut m, 20 * US, &mut next).is_empty(),
        "a pruned ACK clocks nothing"
    );
    assert!(m.cwnd < c0, "pruned: cwnd {} < {c0}", m.cwnd);
    assert_eq!(m.stats.ooo_pruned, 1);
    // PSN 30 (30 ≥ 24) is within Δ and clocks normally.
    let (_, mid) = sent[30];
    ack(&mut m, 21 * US, 0, 30, mid, false);
    let out = drain(&mut m, 21 * US, &mut next);
    assert!(!out.is_empty() && out.iter().all(|x| x.1 == mid), "{out:?}");
    // A retransmission's ACK is exempt, however low its SACK.
    let mut fx = TxFx::default();
    m.on_feedback(
        22 * US,
        Feedback::Ack {
            cum: 0,
            sack: Some(1),
            echo_sport: slow,
            ece: false,
            retx: true,
            endpoint: 0,
        },
        &mut fx,
    );
    assert_eq!(m.stats.ooo_pruned, 1);
}

#[test]
fn receiver_drops_beyond_the_bitmap_and_nacks_the_hole() {
    let mut m = t(MpRdmaConfig {
        bitmap: 64,
        ..Default::default()
    });
    let d = |psn| DataInfo {
        psn,
        first: true,
        last: true,
        ce: false,
        sport: 1,
        read_response: false,
        retx: false,
        completion: false,
        sync_first: None,
    };
    let mut out = vec![];
    // PSN 0 is lost; 1..=63 fit in the bitmap.
    for psn in 1..64 {
        assert_eq!(m.on_data(0, d(psn), &mut out), RxClass::Accept);
        m.on_accepted(0, d(psn), &mut out);
    }
    assert!(out.iter().all(|r| matches!(r, Reply::Ack { cum: 0, .. })));
    out.clear();
    assert_eq!(m.on_data(0, d(64), &mut out), RxClass::Drop);
    assert_eq!(m.on_data(0, d(65), &mut out), RxClass::Drop);
    assert_eq!(
        out,
        vec![Reply::Nak { expected: 0 }; 2],
        "each drop NACKs the hole"
    );
    // The retransmission fills the hole: the cumulative point jumps to 64.
    out.clear();
    let mut r = d(0);
    r.retx = true;
    assert_eq!(m.on_data(0, r, &mut out), RxClass::Accept);
    m.on_accepted(0, r, &mut out);
    assert_eq!(
        out,
        vec![Reply::Ack {
            cum: 64,
            sack: Some(0),
            echo_sport: 1,
            ece: false,
            retx: true
        }]
    );
    assert_eq!(m.on_data(0, d(5), &mut out), RxClass::Duplicate);
}

#[test]
fn a_nack_starts_recovery_and_acks_clock_retransmissions() {
    // The NACK itself clocks only the hole (braid's earlier rule; see the next test for
    // `nack_clocks`).
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        nack_clocks: false,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    let mut fx = TxFx::default();
    m.on_feedback(
        5 * US,
        Feedback::Nak {
            expected: 2,
            echo_sport: 1,
        },
        &mut fx,
    );
    assert!(m.in_recovery && m.recovery == 8 && m.snd_una == 2);
    let out = drain(&mut m, 5 * US, &mut next);
    assert_eq!(
        out.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![2],
        "the NACK clocks the first retransmission"
    );
    ack(&mut m, 6 * US, 3, 2, sent[3].1, false);
    let out = drain(&mut m, 6 * US, &mut next);
    assert_eq!(
        out[0].0, 3,
        "in recovery an ACK clocks a retransmission, not new data: {out:?}"
    );
    ack(&mut m, 7 * US, 8, 7, sent[7].1, false);
    assert!(!m.in_recovery, "snd_una reached `recovery`");
}

#[test]
fn a_lost_hole_retransmission_is_resent_by_the_hole_timer() {
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        nack_clocks: false,
        ..Default::default()
    });
    let mut next = 0;
    drain(&mut m, 0, &mut next);
    let mut fx = TxFx::default();
    m.on_feedback(
        5 * US,
        Feedback::Nak {
            expected: 2,
            echo_sport: 1,
        },
        &mut fx,
    );
    // The NACK clocks the hole; its send arms the hole timer.
    let Plan::Send { psn, .. } = m.plan(5 * US, next, true) else {
        panic!("the hole goes first")
    };
    assert_eq!(psn, 2);
    let mut fx = TxFx::default();
    m.on_sent(5 * US, psn, 1, 1058, true, &mut fx);
    let (at, kind, gen) = fx
        .timers
        .iter()
        .copied()
        .find(|x| x.1 == TimerKind::Hole)
        .expect("hole timer armed");
    assert_eq!((kind, gen), (TimerKind::Hole, 2));
    assert!(
        m.credits() == 0 && matches!(m.plan(5 * US, next, true), Plan::Blocked),
        "nothing else may go"
    );
    // Neither the retransmission nor its ACK came back: the timer grants one packet, the hole.
    let mut fx = TxFx::default();
    m.on_timer(at, TimerKind::Hole, gen, 0, &mut fx);
    assert!(fx.kick && m.credits() == 1);
    assert!(matches!(m.plan(at, next, true), Plan::Send { psn: 2, .. }));
    // Once the hole is filled a late timer does nothing.
    let mut m2 = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        nack_clocks: false,
        ..Default::default()
    });
    let mut next2 = 0;
    let sent = drain(&mut m2, 0, &mut next2);
    m2.on_feedback(
        5 * US,
        Feedback::Nak {
            expected: 2,
            echo_sport: 1,
        },
        &mut TxFx::default(),
    );
    drain(&mut m2, 5 * US, &mut next2);
    ack(&mut m2, 6 * US, 8, 2, sent[2].1, false);
    let before = m2.credits();
    let mut fx = TxFx::default();
    m2.on_timer(at, TimerKind::Hole, 2, 0, &mut fx);
    assert_eq!(m2.credits(), before);
}

#[test]
fn burst_control_sends_at_most_two_per_ack_and_the_rest_on_the_timer() {
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    // One ACK acknowledges all 8 (a cumulative jump): 8+ packets allowed, 2 go now.
    let fx = ack(&mut m, 10 * US, 8, 7, sent[7].1, false);
    let out = drain(&mut m, 10 * US, &mut next);
    assert_eq!(out.len(), 2);
    let (at, kind, gen) = fx
        .timers
        .iter()
        .copied()
        .find(|x| x.1 == TimerKind::Burst)
        .expect("burst timer armed");
    assert_eq!(at, 10 * US + m.srtt() / 2);
    let mut fx = TxFx::default();
    m.on_timer(at, kind, gen, 0, &mut fx);
    let out = drain(&mut m, at, &mut next);
    assert!(out.len() >= 6, "the rest leave on the burst timer: {out:?}");
    let vps: std::collections::BTreeSet<u16> = out.iter().map(|x| x.1).collect();
    assert!(vps.len() >= 4, "on random VPs: {vps:?}");
}

#[test]
fn the_burst_timer_waits_while_acks_keep_coming() {
    for after_last_ack in [true, false] {
        let mut m = t(MpRdmaConfig {
            iw: Some(8),
            probe_p: 0.0,
            burst_after_last_ack: after_last_ack,
            ..Default::default()
        });
        let mut next = 0;
        let sent = drain(&mut m, 0, &mut next);
        // A cumulative jump allows 8+ packets: 2 go on the ACK's VP, the timer is armed.
        let fx = ack(&mut m, 10 * US, 4, 3, sent[3].1, false);
        drain(&mut m, 10 * US, &mut next);
        let (at, _, gen) = fx
            .timers
            .iter()
            .copied()
            .find(|x| x.1 == TimerKind::Burst)
            .expect("burst timer armed");
        // An ACK arrives just before the timer; it clocks (up to) two on its own VP.
        let late = at - 1;
        ack(&mut m, late, 5, 4, sent[4].1, false);
        let clocked = drain(&mut m, late, &mut next);
        assert!(clocked.iter().all(|x| x.1 == sent[4].1), "{clocked:?}");
        let mut fx = TxFx::default();
        m.on_timer(at, TimerKind::Burst, gen, 0, &mut fx);
        let fired = drain(&mut m, at, &mut next);
        if after_last_ack {
            // §3.5: "if no subsequent ACKs return": one just did, so nothing goes on random
            // VPs yet; the timer is re-armed srtt/2 after that ACK.
            assert!(
                fired.is_empty() && m.stats.burst_timer_pkts == 0,
                "{fired:?}"
            );
            let (at2, kind, gen2) = fx.timers[0];
            assert_eq!(
                (at2, kind, gen2),
                (late + m.srtt() / 2, TimerKind::Burst, gen)
            );
            // No ACK since: now the rest goes, on random VPs.
            m.on_timer(at2, kind, gen2, 0, &mut TxFx::default());
            let out = drain(&mut m, at2, &mut next);
            assert!(!out.is_empty() && m.stats.burst_timer_pkts == out.len() as u64);
        } else {
            assert!(
                !fired.is_empty() && m.stats.burst_timer_pkts > 0,
                "fixed timer: fires regardless"
            );
        }
    }
}

#[test]
fn a_timeout_lets_the_acks_of_the_resent_packets_clock_again() {
    let mut m = t(MpRdmaConfig {
        iw: Some(16),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    drain(&mut m, 0, &mut next);
    // Nothing comes back (all 16 lost on failed paths) and cwnd has meanwhile fallen to 4:
    // RTO resends from snd_una on 4 random VPs.
    m.cwnd = 4.0;
    let mut fx = TxFx::default();
    m.on_timer(1_000 * US, TimerKind::Rto, 0, 0, &mut fx);
    let resent = drain(&mut m, 1_000 * US, &mut next);
    assert_eq!(
        resent.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    // The resent PSN 1 is acknowledged (PSN 0's copy is lost again): the 16 presumed-lost
    // packets count as gone, so this ACK clocks the next retransmission on its VP. (With
    // inflate reset to 0, awnd = 4 + 1 − 16 < 0: no clock, and the flow waits for the next RTO.)
    let vp = resent[1].1;
    m.on_feedback(
        1_010 * US,
        Feedback::Ack {
            cum: 0,
            sack: Some(1),
            echo_sport: vp,
            ece: false,
            retx: true,
            endpoint: 0,
        },
        &mut TxFx::default(),
    );
    let out = drain(&mut m, 1_010 * US, &mut next);
    assert!(
        !out.is_empty() && out.iter().all(|x| x.1 == vp),
        "clocked on the ACK's VP: {out:?}"
    );
}

#[test]
fn nack_credits_go_back_to_their_vps_and_wait_for_the_hole() {
    // L = 4: PSN 0 is lost, 1..3 fill the bitmap, 4 and 5 are dropped beyond it (NACKs).
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        bitmap: 4,
        delta: 2,
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    drain(&mut m, 0, &mut next);
    let (x, y) = (50001, 50002);
    m.on_feedback(
        5 * US,
        Feedback::Nak {
            expected: 0,
            echo_sport: x,
        },
        &mut TxFx::default(),
    );
    // Its credit is X's: it resends the hole there.
    assert_eq!(drain(&mut m, 5 * US, &mut next), vec![(0, x)]);
    m.on_feedback(
        6 * US,
        Feedback::Nak {
            expected: 0,
            echo_sport: y,
        },
        &mut TxFx::default(),
    );
    // Y's credits (PSNs 4 and 5 have left the network, so two of 8 are free) cannot go:
    // everything below snd_una + L is received or resent. They wait, on Y.
    assert!(drain(&mut m, 6 * US, &mut next).is_empty() && m.credits() == 2);
    // The hole's copy arrives (cum 0 → 4): Y's credits resend PSNs 4, 5 (dropped) on Y.
    let mut fx = TxFx::default();
    m.on_feedback(
        15 * US,
        Feedback::Ack {
            cum: 4,
            sack: Some(0),
            echo_sport: x,
            ece: false,
            retx: true,
            endpoint: 0,
        },
        &mut fx,
    );
    let out = drain(&mut m, 15 * US, &mut next);
    assert_eq!(out[..2], [(4, y), (5, y)], "{out:?}");
    // Under the earlier rule a NACK counts nothing for the window: only the one credit a
    // NACK grants when nothing else is allowed.
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        bitmap: 4,
        delta: 2,
        probe_p: 0.0,
        nack_clocks: false,
        ..Default::default()
    });
    let mut next = 0;
    drain(&mut m, 0, &mut next);
    m.on_feedback(
        5 * US,
        Feedback::Nak {
            expected: 0,
            echo_sport: x,
        },
        &mut TxFx::default(),
    );
    drain(&mut m, 5 * US, &mut next);
    m.on_feedback(
        6 * US,
        Feedback::Nak {
            expected: 0,
            echo_sport: y,
        },
        &mut TxFx::default(),
    );
    assert!(
        m.inflate == 0.0 && m.credits() == 1,
        "inflate {} credits {}",
        m.inflate,
        m.credits()
    );
}

#[test]
fn a_nack_with_nothing_allowed_resends_the_hole_on_its_echoed_vp() {
    let mut m = t(MpRdmaConfig {
        iw: Some(8),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    drain(&mut m, 0, &mut next);
    let mut fx = TxFx::default();
    m.on_feedback(
        5 * US,
        Feedback::Nak {
            expected: 2,
            echo_sport: 50123,
        },
        &mut fx,
    );
    assert_eq!(
        m.plan(5 * US, next, true),
        Plan::Send {
            psn: 2,
            sport: 50123
        }
    );
}

#[test]
fn no_new_data_retransmits_early_only_when_loss_is_suspected() {
    let mut m = t(MpRdmaConfig {
        iw: Some(4),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    assert_eq!(sent.len(), 4);
    // PSN 3 was delivered, 0..2 are outstanding; no new data. Before the suspicion age
    // (srtt + 4·rttvar = 12 + 4·6 = 36 µs) the credit waits; an `Early` timer is armed (since
    // the first packet left with credits waiting).
    ack(&mut m, 10 * US, 0, 3, sent[3].1, false);
    assert_eq!(m.suspicion_age(), 36 * US);
    assert!(m.credits() >= 1 && m.early_armed);
    assert_eq!(
        m.plan(10 * US, 4, false),
        Plan::Blocked,
        "not suspected yet"
    );
    assert_eq!(m.stats.early_retx, 0);
    // PSN 0 is acknowledged meanwhile: PSN 1 becomes the candidate.
    ack(&mut m, 20 * US, 1, 0, sent[0].1, false);
    assert_eq!(m.plan(20 * US, 4, false), Plan::Blocked);
    // At the suspicion age (the ACK of PSN 0 was an RTT sample of 20 µs: srtt 13, rttvar 6.5),
    // the oldest unacknowledged PSN not SACKed goes (PSN 3 never: SACKed).
    let due = m.suspicion_age();
    assert_eq!(due, 39 * US);
    assert_eq!(m.plan(due - 1, 4, false), Plan::Blocked);
    let mut fx = TxFx::default();
    m.on_timer(due, TimerKind::Early, 0, 1, &mut fx);
    assert!(fx.kick);
    let mut got = vec![];
    while let Plan::Send { psn, .. } = m.plan(due, 4, false) {
        m.on_sent(due, psn, 1, 1058, true, &mut fx);
        got.push(psn);
    }
    assert!(
        !got.is_empty() && got[0] == 1 && !got.contains(&3),
        "{got:?}"
    );
    assert_eq!(m.stats.early_retx, got.len() as u64);
    // The unused room of the initial window was never an ACK's: no reduction for it.
    assert_eq!(m.stats.window_reductions, 0);
}

#[test]
fn an_ack_that_opens_the_window_and_finds_no_data_loses_it() {
    let mut m = t(MpRdmaConfig {
        iw: Some(4),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    let sent = drain(&mut m, 0, &mut next);
    // The window is full (4 outstanding, nothing allowed): this ACK opens room, no data.
    let c = m.cwnd;
    ack(&mut m, 10 * US, 1, 0, sent[0].1, false);
    // PSNs 1..3 are not suspected yet: the credit waits for them, then finds nothing.
    assert_eq!(m.plan(10 * US, 4, false), Plan::Blocked);
    ack(&mut m, 11 * US, 4, 3, sent[3].1, false);
    assert_eq!(m.plan(11 * US, 4, false), Plan::Blocked);
    assert_eq!(
        m.stats.window_reductions, 2,
        "each ACK opened the window (it was full)"
    );
    assert!(m.cwnd < c, "use it or lose it: {} -> {}", c, m.cwnd);
    // A message at a time that never fills the window keeps it.
    let mut m = t(MpRdmaConfig {
        iw: Some(16),
        probe_p: 0.0,
        ..Default::default()
    });
    let mut next = 0;
    let mut fx = TxFx::default();
    for round in 0..20u64 {
        let now = round * 20 * US;
        let mut sent = vec![];
        for _ in 0..4 {
            let Plan::Send { psn, sport } = m.plan(now, next, true) else {
                panic!("blocked at round {round}");
            };
            m.on_sent(now, psn, 1, 1058, true, &mut fx);
            next += 1;
            sent.push((psn, sport));
        }
        for (i, &(psn, vp)) in sent.iter().enumerate() {
            let at = now + 10 * US + i as Time;
            ack(&mut m, at, psn + 1, psn, vp, false);
            assert_eq!(m.plan(at, next, false), Plan::Blocked);
        }
    }
    assert_eq!(m.stats.window_reductions, 0);
    assert!(m.cwnd >= 16.0, "cwnd {}", m.cwnd);
}
