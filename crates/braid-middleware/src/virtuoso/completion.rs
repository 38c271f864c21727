//! The completion path: pieces that complete or fail, control messages, path resets, and one
//! completion per MP_ operation for the application.

use super::conn::*;
use super::layer::{Role, VirtuosoLayer, CTRL_SLOTS, NOTIFY_BIT};
use braid_verbs::*;
use std::collections::BTreeSet;

impl VirtuosoLayer {
    // ---------------------------------------------------------------- completions

    pub(super) fn on_send_wc(&mut self, below: &mut dyn Verbs, id: u64, status: WcStatus) {
        let Some(pc) = self.pieces.remove(&id) else {
            return;
        };
        let now = below.now();
        let probe = self.cfg.probe.0;
        let ewma = self.cfg.ewma;
        let lossy = self.cfg.lossy;
        let Some(conn) = self.conns[pc.conn].as_mut() else {
            return;
        };
        if pc.kind == PieceKind::Ctrl {
            conn.ctrl_free.push(pc.off);
            return;
        }
        let peer = conn.peer.clone();
        let mut peer = peer.borrow_mut();
        let path = &mut conn.paths[pc.path];
        path.inflight = path.inflight.saturating_sub(1);
        path.inflight_bytes = path.inflight_bytes.saturating_sub(pc.len);
        if status == WcStatus::Success {
            match pc.kind {
                PieceKind::Probe => {
                    peer.est[pc.path].probe(pc.len, now - pc.posted_at);
                    conn.probing = conn.probing.saturating_sub(1);
                    if conn.probing == 0 {
                        peer.probed_at = Some(now);
                    }
                }
                PieceKind::Data => {
                    path.bytes += pc.len;
                    if lossy {
                        peer.trunk[pc.path].success(pc.len);
                    }
                    if pc.len >= probe / 2 {
                        peer.est[pc.path].sample(pc.len, now - pc.posted_at.max(path.mark), ewma);
                    }
                    path.mark = now;
                    if let Some(o) = conn.op_mut(pc.op) {
                        o.data_left -= pc.len;
                    }
                }
                PieceKind::Single | PieceKind::Notify => {
                    if pc.kind == PieceKind::Single {
                        path.bytes += pc.len;
                    }
                    if let Some(o) = conn.op_mut(pc.op) {
                        o.single_left = false;
                    }
                }
                PieceKind::Ctrl => unreachable!(),
            }
            return;
        }
        // A failure. The path's QP is in Error: its pieces are re-sent, it is reset.
        let transient =
            matches!(status, WcStatus::RetryExceeded | WcStatus::Flushed) && !conn.closed;
        if status == WcStatus::RetryExceeded {
            self.stats.retry_exceeded += 1;
            if lossy {
                peer.trunk[pc.path].failure(pc.len);
            }
        }
        drop(peer);
        if transient {
            self.requeue(pc);
        } else {
            let conn = self.conns[pc.conn].as_mut().unwrap();
            if pc.kind == PieceKind::Probe {
                conn.probing = conn.probing.saturating_sub(1);
            } else if let Some(o) = conn.op_mut(pc.op) {
                // The application's error (an rkey, a RECV too small): the operation fails.
                if o.status == WcStatus::Success {
                    o.status = status;
                }
                o.data_left = 0;
                o.single_left = false;
                o.send_posted = true;
            }
        }
        if !self.conns[pc.conn].as_ref().unwrap().closed {
            self.fail_path(below, pc.conn, pc.path, true);
        }
    }

    /// A piece that did not complete goes back: data to the pool (any path takes it), a SEND
    /// to be posted again in order, a probe is dropped.
    fn requeue(&mut self, pc: Piece) {
        let conn = self.conns[pc.conn].as_mut().unwrap();
        match pc.kind {
            PieceKind::Data => {
                self.stats.resends += 1;
                conn.pool.push_front(Range {
                    op: pc.op,
                    off: pc.off,
                    len: pc.len,
                });
            }
            PieceKind::Single | PieceKind::Notify => {
                self.stats.resends += 1;
                if let Some(o) = conn.op_mut(pc.op) {
                    if o.kind == OpKind::Send {
                        o.send_posted = false;
                    } else {
                        conn.retry.push_front(pc.op);
                    }
                }
            }
            PieceKind::Probe => conn.probing = conn.probing.saturating_sub(1),
            PieceKind::Ctrl => conn.ctrl_free.push(pc.off),
        }
    }

