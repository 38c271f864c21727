//! Pipe setup: the shared QPs to each peer host, met on the run's board (publish, connect,
//! publish "ready": `braid_verbs::rendezvous::LinkKeys` and `BoardWait`, as PeRF's READ links
//! and Justitia's pacer links do), kept apart so that `agent.rs` stays the scheduler and poller.

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
            let keys = |gi| {
                LinkKeys::between(
                    me,
                    peer,
                    pipe_key(me, peer, gi, false),
                    pipe_key(me, peer, gi, true),
                )
            };
            for gi in 0..n.min(128) {
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
                    keys(gi).publish(&self.board, ep);
                    self.pipes
                        .insert((peer, gi), Pipe::new(qp, self.pipes.len() as u32));
                    self.by_qpn.insert(qp, (peer, gi));
                }
                let p = self.pipes.get_mut(&(peer, gi)).expect("just made");
                let ep = Endpoint {
                    host: me,
                    qpn: p.qp,
                    addr: g.addr,
                    rkey: g.rkey,
                };
                let (index, layout) = (p.index, self.layout);
                let mut phase = p.phase;
                let step = keys(gi).advance(v, &self.board, ep, &mut phase, |v, _| {
                    if let Some(l) = layout {
                        for k in 0..recvs {
                            let _ = v.post_recv(ep.qpn, l.recv(index, k));
                        }
                    }
                });
                match step {
                    Ok(w) => {
                        p.phase = phase;
                        waiting |= w;
                    }
                    Err(_) => self.pipe_failed((peer, gi), None),
                }
            }
        }
        if self.wait.after_pass(v, waiting, T_BOARD) {
            let stuck: Vec<(u32, u32)> = self
                .pipes
                .iter()
                .filter(|(_, p)| matches!(p.phase, Phase::Published | Phase::Connected))
                .map(|(&k, _)| k)
                .collect();
            for k in stuck {
                self.pipe_failed(k, None);
            }
        }
    }
}
