//! Selective repeat against its definition: a sender and a receiver RC transport joined by a
//! fixed-delay wire that loses chosen transmissions.

use super::*;
use crate::transport::rc::{RcConfig, RcTransport};
use crate::transport::{DataInfo, Plan, RetryLimits, Transport};
use std::collections::BTreeMap;

const US: Time = 1_000_000;

fn params(cap: u32) -> IrnParams {
    IrnParams {
        cap,
        rto_low: 100 * US,
        rto_high: 320 * US,
        low_threshold: 3,
        rack: false,
        reo_wnd: None,
    }
}

fn rc(irn: Option<IrnParams>) -> RcTransport {
    RcTransport::new(RcConfig {
        reliable: true,
        sport: 49152,
        line_rate: 100_000_000_000,
        mtu: 1000,
        rto: 4000 * US,
        rnr_delay: 10 * US,
        ack_every: 1,
        cc: None,
        retry: RetryLimits::default(),
        read_resources: 16,
        irn,
    })
}

#[derive(Debug)]
enum Ev {
    Data { psn: u32, retx: bool },
    Fb(Feedback),
    Timer(TimerKind, u32),
}

/// What one transfer did.
#[derive(Debug, Default)]
struct Run {
    /// PSNs sent again, in order.
    retransmitted: Vec<u32>,
    /// When each of them was sent again.
    retx_at: Vec<Time>,
    /// Data packets the receiver accepted (placed), in arrival order.
    placed: Vec<u32>,
    /// The receiver's cumulative point at the end.
    delivered: u32,
    timeouts: u64,
    end: Time,
}

fn reply_to_feedback(r: Reply) -> Option<Feedback> {
    Some(match r {
        Reply::Ack {
            cum,
            sack,
            echo_sport,
            ece,
            retx,
        } => Feedback::Ack {
            cum,
            sack,
            echo_sport,
            ece,
            retx,
            endpoint: 0,
        },
        Reply::Nak { expected } => Feedback::Nak {
            expected,
            echo_sport: 0,
        },
        Reply::SackNak { expected, sack } => Feedback::SackNak { expected, sack },
        _ => return None,
    })
}

/// Sends `n` packets, one per microsecond at most, over a wire of `delay` each way; the
/// transmissions in `lose`, (PSN, attempt) with attempt 0 the first, are lost.
fn transfer(irn: Option<IrnParams>, n: u32, delay: Time, lose: &[(u32, u32)]) -> Run {
    transfer_late(irn, n, delay, lose, &[])
}

/// As [`transfer`], and the first transmissions in `late`, (PSN, extra), take `extra` longer
/// on the wire (overtaken by the PSNs after them: reordering without loss).
fn transfer_late(
    irn: Option<IrnParams>,
    n: u32,
    delay: Time,
    lose: &[(u32, u32)],
    late: &[(u32, Time)],
) -> Run {
    let mut s = rc(irn);
    let mut r = rc(irn);
    let mut q: BTreeMap<(Time, u64), Ev> = BTreeMap::new();
    let mut seq = 0u64;
    let mut push = |q: &mut BTreeMap<(Time, u64), Ev>, at: Time, e: Ev| {
        seq += 1;
        q.insert((at, seq), e);
    };
    let mut run = Run::default();
    let (mut next_new, mut now) = (0u32, 0);
    let mut attempts: BTreeMap<u32, u32> = BTreeMap::new();
    let mut next_send = 0;
    while r.expected() < n && now < 1_000_000 * US {
        // The earlier of the next event and the sender's next chance.
        let ev_at = q.keys().next().map(|k| k.0);
        let mut fx = TxFx::default();
        if ev_at.is_some_and(|t| t <= next_send) {
            let ((t, _), ev) = q.pop_first().unwrap();
            now = t;
            match ev {
                Ev::Data { psn, retx } => {
                    let d = DataInfo {
                        psn,
                        first: true,
                        last: psn + 1 == n,
                        ce: false,
                        sport: 1,
                        read_response: false,
                        retx,
                        completion: false,
                        sync_first: None,
                    };
                    let mut out = Vec::new();
                    if r.on_data(now, d, &mut out) == RxClass::Accept {
                        run.placed.push(psn);
                        r.on_accepted(now, d, &mut out);
                    }
                    for rep in out {
                        if let Some(f) = reply_to_feedback(rep) {
                            push(&mut q, now + delay, Ev::Fb(f));
                        }
                    }
                }
                Ev::Fb(f) => s.on_feedback(now, f, &mut fx),
                Ev::Timer(k, g) => {
                    let first = s.acked();
                    s.on_timer(now, k, g, first, &mut fx);
                }
            }
            next_send = next_send.max(now);
        } else {
            now = next_send;
            if let Plan::Send { psn, .. } = s.plan(now, next_new, next_new < n) {
                let retx = psn < next_new;
                if retx {
                    run.retransmitted.push(psn);
                    run.retx_at.push(now);
                } else {
                    next_new += 1;
                }
                s.on_sent(now, psn, 1, 1000, true, &mut fx);
                let a = attempts.entry(psn).or_insert(0);
                if !lose.contains(&(psn, *a)) {
                    let extra = late
                        .iter()
                        .find(|l| l.0 == psn && *a == 0)
                        .map_or(0, |l| l.1);
                    push(&mut q, now + delay + extra, Ev::Data { psn, retx });
                }
                *a += 1;
                next_send = now + US;
            } else {
                // Blocked: wait for the next event.
                match ev_at {
                    Some(t) => next_send = t,
                    None => break,
                }
            }
        }
        for (at, k, g) in fx.timers {
            push(&mut q, at, Ev::Timer(k, g));
        }
    }
    run.delivered = r.expected();
    run.timeouts = s.timeouts();
    run.end = now;
    run
}

