//! What the connections on a shared QP see when it fails.
//!
//! A pipe (shared RC QP) goes to Error when its transport gives up (retries exhausted: a dead or
//! unreachable peer, a loss burst), when the peer's NIC refuses a request, or when one of its
//! receives fails. The NIC then flushes every WR on it, whichever connection posted it. The
//! agent makes each connection see what its own RC QP would have shown in the same event:
//!
//! - the WR the NIC reported the error for completes with that status (`RetryExceeded`,
//!   `RemoteAccessError`, ...) on its own connection;
//! - every other WR on the pipe completes `Flushed` (IBV_WC_WR_FLUSH_ERR), in its connection's
//!   posting order, ahead of that connection's WRs still in the pool (flushed too), and the
//!   connection goes to Error; its posted receives are flushed;
//! - a connection bound to the pipe later (or with nothing outstanding) goes to Error as well:
//!   its next post completes `Flushed`, as a post to a QP in Error does.
//!
//! The agent does not recreate the pipe and re-post the flushed WRs. Re-posting would need the
//! receiving agent to drop what the old pipe had already delivered (RC's PSNs do not survive a
//! new QP, so a SEND re-posted after a lost ACK would arrive twice), and the paper's agent says
//! nothing about failures; an ibverbs consumer treats any error completion as the end of its
//! connection and reconnects, which gives the same result one level up. The cost of sharing is
//! that one connection's failure fails its pipe's other connections with it (with `Flushed`
//! rather than the status their own QPs would have reported). `docs/drum-agent.md`.

use super::state::{flush, HostState, InFlight};
use braid_verbs::{QpNum, QpState, WcStatus, WorkCompletion};

/// The error a pipe's NIC reported: the connection and status of the WR it named (None when
/// the pipe failed without naming one: a receive error, the peer's agent never showing up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Culprit {
    pub conn: QpNum,
    pub status: WcStatus,
}

/// Fails every connection in `members` (the connections bound to one failed pipe): their WRs on
/// the pipe complete now, in order (the culprit's first one with its status, the rest
/// `Flushed`), then their pooled WRs and receives are flushed, and they go to Error. The NIC's
/// own flushed completions for these WRs, when the poller reads them, find nothing in flight
/// and are dropped.
pub(crate) fn fail_pipe(st: &mut HostState, members: &[QpNum], culprit: Option<Culprit>) {
    for &vq in members {
        let Some(c) = st.conns.get_mut(&vq) else {
            continue;
        };
        let was_error = c.state == QpState::Error;
        let mut first = culprit.filter(|k| k.conn == vq).map(|k| k.status);
        let inflight: Vec<InFlight> = c.inflight.drain(..).collect();
        let mut out = Vec::new();
        let mut skip_rest_of = None;
        for f in inflight {
            if skip_rest_of == Some(f.app_wr_id) && !f.aux {
                // The last part of a WR whose first part already reported the error.
                skip_rest_of = None;
                continue;
            }
            let status = first.take().unwrap_or(WcStatus::Flushed);
            if f.aux && status == WcStatus::Flushed {
                // A helper WR of the agent's own (the control message that carries an
                // application's immediate value): its application WR reports the flush.
                continue;
            }
            if f.aux {
                skip_rest_of = Some(f.app_wr_id);
            }
            out.push(WorkCompletion {
                status,
                ..flush(vq, f.app_wr_id, f.opcode)
            });
        }
        if let Some(id) = skip_rest_of {
            // The error was reported by a segment of a long SEND whose rest still waits in the
            // pool: that WR has completed; it is not flushed again.
            if c.pool
                .front()
                .is_some_and(|p| p.app_wr_id == id && p.sent > 0)
            {
                c.pool.pop_front();
            }
        }
        c.done.extend(out);
        if !c.done.is_empty() {
            st.has_done.insert(vq);
        }
        if !was_error {
            st.fail_conn(vq);
        }
        st.dirty = true;
    }
}

