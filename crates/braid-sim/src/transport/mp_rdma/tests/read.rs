//! The requester's side of MP-RDMA READ (`read.rs`): a READ's PSNs are acknowledged by its
//! responses only, and a missing response is asked for again from its PSN, with every later
//! READ, in order on one VP (issue 27 §1: the re-requests named the next READ's PSN, never the
//! missing one).

use super::*;

const READ_PSNS: u32 = 4;

/// Posts READs of `READ_PSNS` responses each while the window allows (as the NIC does: the
/// transport hears of a new READ before its `on_sent`); returns their first PSNs.
fn post_reads(m: &mut MpRdmaTransport, now: Time, next: &mut u32, n: usize) -> Vec<u32> {
    let mut fx = TxFx::default();
    let mut firsts = vec![];
    while firsts.len() < n {
        let Plan::Send { psn, .. } = m.plan(now, *next, true) else {
            break;
        };
        assert_eq!(psn, *next, "new READs only");
        m.on_read_sent(psn, READ_PSNS);
        m.on_sent(now, psn, READ_PSNS, 64, true, &mut fx);
        *next += READ_PSNS;
        firsts.push(psn);
    }
    firsts
}

/// The NIC hands the transport each READ response that arrives in order as an ACK of its PSN.
fn response(m: &mut MpRdmaTransport, now: Time, psn: u32, vp: u16) {
    ack(m, now, psn + 1, psn, vp, false);
}

/// What `plan` sends now with no new data: (psn, vp) of each packet, each confirmed as the NIC
/// would, with the PSNs a READ request from `psn` covers (to the end of its READ).
fn resends(m: &mut MpRdmaTransport, now: Time, next: u32) -> Vec<(u32, u16)> {
    let mut fx = TxFx::default();
    let mut out = vec![];
    while let Plan::Send { psn, sport } = m.plan(now, next, false) {
        let end = (psn / READ_PSNS + 1) * READ_PSNS;
        m.on_sent(now, psn, end - psn, 64, true, &mut fx);
        out.push((psn, sport));
        assert!(out.len() < 64, "plan keeps sending: {out:?}");
    }
    out
}

fn reads_transport() -> MpRdmaTransport {
    t(MpRdmaConfig {
        iw: Some(16),
        probe_p: 0.0,
        ..Default::default()
    })
}

/// The responder NAKs an early READ request with the PSN of the request it waits for; that
/// says nothing about the responses of the READs before it, so the cumulative point stays at
/// the first missing response, and the READ the responder waits for is asked for again with
/// every later one (the early request was dropped), in order, on one VP.
#[test]
fn a_nak_of_an_early_read_request_acknowledges_no_response() {
    let mut m = reads_transport();
    let mut next = 0;
    let firsts = post_reads(&mut m, 0, &mut next, 4);
    assert_eq!(firsts, vec![0, 4, 8, 12]);
    response(&mut m, 10 * US, 0, 900);
    response(&mut m, 10 * US + 1, 1, 900);
    // Requests 0 and 4 were served (rcv_nxt 8); 12 came early and was dropped.
    let mut fx = TxFx::default();
    m.on_feedback(
        11 * US,
        Feedback::Nak {
            expected: 8,
            echo_sport: 901,
        },
        &mut fx,
    );
    assert_eq!(
        m.acked(),
        2,
        "responses 2..8 have not arrived: the NAK acknowledges none of them"
    );
    let out = resends(&mut m, 11 * US, next);
    assert_eq!(
        out.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![8, 12],
        "READ 8 and the later one again, nothing else: {out:?}"
    );
    assert!(out.iter().all(|x| x.1 == out[0].1), "on one VP: {out:?}");
}

/// A response is lost (a later one arrives): the READ is asked for again from the missing PSN,
/// then every later READ (the responder replaces its answers from that PSN on), once; the
/// responses that then arrive in order are progress, not new holes.
#[test]
fn a_missing_response_is_asked_for_once_from_its_psn_then_each_later_read() {
    let mut m = reads_transport();
    let mut next = 0;
    post_reads(&mut m, 0, &mut next, 3);
    response(&mut m, 10 * US, 0, 900);
    // Response 1 lost; 2 arrived: the NIC asks again from 1.
    let mut fx = TxFx::default();
    m.resend_from(11 * US, 1, &mut fx);
    assert!(fx.kick);
    let out = resends(&mut m, 11 * US, next);
    assert_eq!(
        out.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![1, 4, 8],
        "from the missing PSN, then each later READ from its start: {out:?}"
    );
    assert!(out.iter().all(|x| x.1 == out[0].1), "on one VP: {out:?}");
    // The answers come back in order: none makes the requester ask again.
    for psn in 1..next {
        let now = 20 * US + psn as Time * US;
        response(&mut m, now, psn, 900);
        assert_eq!(m.acked(), psn + 1);
        let out = resends(&mut m, now, next);
        assert!(
            out.is_empty(),
            "response {psn} arrived in order: nothing to ask again: {out:?}"
        );
    }
}

