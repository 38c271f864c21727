//! Pipe setup: the shared QPs to each peer host, met on the run's board (publish, connect,
//! publish "ready"), kept apart so that `agent.rs` stays the scheduler and poller.

use super::*;

impl DrumAgent {
    /// Creates, publishes and connects the pipes the connections call for.
    pub(super) fn setup_pipes(&mut self, v: &mut dyn Verbs) {
        let (Some(cq), Some(g)) = (self.cq, self.st.borrow().global) else {
            return;
        };
        let wanted = self.st.borrow().pipes_wanted();
        let me = v.local_host();
        let (depth, recvs) = {
            let s = self.st.borrow();
            (s.cfg.pipe_depth, s.cfg.recvs_per_pipe)
        };
        let mut waiting = false;
        for (peer, n) in wanted {
            for gi in 0..n.min(128) {
                let side = if me < peer {
                    Side::Client
                } else {
                    Side::Server
                };
                if !self.pipes.contains_key(&(peer, gi)) {
                    let init = QpInit {
                        max_send_wr: (1 << 15).max(depth),
                        max_recv_wr: 2 * recvs,
                        ..QpInit::rc(cq)
                    };
                    let Ok(qp) = v.create_qp(&init) else {
                        self.pipe_errors += 1;
                        continue;
                    };
                    let ep = Endpoint {
                        host: me,
                        qpn: qp,
                        addr: g.addr,
                        rkey: g.rkey,
                    };
                    self.board
                        .borrow_mut()
                        .publish(pipe_key(me, peer, gi, false), side, ep);
                    self.pipes.insert(
                        (peer, gi),
                        Pipe {
                            qp,
                            phase: Phase::Published,
                            inflight: 0,
                            rr: 0,
                            lock_free_at: 0,
                            index: self.pipes.len() as u32,
                            tracked: false,
                            pending: None,
                            pairing: Pairing::default(),
                        },
                    );
                    self.by_qpn.insert(qp, (peer, gi));
                }
                let mut p = self.pipes.get_mut(&(peer, gi)).expect("just made");
                if p.phase == Phase::Published {
                    let found = self
                        .board
                        .borrow()
                        .lookup(pipe_key(me, peer, gi, false), side.peer());
                    match found {
                        Some(ep) => {
                            let qp = p.qp;
                            if v.connect_qp(qp, ep.remote()).is_err() {
                                self.pipe_failed((peer, gi), None);
                                continue;
                            }
                            p = self.pipes.get_mut(&(peer, gi)).expect("just made");
                            if let Some(l) = self.layout {
                                for k in 0..recvs {
                                    let _ = v.post_recv(p.qp, l.recv(p.index, k));
                                }
                            }
                            p.phase = Phase::Connected;
                            let ready = Endpoint {
                                host: me,
                                qpn: p.qp,
                                addr: g.addr,
                                rkey: g.rkey,
                            };
                            self.board.borrow_mut().publish(
                                pipe_key(me, peer, gi, true),
                                side,
                                ready,
                            );
                        }
                        None => waiting = true,
                    }
                }
                if p.phase == Phase::Connected {
                    let ok = self
                        .board
                        .borrow()
                        .lookup(pipe_key(me, peer, gi, true), side.peer())
                        .is_some();
                    if ok {
                        p.phase = Phase::Ready;
                    } else {
                        waiting = true;
                    }
                }
            }
        }
        let now = v.now();
        if !waiting {
            self.board_since = None;
            self.board_backoff = 1_000_000;
            return;
        }
        let since = *self.board_since.get_or_insert(now);
        if now - since > BOARD_PATIENCE_PS {
            let stuck: Vec<(u32, u32)> = self
                .pipes
                .iter()
                .filter(|(_, p)| matches!(p.phase, Phase::Published | Phase::Connected))
                .map(|(&k, _)| k)
                .collect();
            for k in stuck {
                self.pipe_failed(k, None);
            }
            return;
        }
        if !self.board_timer {
            self.board_timer = true;
            v.set_timer(now + self.board_backoff, T_BOARD);
            self.board_backoff = (self.board_backoff * 2).min(1_000_000_000);
        }
    }
}