#[test]
fn selective_repeat_retransmits_exactly_the_lost_psns() {
    // 40 packets, 5 us each way (about 10 in flight), PSNs 3, 7 and 20 lost once.
    let lose = [(3, 0), (7, 0), (20, 0)];
    let irn = transfer(Some(params(64)), 40, 5 * US, &lose);
    assert_eq!(irn.delivered, 40);
    assert_eq!(irn.retransmitted, vec![3, 7, 20]);
    assert_eq!(irn.timeouts, 0, "NACKs recover them, no timeout");
    // Each PSN placed exactly once: out-of-order arrivals are kept, nothing is sent twice.
    let mut placed = irn.placed.clone();
    placed.sort();
    assert_eq!(placed, (0..40).collect::<Vec<_>>());
    // Go-back-N on the same wire resends what followed each loss too.
    let gbn = transfer(None, 40, 5 * US, &lose);
    assert_eq!(gbn.delivered, 40);
    assert!(
        gbn.retransmitted.len() > 3 * 5,
        "go-back-N resent {:?}",
        gbn.retransmitted
    );
    assert_eq!(&gbn.retransmitted[..2], &[3, 4]);
}

#[test]
fn a_lost_retransmission_and_a_lost_tail_are_recovered_by_the_timeouts() {
    // PSN 5 lost and its retransmission lost again: no NACK reports a retransmission's loss,
    // only a timeout can recover it (RTO_high: the flight is larger than N then).
    let n = 20;
    let run = transfer(Some(params(64)), n, 5 * US, &[(5, 0), (5, 1)]);
    assert_eq!(run.delivered, n);
    assert_eq!(run.retransmitted, vec![5, 5]);
    assert_eq!(run.timeouts, 1);
    // The tail (PSN 19, the last packet) lost: no later packet triggers a NACK.
    let tail = transfer(Some(params(64)), n, 5 * US, &[(19, 0)]);
    assert_eq!(tail.delivered, n);
    assert_eq!(tail.retransmitted, vec![19]);
    assert_eq!(tail.timeouts, 1);
    // One PSN in flight (< N = 3): RTO_low, not RTO_high, after the tail was sent at 19 us.
    assert!(
        tail.end >= 19 * US + 100 * US && tail.end < 19 * US + 320 * US,
        "recovered at {} ps",
        tail.end
    );
}

#[test]
fn the_bdp_cap_bounds_what_is_outstanding() {
    // A cap of 4 PSNs on a wire that could hold 10: the sender waits for ACKs.
    let capped = transfer(Some(params(4)), 40, 5 * US, &[]);
    let open = transfer(Some(params(64)), 40, 5 * US, &[]);
    assert_eq!(capped.delivered, 40);
    assert!(capped.retransmitted.is_empty());
    // 4 packets per 10 us round trip against one per microsecond.
    assert!(capped.end > 2 * open.end, "{} vs {}", capped.end, open.end);
    // Analytic: ten windows of 4, one per 10 us round trip (the first packet's ACK releases
    // the next window); the last window's last packet leaves 3 us after its first and
    // arrives 5 us later.
    assert_eq!(capped.end, 9 * 10 * US + 3 * US + 5 * US);
}