    /// Path `p` failed: take its pieces back, reset its QP and (when `ask`) ask the peer to
    /// reset its end; without a control channel the path stays down.
    fn fail_path(&mut self, below: &mut dyn Verbs, c: usize, p: usize, ask: bool) {
        let conn = self.conns[c].as_mut().unwrap();
        if conn.paths[p].resetting && ask {
            return;
        }
        let ids: Vec<u64> = self
            .pieces
            .iter()
            .filter(|(_, x)| x.conn == c && x.path == p && x.kind != PieceKind::Ctrl)
            .map(|(k, _)| *k)
            .collect();
        for id in ids {
            let pc = self.pieces.remove(&id).unwrap();
            self.requeue(pc);
        }
        let conn = self.conns[c].as_mut().unwrap();
        let path = &mut conn.paths[p];
        path.inflight = 0;
        path.inflight_bytes = 0;
        let q: Vec<Range> = path.queue.drain(..).collect();
        conn.pool.extend(q);
        let qp = path.qp;
        if !self.caps.data_tracking {
            conn.paths[p].up = false;
            return;
        }
        conn.paths[p].resetting = true;
        self.stats.resets += 1;
        let _ = below.modify_qp(qp, QpModify::Reset);
        if ask {
            self.send_ctrl(below, c, Ctrl::ResetReq { path: p as u8 });
        }
    }

    /// Connects path `p` again after a reset (and re-posts the application's RECVs on path 0,
    /// which the reset dropped).
    fn reconnect(&mut self, below: &mut dyn Verbs, c: usize, p: usize) {
        let conn = self.conns[c].as_mut().unwrap();
        let remote = RemoteQp {
            host: conn.peer_host,
            qpn: conn.paths[p].peer_qp,
            udp_sport: None,
        };
        let qp = conn.paths[p].qp;
        let _ = below.modify_qp(qp, QpModify::Reset);
        if below.connect_qp(qp, remote).is_err() {
            return;
        }
        conn.paths[p].resetting = false;
        conn.paths[p].up = true;
        if p == 0 {
            let recvs: Vec<RecvWr> = conn.recvs.iter().map(|r| r.wr.clone()).collect();
            for r in recvs {
                let _ = below.post_recv(qp, r);
            }
        }
    }

    fn on_ctrl(&mut self, below: &mut dyn Verbs, c: usize, m: Ctrl) {
        match m {
            Ctrl::Advert { k, addr, len, rkey } => {
                let conn = self.conns[c].as_mut().unwrap();
                if k >= conn.msgs_retired {
                    conn.adverts.insert(k, (addr, len, rkey));
                }
            }
            Ctrl::ResetReq { path } => {
                let p = path as usize;
                if p < self.conns[c].as_ref().unwrap().paths.len() {
                    self.fail_path(below, c, p, false);
                    self.reconnect(below, c, p);
                    self.send_ctrl(below, c, Ctrl::ResetAck { path });
                }
            }
            Ctrl::ResetAck { path } => {
                let p = path as usize;
                let conn = self.conns[c].as_ref().unwrap();
                if p < conn.paths.len() && conn.paths[p].resetting {
                    self.reconnect(below, c, p);
                }
            }
        }
    }

