//! The error cases: a remote access error, RNR, retries exhausted, and the flush of a QP in
//! the error state, each with the completions ibverbs defines.

use super::*;

pub(super) fn remote_access_error(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            v.write_local(BASE + B_OFF, &[1u8; 64]).map_err(err)?;
            v.write_local(BASE, &[9u8; 64]).map_err(err)?;
            let mut w = c.wr(1, SendOp::Write, 0, B_OFF, 64);
            w.rkey ^= 0x5500; // no such key
            v.post_send(c.qa, w).map_err(err)?;
            v.post_send(c.qa, c.wr(2, SendOp::Write, 0, B_OFF, 64))
                .map_err(err)?;
            Ok(Wait::Wcs(2))
        },
        |_, _| Ok(Wait::For(20 * MS)),
        |c, v| {
            let a = c.a_wcs();
            for x in &a {
                c.note(show(x));
            }
            let st: Vec<(u64, WcStatus)> = a.iter().map(|w| (w.wr_id, w.status)).collect();
            check(
                st == vec![(1, WcStatus::RemoteAccessError), (2, WcStatus::Flushed)],
                || format!("statuses {st:?}"),
            )?;
            let s = v.query_qp(c.qa).map_err(err)?.state;
            c.note(format!("requester after: {s:?}"));
            check(s == QpState::Error, || format!("requester is {s:?}"))?;
            let got = v.read_local(BASE + B_OFF, 64).map_err(err)?;
            check(got == vec![1u8; 64], || {
                "a refused WRITE changed bytes".into()
            })?;
            Ok(Wait::Go)
        },
    ];
    script(RC, STEPS, 2000 * MS, out)
}

pub(super) fn rnr(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            v.post_send(c.qa, c.wr(1, SendOp::Send, 0, 0, 64))
                .map_err(err)?;
            Ok(Wait::Wcs(1))
        },
        |_, _| Ok(Wait::For(20 * MS)),
        |c, v| {
            for x in &c.wcs {
                c.note(show(&x.1));
            }
            let a = c.a_wcs();
            check(
                a.len() == 1 && a[0].status == WcStatus::RnrRetryExceeded,
                || format!("{:?}", a.iter().map(show).collect::<Vec<_>>()),
            )?;
            let s = v.query_qp(c.qa).map_err(err)?.state;
            c.note(format!("requester after: {s:?}"));
            check(s == QpState::Error, || format!("requester is {s:?}"))?;
            Ok(Wait::Go)
        },
    ];
    script(Setup { rnr_retry: 0, ..RC }, STEPS, 2000 * MS, out)
}

pub(super) fn retry_exceeded(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            // B dies: A's peer no longer exists.
            v.destroy_qp(c.qb).map_err(err)?;
            v.post_send(c.qa, c.wr(1, SendOp::Write, 0, B_OFF, 64))
                .map_err(err)?;
            v.post_send(c.qa, c.wr(2, SendOp::Write, 0, B_OFF, 64))
                .map_err(err)?;
            Ok(Wait::Wcs(2))
        },
        |c, v| {
            let a = c.a_wcs();
            for x in &a {
                c.note(show(x));
            }
            let st: Vec<(u64, WcStatus)> = a.iter().map(|w| (w.wr_id, w.status)).collect();
            check(
                st == vec![(1, WcStatus::RetryExceeded), (2, WcStatus::Flushed)],
                || format!("statuses {st:?}"),
            )?;
            let s = v.query_qp(c.qa).map_err(err)?.state;
            check(s == QpState::Error, || format!("requester is {s:?}"))?;
            Ok(Wait::Go)
        },
    ];
    script(Setup { retry_cnt: 1, ..RC }, STEPS, 5000 * MS, out)
}

pub(super) fn flush_after_error(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            for i in 0..3 {
                v.post_recv(c.qb, c.recv(10 + i, B_OFF, 64)).map_err(err)?;
            }
            v.modify_qp(c.qb, QpModify::Error).map_err(err)?;
            Ok(Wait::Wcs(3))
        },
        |c, v| {
            let r = v.post_recv(c.qb, c.recv(13, B_OFF, 64));
            c.note(format!(
                "post_recv in Error: {}",
                if r.is_ok() { "accepted" } else { "refused" }
            ));
            let r = v.post_send(c.qb, c.wr(20, SendOp::Write, 0, 0, 8));
            c.note(format!(
                "post_send in Error: {}",
                if r.is_ok() { "accepted" } else { "refused" }
            ));
            check(r.is_ok(), || {
                "post_send on a QP in Error was refused (ibverbs flushes it)".into()
            })?;
            Ok(Wait::For(50 * MS))
        },
        |c, _| {
            let b = c.b_wcs();
            for x in &b {
                c.note(show(x));
            }
            let ids: Vec<u64> = b.iter().take(3).map(|w| w.wr_id).collect();
            check(ids == vec![10, 11, 12], || {
                format!("flushed receives {ids:?}")
            })?;
            check(b.iter().all(|w| w.status == WcStatus::Flushed), || {
                "a completion after Error is not Flushed".into()
            })?;
            check(b.iter().any(|w| w.wr_id == 20), || {
                "the send posted in Error never completed".into()
            })?;
            Ok(Wait::Go)
        },
    ];
    script(RC, STEPS, 2000 * MS, out)
}