#[test]
fn duplicates_are_ignored_and_acknowledged() {
    let mut r = rc(Some(params(64)));
    let d = |psn: u32| DataInfo {
        psn,
        first: true,
        last: false,
        ce: false,
        sport: 1,
        read_response: false,
        retx: false,
        completion: false,
        sync_first: None,
    };
    let mut out = Vec::new();
    // 0 in order, 2 out of order (NACK with the SACK), 2 again (a duplicate: dropped, ACKed).
    assert_eq!(r.on_data(0, d(0), &mut out), RxClass::Accept);
    r.on_accepted(0, d(0), &mut out);
    assert_eq!(r.on_data(0, d(2), &mut out), RxClass::Accept);
    r.on_accepted(0, d(2), &mut out);
    assert_eq!(
        out.last(),
        Some(&Reply::SackNak {
            expected: 1,
            sack: 2
        })
    );
    out.clear();
    assert_eq!(r.on_data(0, d(2), &mut out), RxClass::Duplicate);
    assert!(matches!(
        out[..],
        [Reply::Ack {
            cum: 1,
            sack: Some(2),
            ..
        }]
    ));
    // 1 fills the hole: the cumulative point moves over 2.
    out.clear();
    assert_eq!(r.on_data(0, d(1), &mut out), RxClass::Accept);
    r.on_accepted(0, d(1), &mut out);
    assert_eq!(r.expected(), 3);
    assert!(matches!(out[..], [Reply::Ack { cum: 3, .. }]));
    // Old PSNs are duplicates too.
    out.clear();
    assert_eq!(r.on_data(0, d(0), &mut out), RxClass::Duplicate);
    // Beyond the bitmap: dropped and NAKed with the expected PSN.
    out.clear();
    assert_eq!(r.on_data(0, d(3 + 64), &mut out), RxClass::Drop);
    assert_eq!(out, vec![Reply::Nak { expected: 3 }]);
}

#[test]
fn the_bitmap_wraps_around_its_ring() {
    let mut b = PsnBitmap::new(64);
    assert_eq!(b.span(), 64);
    b.advance_to(60);
    // 60..=63 at the end of the ring, 64..=70 at its start.
    for p in [61, 63, 64, 70] {
        assert!(b.set(p));
    }
    assert!(!b.set(60 + 64), "one span ahead is outside");
    assert!(!b.get(60) && b.get(61) && !b.get(62) && b.get(64) && b.get(70));
    assert_eq!(b.count_below(124), 4);
    b.set(60);
    b.set(62);
    assert_eq!(b.advance_run(), 65);
    // The slots it passed are clear for the PSNs a span later.
    assert!(!b.get(60 + 64) && !b.get(63 + 64));
    assert!(b.set(64 + 64));
    assert!(b.get(70) && b.get(128));
    b.advance_to(1_000);
    assert_eq!(b.count_below(2_000), 0);
    // Internal PSNs near the top of u32 (far past the 24-bit wire wrap) index the ring alike.
    let mut b = PsnBitmap::new(128);
    b.advance_to((1 << 24) - 3);
    assert!(b.set((1 << 24) + 2));
    assert!(b.get((1 << 24) + 2) && !b.get((1 << 24) + 1));
}

#[test]
fn the_cap_follows_the_link_rate() {
    let c = IrnConfig::default();
    // The paper's 120 KB at 40 Gbit/s: 24 us.
    assert_eq!(c.cap_packets(40_000_000_000, 1000), 120);
    assert_eq!(c.cap_packets(100_000_000_000, 4096), 74);
    let c = IrnConfig {
        bdp: Some(Bytes(8192)),
        ..IrnConfig::default()
    };
    assert_eq!(c.cap_packets(100_000_000_000, 4096), 2);
}

fn rack(cap: u32) -> IrnParams {
    IrnParams {
        rack: true,
        ..params(cap)
    }
}

// RACK (RFC 8985) on the same wire: 5 us each way, one packet per microsecond, so every RTT
// sample is 10 us and reo_wnd = min_RTT / 4 = 2.5 us (§6.2 step 4).