/// A timeout with READs unanswered asks for them again from the first missing response, each
/// READ once, from its first missing PSN, never a PSN in the middle of a READ.
#[test]
fn a_timeout_asks_again_for_each_unanswered_read_from_its_first_missing_response() {
    let mut m = reads_transport();
    let mut next = 0;
    post_reads(&mut m, 0, &mut next, 3);
    response(&mut m, 10 * US, 0, 900);
    response(&mut m, 10 * US + 1, 1, 900);
    let mut fx = TxFx::default();
    m.on_timer(2_000 * US, TimerKind::Rto, 0, 2, &mut fx);
    assert_eq!(m.timeouts(), 1);
    let out = resends(&mut m, 2_000 * US, next);
    assert_eq!(
        out.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![2, 4, 8],
        "each READ once, from its first missing response: {out:?}"
    );
    assert!(out.iter().all(|x| x.1 == out[0].1), "on one VP: {out:?}");
}

/// With no new data, early retransmission (FUSO) leaves READ PSNs alone: their responses are
/// still coming in order on one path, and a re-request in the middle of a READ restarts it.
#[test]
fn early_retransmission_never_asks_again_for_a_read() {
    let mut m = reads_transport();
    let mut next = 0;
    post_reads(&mut m, 0, &mut next, 2);
    for psn in 0..3 {
        response(&mut m, 10 * US + psn as Time, psn, 900);
    }
    // Long past any loss-suspicion age, with credits from the ACKs waiting.
    let out = resends(&mut m, 500 * US, next);
    assert!(out.is_empty(), "no READ PSN resent early: {out:?}");
    assert_eq!(m.stats.early_retx, 0);
}

/// The READ re-request timer (`read.rs`): the last response of the last READ is lost, so no
/// later response reveals the gap. The READ is asked for again from that response once no
/// response came for the loss-suspicion age (srtt + 4·rttvar, as early retransmission),
/// long before the RTO; while responses keep coming the timer asks for nothing.
#[test]
fn a_lost_last_response_is_asked_for_again_after_the_suspicion_age_not_the_rto() {
    let mut m = reads_transport();
    let mut next = 0;
    post_reads(&mut m, 0, &mut next, 2);
    let mut fx = TxFx::default();
    // Responses 0..7 arrive, one per µs; 7 (the last of the second READ) is lost.
    for psn in 0..7 {
        let now = 10 * US + psn as Time * US;
        ack(&mut m, now, psn + 1, psn, 900, false);
    }
    let last = 16 * US;
    let age = m.suspicion_age();
    assert!(age < m.p.rto / 4, "age {age} ps against RTO {} ps", m.p.rto);
    // A timer fired before the age has passed since the last response asks for nothing.
    m.on_timer(last + age - 1, TimerKind::ReadRetry, 0, 7, &mut fx);
    assert!(
        resends(&mut m, last + age - 1, next).is_empty(),
        "responses came within the age"
    );
    assert!(
        fx.timers.iter().any(|x| x.1 == TimerKind::ReadRetry),
        "it waits again: {:?}",
        fx.timers
    );
    let mut fx = TxFx::default();
    m.on_timer(last + age, TimerKind::ReadRetry, 0, 7, &mut fx);
    assert!(fx.kick);
    assert_eq!(m.stats.read_timer, 1);
    assert_eq!(m.timeouts(), 0, "no RTO");
    let out = resends(&mut m, last + age, next);
    assert_eq!(
        out.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![7],
        "the missing response only (the READ from its first missing PSN): {out:?}"
    );
    // Its answer arrives: nothing is outstanding, no timer is armed again.
    let mut fx = TxFx::default();
    m.on_feedback(
        last + age + 5 * US,
        Feedback::Ack {
            cum: 8,
            sack: Some(7),
            echo_sport: 900,
            ece: false,
            retx: true,
            endpoint: 0,
        },
        &mut fx,
    );
    assert_eq!(m.acked(), 8);
    assert!(
        !fx.timers.iter().any(|x| x.1 == TimerKind::ReadRetry),
        "{:?}",
        fx.timers
    );
}

/// With `early_retx = false` (the paper's RTO as the only tail-loss recovery) the timer is
/// never armed.
#[test]
fn without_early_retransmission_no_read_timer_is_armed() {
    let mut m = t(MpRdmaConfig {
        iw: Some(16),
        probe_p: 0.0,
        early_retx: false,
        ..Default::default()
    });
    let mut fx = TxFx::default();
    let Plan::Send { psn, .. } = m.plan(0, 0, true) else {
        panic!("a READ goes out")
    };
    m.on_read_sent(psn, READ_PSNS);
    m.on_sent(0, psn, READ_PSNS, 64, true, &mut fx);
    assert!(
        !fx.timers.iter().any(|x| x.1 == TimerKind::ReadRetry),
        "{:?}",
        fx.timers
    );
}
