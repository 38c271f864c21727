//! The work queues' limits and recoveries, as ibverbs defines them: a flushed send and a
//! flushed receive that share a wr_id (ibverbs leaves an error completion's opcode undefined,
//! so a backend must know which queue each came from), a full send queue (`ibv_post_send`
//! takes a list's head, fails with ENOMEM and points `bad_wr` at the first WR it refused), a
//! SEND that meets receiver-not-ready and succeeds on retry once a receive is posted
//! (`rnr_retry` 7: retry forever), a receive too small for its SEND (the receive fails at the
//! responder, IBV_WC_LOC_LEN_ERR; the SEND fails at the requester, IBV_WC_REM_INV_REQ_ERR or rxe's
//! IBV_WC_REM_OP_ERR, see docs/rdma.md), and a READ with an rkey
//! that names no region (IBV_WC_REM_ACCESS_ERR, nothing landed).

use super::*;

/// The send queue depth of [`sq_full_partial_list`]: one below a power of two, so a provider
/// that rounds its ring up to one (rxe: `roundup_pow_of_two(max_wr + 1)` slots, one kept free)
/// gives exactly what was asked.
const SQ_DEPTH: u32 = 63;
/// WRs in the list posted to the full queue.
const LIST: u64 = 70;

pub(super) fn shared_wr_id_flush(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            // A receive on A (nobody sends to A) and a SEND from A that B cannot take (no
            // receive posted; rnr_retry 7 retries forever): both stay outstanding under wr 7.
            v.post_recv(c.qa, c.recv(7, 0, 64)).map_err(err)?;
            v.post_send(c.qa, c.wr(7, SendOp::Send, 4096, 0, 64))
                .map_err(err)?;
            v.modify_qp(c.qa, QpModify::Error).map_err(err)?;
            Ok(Wait::For(50 * MS))
        },
        |c, v| {
            // A's receive completes on B's CQ, its send on A's. Poll the receive CQ first: a
            // backend that tells send from receive by wr_id alone gives the receive's flush to
            // the send (which is still outstanding).
            let mut rx = Vec::new();
            v.poll_cq(c.cq_b, 16, &mut rx);
            let mut tx = Vec::new();
            v.poll_cq(c.cq_a, 16, &mut tx);
            for w in &rx {
                c.note(format!("receive CQ: {}", show(w)));
            }
            for w in &tx {
                c.note(format!("send CQ: {}", show(w)));
            }
            let got = |w: &[WorkCompletion]| -> Vec<(u64, WcStatus, WcOpcode)> {
                w.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect()
            };
            check(got(&rx) == [(7, WcStatus::Flushed, WcOpcode::Recv)], || {
                format!("receive CQ {:?}", got(&rx))
            })?;
            check(got(&tx) == [(7, WcStatus::Flushed, WcOpcode::Send)], || {
                format!("send CQ {:?}", got(&tx))
            })?;
            Ok(Wait::Go)
        },
    ];
    script(
        Setup {
            arm: false,
            a_recv_on_cq_b: true,
            ..RC
        },
        STEPS,
        2000 * MS,
        out,
    )
}

pub(super) fn sq_full_partial_list(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            let wrs: Vec<SendWr> = (0..LIST)
                .map(|i| c.wr(i, SendOp::Write, i * 64, B_OFF + i * 64, 64))
                .collect();
            let r = v.post_send_list(c.qa, wrs);
            c.note(format!("post list of {LIST} into {SQ_DEPTH} slots: {r:?}"));
            check(
                r == Err(BadWr {
                    index: SQ_DEPTH as usize,
                    error: VerbsError::QueueFull,
                }),
                || format!("{r:?}, not QueueFull at index {SQ_DEPTH}"),
            )?;
            Ok(Wait::Wcs(SQ_DEPTH as usize))
        },
        |c, v| {
            // The head drained: the refused tail goes in now.
            let wrs: Vec<SendWr> = (SQ_DEPTH as u64..LIST)
                .map(|i| c.wr(i, SendOp::Write, i * 64, B_OFF + i * 64, 64))
                .collect();
            v.post_send_list(c.qa, wrs)
                .map_err(|b| format!("the tail: {b:?}"))?;
            Ok(Wait::Wcs(LIST as usize))
        },
        |c, _| {
            let a = c.a_wcs();
            let ids: Vec<u64> = a.iter().map(|w| w.wr_id).collect();
            c.note(format!("{} completions, all successful: {}", a.len(), {
                a.iter().all(|w| w.status == WcStatus::Success)
            }));
            check(ids == (0..LIST).collect::<Vec<_>>(), || {
                format!("completions {ids:?}")
            })?;
            check(a.iter().all(|w| w.status == WcStatus::Success), || {
                "a WR failed".into()
            })?;
            Ok(Wait::Go)
        },
    ];
    script(
        Setup {
            max_send_wr: SQ_DEPTH,
            ..RC
        },
        STEPS,
        2000 * MS,
        out,
    )
}