    fn on_wc(&mut self, below: &mut dyn Verbs, wc: WorkCompletion) {
        let Some(&(c, role)) = self.by_qp.get(&wc.qp_num) else {
            return;
        };
        let is_recv = matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvWithImm);
        let Some(conn) = self.conns[c].as_mut() else {
            return;
        };
        if conn.plain {
            let cq = if is_recv { conn.recv_cq } else { conn.send_cq };
            self.ready.entry(cq).or_default().push(wc);
            return;
        }
        match (role, is_recv) {
            (Role::Ctrl, true) => {
                if wc.status != WcStatus::Success {
                    return;
                }
                let addr = conn.ctrl_base + (wc.wr_id % CTRL_SLOTS) * CTRL_LEN;
                let m = below
                    .read_local(addr, CTRL_LEN)
                    .ok()
                    .and_then(|b| Ctrl::decode(&b));
                let lkey = conn.ctrl_lkey;
                let _ = below.post_recv(
                    wc.qp_num,
                    RecvWr {
                        wr_id: wc.wr_id,
                        sg_list: vec![Sge {
                            addr,
                            length: CTRL_LEN as u32,
                            lkey,
                        }],
                    },
                );
                if let Some(m) = m {
                    self.on_ctrl(below, c, m);
                }
            }
            (Role::Path(0), true) => {
                // Flushes of a path being reset are not the application's: its RECVs are
                // posted again when the path reconnects.
                if wc.status == WcStatus::Flushed && (conn.paths[0].resetting || !conn.closed) {
                    return;
                }
                let Some(r) = conn.recvs.pop_front() else {
                    return;
                };
                let mut out = wc;
                out.wr_id = r.wr.wr_id;
                out.qp_num = conn.app_qp;
                if r.advertised
                    && wc.status == WcStatus::Success
                    && wc.opcode == WcOpcode::RecvWithImm
                    && wc.byte_len == 0
                    && matches!(wc.imm, Some(i) if i & NOTIFY_BIT != 0)
                {
                    out.byte_len = (wc.imm.unwrap() & !NOTIFY_BIT) as u64;
                    out.imm = None;
                    out.opcode = WcOpcode::Recv;
                }
                let cq = conn.recv_cq;
                self.ready.entry(cq).or_default().push(out);
            }
            (_, true) => {}
            (_, false) => self.on_send_wc(below, wc.wr_id, wc.status),
        }
    }

    /// Retires finished operations in order: one completion each for the application.
    fn retire(&mut self, c: usize) {
        let Some(conn) = self.conns[c].as_mut() else {
            return;
        };
        while let Some(o) = conn.ops.front() {
            let finished = o.started
                && o.data_left == 0
                && !o.single_left
                && (o.kind != OpKind::Send || o.send_posted);
            if !finished {
                break;
            }
            let o = conn.ops.pop_front().unwrap();
            if o.kind == OpKind::Send {
                conn.msgs_retired += 1;
                let stale: Vec<u64> = conn
                    .adverts
                    .range(..conn.msgs_retired)
                    .map(|(k, _)| *k)
                    .collect();
                for k in stale {
                    conn.adverts.remove(&k);
                }
            }
            if o.wr.signaled || conn.sig_all || o.status != WcStatus::Success {
                let wc = WorkCompletion {
                    wr_id: o.wr.wr_id,
                    status: o.status,
                    opcode: match o.kind {
                        OpKind::Write => WcOpcode::Write,
                        OpKind::Read => WcOpcode::Read,
                        OpKind::Send if matches!(o.wr.op, SendOp::WriteWithImm(_)) => {
                            WcOpcode::Write
                        }
                        OpKind::Send => WcOpcode::Send,
                    },
                    byte_len: o.len,
                    imm: None,
                    qp_num: conn.app_qp,
                    src_host: 0,
                    src_qp: 0,
                };
                self.ready.entry(conn.send_cq).or_default().push(wc);
            }
        }
    }

    /// Polls the layer's CQ and acts on everything in it.
    pub(super) fn progress(&mut self, below: &mut dyn Verbs, rearm: bool) {
        let Some(cq) = self.cq else { return };
        let mut wcs = Vec::new();
        if rearm {
            let _ = poll_and_rearm(below, cq, &mut wcs);
        } else {
            while below.poll_cq(cq, 256, &mut wcs) > 0 {}
        }
        let mut touched = BTreeSet::new();
        for wc in wcs {
            if let Some(&(c, _)) = self.by_qp.get(&wc.qp_num) {
                touched.insert(c);
            }
            self.on_wc(below, wc);
        }
        for c in touched {
            if self.conns[c].is_some() {
                self.pump(below, c);
                self.retire(c);
                self.pump(below, c);
            }
        }
    }
}