/// The connections still in Rts among `members` (bound to a pipe that failed earlier): they
/// go to Error now.
pub(crate) fn fail_late_joiners(st: &mut HostState, members: &[QpNum]) -> usize {
    let mut n = 0;
    for &vq in members {
        if st.conns.get(&vq).is_some_and(|c| c.state == QpState::Rts) {
            st.fail_conn(vq);
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drum::state::Pooled;
    use crate::drum::{DrumConfig, Mode};
    use braid_verbs::rendezvous;
    use braid_verbs::*;

    fn state_with(conns: u32) -> (HostState, Vec<QpNum>) {
        let mut st = HostState::new(
            DrumConfig::default(),
            Mode::Drum,
            (0.0, 0.0),
            1,
            rendezvous::board(),
        );
        let mut q = Vec::new();
        for _ in 0..conns {
            let v = st.create_conn(1, &QpInit::rc(7), 1.0).unwrap();
            st.conns.get_mut(&v).unwrap().state = QpState::Rts;
            q.push(v);
        }
        (st, q)
    }

    fn inflight(id: u64, aux: bool) -> InFlight {
        InFlight {
            seq: id as u32,
            app_wr_id: id,
            signaled: false,
            opcode: WcOpcode::Send,
            len: 8,
            aux,
            refused: None,
        }
    }

    #[test]
    fn the_culprit_gets_its_status_the_others_flush_in_order_behind_nothing() {
        let (mut st, q) = state_with(3);
        for (i, &v) in q.iter().enumerate() {
            let c = st.conns.get_mut(&v).unwrap();
            c.inflight.push_back(inflight(10 * i as u64, false));
            c.inflight.push_back(inflight(10 * i as u64 + 1, false));
            c.pool.push_back(Pooled {
                app_wr_id: 10 * i as u64 + 2,
                wr: SendWr::new(0, SendOp::Send, vec![]),
                signaled: true,
                fail: None,
                inline_data: None,
                remote: None,
                sent: 0,
                waited: false,
            });
            c.recvs.push_back(RecvWr {
                wr_id: 99,
                sg_list: vec![],
            });
        }
        // Connection 2 had nothing outstanding.
        let idle = st.create_conn(1, &QpInit::rc(7), 1.0).unwrap();
        st.conns.get_mut(&idle).unwrap().state = QpState::Rts;
        let mut members = q.clone();
        members.push(idle);
        fail_pipe(
            &mut st,
            &members,
            Some(Culprit {
                conn: q[1],
                status: WcStatus::RetryExceeded,
            }),
        );
        for (i, &v) in q.iter().enumerate() {
            let c = &st.conns[&v];
            assert_eq!(c.state, QpState::Error);
            let got: Vec<(u64, WcStatus)> = c.done.iter().map(|w| (w.wr_id, w.status)).collect();
            let base = 10 * i as u64;
            let first = if i == 1 {
                WcStatus::RetryExceeded
            } else {
                WcStatus::Flushed
            };
            assert_eq!(
                got,
                vec![
                    (base, first),
                    (base + 1, WcStatus::Flushed),
                    (base + 2, WcStatus::Flushed),
                    (99, WcStatus::Flushed)
                ]
            );
            assert!(c.inflight.is_empty() && c.pool.is_empty() && c.recvs.is_empty());
        }
        assert_eq!(st.conns[&idle].state, QpState::Error);
        assert!(st.conns[&idle].done.is_empty());
    }

    #[test]
    fn a_helper_wr_reports_under_its_applications_wr_once() {
        let (mut st, q) = state_with(1);
        let c = st.conns.get_mut(&q[0]).unwrap();
        // WRITE_WITH_IMM = WRITE (the app's data, aux) + control SEND (the app's completion).
        c.inflight.push_back(inflight(5, true));
        c.inflight.push_back(inflight(5, false));
        c.inflight.push_back(inflight(6, false));
        fail_pipe(
            &mut st,
            &q,
            Some(Culprit {
                conn: q[0],
                status: WcStatus::RetryExceeded,
            }),
        );
        let got: Vec<(u64, WcStatus)> = st.conns[&q[0]]
            .done
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect();
        assert_eq!(
            got,
            vec![(5, WcStatus::RetryExceeded), (6, WcStatus::Flushed)]
        );
        // Flushed as a whole: the aux part is silent, the app's part reports.
        let (mut st, q) = state_with(1);
        let c = st.conns.get_mut(&q[0]).unwrap();
        c.inflight.push_back(inflight(5, true));
        c.inflight.push_back(inflight(5, false));
        fail_pipe(&mut st, &q, None);
        let got: Vec<(u64, WcStatus)> = st.conns[&q[0]]
            .done
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect();
        assert_eq!(got, vec![(5, WcStatus::Flushed)]);
    }

    #[test]
    fn a_long_send_failing_mid_way_reports_once() {
        // Two segments of WR 5 on the pipe, its rest in the pool, WR 6 behind it.
        let pooled = |id: u64, sent: u64| Pooled {
            app_wr_id: id,
            wr: SendWr::new(0, SendOp::Send, vec![]),
            signaled: true,
            fail: None,
            inline_data: None,
            remote: None,
            sent,
            waited: false,
        };
        for culprit in [true, false] {
            let (mut st, q) = state_with(1);
            let c = st.conns.get_mut(&q[0]).unwrap();
            c.inflight.push_back(inflight(5, true));
            c.inflight.push_back(inflight(5, true));
            c.pool.push_back(pooled(5, 2 << 20));
            c.pool.push_back(pooled(6, 0));
            let k = culprit.then_some(Culprit {
                conn: q[0],
                status: WcStatus::RetryExceeded,
            });
            fail_pipe(&mut st, &q, k);
            let got: Vec<(u64, WcStatus)> = st.conns[&q[0]]
                .done
                .iter()
                .map(|w| (w.wr_id, w.status))
                .collect();
            let first = if culprit {
                WcStatus::RetryExceeded
            } else {
                WcStatus::Flushed
            };
            assert_eq!(got, vec![(5, first), (6, WcStatus::Flushed)], "{culprit}");
        }
    }

    #[test]
    fn late_joiners_of_a_failed_pipe_go_to_error() {
        let (mut st, q) = state_with(2);
        st.conns.get_mut(&q[0]).unwrap().state = QpState::Error;
        assert_eq!(fail_late_joiners(&mut st, &q), 1);
        assert!(q.iter().all(|v| st.conns[v].state == QpState::Error));
    }
}