pub(super) fn rnr_retry_recovers(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            v.write_local(BASE, b"not ready, then ready").map_err(err)?;
            v.post_send(c.qa, c.wr(1, SendOp::Send, 0, 0, 21))
                .map_err(err)?;
            Ok(Wait::For(20 * MS))
        },
        |c, v| {
            c.note(format!("completions before the receive: {}", c.wcs.len()));
            check(c.wcs.is_empty(), || {
                "the SEND completed before any receive was posted".into()
            })?;
            v.post_recv(c.qb, c.recv(2, B_OFF, 64)).map_err(err)?;
            Ok(Wait::Wcs(2))
        },
        |c, v| {
            for x in &c.wcs {
                c.note(show(&x.1));
            }
            let a: Vec<_> = c.a_wcs().iter().map(|w| (w.wr_id, w.status)).collect();
            let b: Vec<_> = c
                .b_wcs()
                .iter()
                .map(|w| (w.wr_id, w.status, w.byte_len))
                .collect();
            check(a == [(1, WcStatus::Success)], || format!("sender {a:?}"))?;
            check(b == [(2, WcStatus::Success, 21)], || {
                format!("receiver {b:?}")
            })?;
            let got = v.read_local(BASE + B_OFF, 21).map_err(err)?;
            check(&got[..] == b"not ready, then ready", || {
                "the retried SEND's bytes".into()
            })?;
            Ok(Wait::Go)
        },
    ];
    script(RC, STEPS, 2000 * MS, out)
}

pub(super) fn recv_too_small(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            v.post_recv(c.qb, c.recv(1, B_OFF, 16)).map_err(err)?;
            v.post_send(c.qa, c.wr(2, SendOp::Send, 0, 0, 64))
                .map_err(err)?;
            Ok(Wait::Wcs(2))
        },
        |_, _| Ok(Wait::For(20 * MS)),
        |c, v| {
            for x in &c.wcs {
                c.note(show(&x.1));
            }
            // ibverbs gives the receive IBV_WC_LOC_LEN_ERR (LocalLengthError, as the simulator
            // and the fake NIC do); rxe gives IBV_WC_LOC_QP_OP_ERR. Either way it fails.
            let b: Vec<_> = c.b_wcs().iter().map(|w| (w.wr_id, w.status)).collect();
            check(
                b.first()
                    .is_some_and(|&(id, st)| id == 1 && st != WcStatus::Success),
                || format!("receiver {b:?}: the too-small receive did not fail"),
            )?;
            // ibverbs (RC): the responder NAKs (Invalid Request) and goes to Error, the requester
            // completes with IBV_WC_REM_INV_REQ_ERR (`RemoteInvalidRequest`, as the simulator and
            // the fake NIC do); rxe (6.1) gives IBV_WC_REM_OP_ERR (`Other(11)`). Either way the
            // SEND fails: a backend whose requester believes it landed fails the case.
            let a: Vec<_> = c.a_wcs().iter().map(|w| (w.wr_id, w.status)).collect();
            check(
                a.first().is_some_and(|&(id, st)| {
                    id == 2 && matches!(st, WcStatus::RemoteInvalidRequest | WcStatus::Other(11))
                }),
                || format!("requester {a:?}: expected the SEND to fail (invalid request)"),
            )?;
            let s = v.query_qp(c.qb).map_err(err)?.state;
            c.note(format!("responder after: {s:?}"));
            let s = v.query_qp(c.qa).map_err(err)?.state;
            c.note(format!("requester after: {s:?}"));
            Ok(Wait::Go)
        },
    ];
    script(RC, STEPS, 2000 * MS, out)
}

pub(super) fn read_bad_rkey(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            v.write_local(BASE + B_OFF, &[3u8; 64]).map_err(err)?;
            v.write_local(BASE, &[8u8; 64]).map_err(err)?;
            let mut w = c.wr(1, SendOp::Read, 0, B_OFF, 64);
            w.rkey ^= 0x5500; // no such key
            v.post_send(c.qa, w).map_err(err)?;
            v.post_send(c.qa, c.wr(2, SendOp::Read, 0, B_OFF, 64))
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
            check(a[0].opcode == WcOpcode::Read, || {
                format!("the failed READ's opcode {:?}", a[0].opcode)
            })?;
            let s = v.query_qp(c.qa).map_err(err)?.state;
            c.note(format!("requester after: {s:?}"));
            check(s == QpState::Error, || format!("requester is {s:?}"))?;
            let got = v.read_local(BASE, 64).map_err(err)?;
            check(got == vec![8u8; 64], || {
                "a refused READ landed bytes".into()
            })?;
            Ok(Wait::Go)
        },
    ];
    script(RC, STEPS, 2000 * MS, out)
}