#[test]
fn rack_leaves_a_reordering_shorter_than_its_window_alone() {
    // PSN 5 takes 2 us longer and arrives after 6 and 7: overtaken, not lost. Its SACK-less
    // window runs to 5 + 10 + 2.5 = 17.5 us; its ACK is back at 17 us.
    let late = [(5, 2 * US)];
    let r = transfer_late(Some(rack(64)), 40, 5 * US, &[], &late);
    assert_eq!(r.delivered, 40);
    assert_eq!(r.retransmitted, Vec::<u32>::new());
    assert_eq!(r.timeouts, 0);
    // IRN's rule calls it lost on the first SACK past it and sends it again for nothing.
    let nack = transfer_late(Some(params(64)), 40, 5 * US, &[], &late);
    assert_eq!(nack.retransmitted, vec![5]);
}

#[test]
fn rack_retransmits_a_real_loss_once_after_the_window() {
    let r = transfer(Some(rack(64)), 40, 5 * US, &[(5, 0)]);
    assert_eq!(r.delivered, 40);
    assert_eq!(r.retransmitted, vec![5]);
    assert_eq!(r.timeouts, 0);
    // Sent at 5 us, RACK.rtt 10 us, reo_wnd 2.5 us: lost at 17.5 us, resent in the next
    // sending slot (the sender sends on whole microseconds: 18 us).
    assert_eq!(r.retx_at, vec![18 * US]);
    // IRN's rule resends it on the first SACK, PSN 6's, back at 16 us.
    let nack = transfer(Some(params(64)), 40, 5 * US, &[(5, 0)]);
    assert_eq!(nack.retx_at, vec![16 * US]);
    // Several losses: each resent exactly once, nothing else.
    let lose = [(3, 0), (7, 0), (20, 0)];
    let r = transfer(Some(rack(64)), 40, 5 * US, &lose);
    assert_eq!(r.delivered, 40);
    assert_eq!(r.retransmitted, vec![3, 7, 20]);
    assert_eq!(r.timeouts, 0);
}

#[test]
fn rack_finds_a_lost_retransmission_without_a_timeout_and_the_tail_by_rto_low() {
    // PSN 5 lost twice: the resend (at 18 us) is itself followed by new PSNs whose delivery
    // shows it lost too (RACK orders by send time, RFC 8985 §3.3), so no timeout is needed;
    // IRN's rule needs one (`a_lost_retransmission_and_a_lost_tail_are_recovered_by_the_timeouts`).
    let r = transfer(Some(rack(64)), 40, 5 * US, &[(5, 0), (5, 1)]);
    assert_eq!(r.delivered, 40);
    assert_eq!(r.retransmitted, vec![5, 5]);
    assert_eq!(r.timeouts, 0);
    // The resend left at 18 us; in recovery with no reordering seen the window is 0 (§6.2
    // step 4), so the SACK of the PSN sent after it (at 19 us, back at 29 us) shows it lost.
    assert_eq!(r.retx_at, vec![18 * US, 29 * US]);
    // The tail: no later PSN is delivered, RACK has nothing to go on; IRN's RTO_low (one PSN
    // in flight < N = 3) recovers it.
    let tail = transfer(Some(rack(64)), 20, 5 * US, &[(19, 0)]);
    assert_eq!(tail.delivered, 20);
    assert_eq!(tail.retransmitted, vec![19]);
    assert_eq!(tail.timeouts, 1);
    assert!(tail.end >= 19 * US + 100 * US && tail.end < 19 * US + 320 * US);
}

#[test]
fn rack_grows_its_window_after_a_dsack() {
    // PSN 5 4 us late (beyond the 2.5 us window): resent spuriously; the receiver reports the
    // duplicate (the DSACK) and reo_wnd_mult becomes 2, a 5 us window (§6.2 step 4). PSN 30,
    // 4 us late as well, is then left alone.
    let late = [(5, 4 * US), (30, 4 * US)];
    let r = transfer_late(Some(rack(64)), 60, 5 * US, &[], &late);
    assert_eq!(r.delivered, 60);
    assert_eq!(r.retransmitted, vec![5]);
    // Without the first one, the window stays 2.5 us and PSN 30 goes twice.
    let r = transfer_late(Some(rack(64)), 60, 5 * US, &[], &late[1..]);
    assert_eq!(r.retransmitted, vec![30]);
}
