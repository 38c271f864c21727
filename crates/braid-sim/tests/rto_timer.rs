//! The retransmission timer RC (go-back-N) and MP-RDMA share (`transport/rto.rs`): started once
//! while running, deferred by progress, stopped when nothing is outstanding, and fatal at the
//! (`retry_cnt` + 1)-th timeout in a row (ibverbs' `retry_cnt`, IBA 9.7.5.2.8).

use braid_engine::Time;
use braid_sim::transport::rto::{RtoFired, RtoTimer};
use braid_sim::transport::{Fatal, RetryBudget, RetryLimits, TimerKind, TxFx};

const RTO: Time = 1_000;

fn budget(retry_cnt: u8) -> RetryBudget {
    RetryBudget::new(RetryLimits {
        retry_cnt,
        rnr_retry: 7,
    })
}

#[test]
fn starts_once_while_running() {
    let (mut t, mut lp, mut fx) = (RtoTimer::default(), 0, TxFx::default());
    t.start(10, RTO, &mut lp, &mut fx);
    t.start(20, RTO, &mut lp, &mut fx);
    assert_eq!(fx.timers, vec![(10 + RTO, TimerKind::Rto, 0)]);
    assert_eq!(lp, 10, "a second packet does not move the deadline");
}

#[test]
fn progress_defers_and_nothing_outstanding_stops() {
    let (mut t, mut lp, mut b) = (RtoTimer::default(), 0, budget(7));
    let mut fx = TxFx::default();
    t.start(0, RTO, &mut lp, &mut fx);
    lp = 400; // an ACK moved the acknowledged point
    let mut fx = TxFx::default();
    assert_eq!(
        t.fire(RTO, RTO, true, &mut lp, &mut b, &mut fx),
        RtoFired::Deferred
    );
    assert_eq!(fx.timers, vec![(400 + RTO, TimerKind::Rto, 0)]);
    let mut fx = TxFx::default();
    assert_eq!(
        t.fire(400 + RTO, RTO, false, &mut lp, &mut b, &mut fx),
        RtoFired::Stopped
    );
    assert!(fx.timers.is_empty());
    // Stopped: the next packet starts it again.
    t.start(5_000, RTO, &mut lp, &mut fx);
    assert_eq!(fx.timers, vec![(5_000 + RTO, TimerKind::Rto, 0)]);
}

/// ibverbs `retry_cnt` = 2: two retransmissions, the third timeout in a row is fatal.
#[test]
fn the_retry_cnt_plus_first_timeout_in_a_row_gives_up() {
    let (mut t, mut lp, mut b) = (RtoTimer::default(), 0, budget(2));
    let mut fx = TxFx::default();
    t.start(0, RTO, &mut lp, &mut fx);
    let mut at = RTO;
    for _ in 0..2 {
        let mut fx = TxFx::default();
        let r = t.fire(at, RTO, true, &mut lp, &mut b, &mut fx);
        assert_eq!(r, RtoFired::Retransmit);
        assert!(r.timed_out());
        assert_eq!(lp, at);
        assert_eq!(fx.timers, vec![(at + RTO, TimerKind::Rto, 0)]);
        at += RTO;
    }
    let mut fx = TxFx::default();
    let r = t.fire(at, RTO, true, &mut lp, &mut b, &mut fx);
    assert_eq!(r, RtoFired::GaveUp);
    assert!(r.timed_out());
    assert_eq!(fx.fatal, Some(Fatal::RetryExceeded));
    assert!(fx.timers.is_empty());
    // Progress in between restores the budget.
    let (mut t, mut lp, mut b) = (RtoTimer::default(), 0, budget(1));
    t.start(0, RTO, &mut lp, &mut TxFx::default());
    assert_eq!(
        t.fire(RTO, RTO, true, &mut lp, &mut b, &mut TxFx::default()),
        RtoFired::Retransmit
    );
    b.progress();
    assert_eq!(
        t.fire(2 * RTO, RTO, true, &mut lp, &mut b, &mut TxFx::default()),
        RtoFired::Retransmit
    );
}
