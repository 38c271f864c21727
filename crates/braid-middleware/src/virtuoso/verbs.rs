//! The MP_ verbs: the application's calls on a multi-path QP, as the layer below offers them.

use super::balance::Trunk;
use super::conn::*;
use super::layer::{Role, VirtuosoLayer, CTRL_SLOTS};
use braid_verbs::rendezvous::{Endpoint, Side};
use braid_verbs::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

impl VirtuosoLayer {
    fn trunk(&self) -> Trunk {
        Trunk::new(
            self.cfg.trunk_init.0,
            self.cfg.trunk_step.0,
            self.cfg.trunk_max.0,
        )
    }
}

impl Middleware for VirtuosoLayer {
    fn name(&self) -> &'static str {
        "virtuoso"
    }

    fn start(&mut self, below: &mut dyn Verbs) {
        // The shared CQ of every path QP (the paper's QP manager), armed from the start.
        let _ = self.ensure_cq(below);
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        self.counter_list()
    }

    /// MP_connect, first half: one QP per virtual path, each on one of the host's addresses,
    /// and a control QP; their numbers go on the board.
    fn create_qp(&mut self, below: &mut dyn Verbs, init: &QpInit) -> Result<QpNum, VerbsError> {
        if init.qp_type != QpType::Rc || init.is_cross_channel() {
            return below.create_qp(init);
        }
        let cq = self.ensure_cq(below)?;
        let n = self.cfg.paths as usize;
        let addrs = self.caps.local_addrs.len().max(1);
        let mut qps = Vec::with_capacity(n);
        for i in 0..n {
            let q = QpInit {
                send_cq: cq,
                recv_cq: cq,
                sq_sig_all: false,
                local_addr: (i % addrs) as u8,
                retry_cnt: self.cfg.retry_cnt.unwrap_or(init.retry_cnt),
                max_recv_wr: if i == 0 { init.max_recv_wr } else { 1 },
                ..init.clone()
            };
            match below.create_qp(&q) {
                Ok(qp) => qps.push(qp),
                Err(e) => {
                    for qp in qps {
                        let _ = below.destroy_qp(qp);
                    }
                    return Err(e);
                }
            }
        }
        let app_qp = qps[0];
        let ctrl_qp = below.create_qp(&QpInit {
            max_send_wr: 256,
            max_recv_wr: 256,
            ..QpInit::rc(cq)
        })?;
        let c = self.conns.len();
        // The peer's probes land in a sink of our own; control messages in a tracked ring.
        let sink_addr =
            self.base + (1 << 36) + (c as u64) * (self.cfg.probe.0 + 4096).next_power_of_two();
        let sink = below.reg_mr(sink_addr, self.cfg.probe.0, Access::ALL)?;
        let ctrl_base = self.base + (1 << 39) + (c as u64) * 0x4000;
        let (ctrl_lkey, ctrl_ok) = if self.caps.data_tracking {
            let mr = below.reg_mr(
                ctrl_base,
                4096 + CTRL_SLOTS * CTRL_LEN,
                Access::ALL.tracked(),
            )?;
            for s in 0..CTRL_SLOTS {
                let sg = vec![Sge {
                    addr: ctrl_base + s * CTRL_LEN,
                    length: CTRL_LEN as u32,
                    lkey: mr.lkey,
                }];
                below.post_recv(
                    ctrl_qp,
                    RecvWr {
                        wr_id: s,
                        sg_list: sg,
                    },
                )?;
            }
            (mr.lkey, true)
        } else {
            (0, false)
        };
        let host = below.local_host();
        {
            let mut b = self.board.borrow_mut();
            for (i, &qp) in qps.iter().enumerate() {
                let (addr, rkey) = if i == 0 {
                    (sink.addr, sink.rkey)
                } else {
                    (0, 0)
                };
                b.publish(
                    board_key(host, app_qp, i as u8),
                    Side::Client,
                    Endpoint {
                        host,
                        qpn: qp,
                        addr,
                        rkey,
                    },
                );
            }
            if ctrl_ok {
                b.publish(
                    board_key(host, app_qp, CTRL_PATH),
                    Side::Client,
                    Endpoint {
                        host,
                        qpn: ctrl_qp,
                        addr: 0,
                        rkey: 0,
                    },
                );
            }
        }
        let paths = qps
            .iter()
            .map(|&qp| Path {
                qp,
                peer_qp: 0,
                up: false,
                resetting: false,
                inflight: 0,
                inflight_bytes: 0,
                bytes: 0,
                mark: 0,
                queue: VecDeque::new(),
            })
            .collect();
        for (i, &qp) in qps.iter().enumerate() {
            self.by_qp.insert(qp, (c, Role::Path(i)));
        }
        self.by_qp.insert(ctrl_qp, (c, Role::Ctrl));
        self.conns.push(Some(Conn {
            app_qp,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            sig_all: init.sq_sig_all,
            plain: false,
            connected: false,
            peer_host: 0,
            ctrl_qp,
            peer_ctrl: 0,
            paths,
            sink: None,
            ops: VecDeque::new(),
            next_op: 0,
            pool: VecDeque::new(),
            rr: 0,
            retry: VecDeque::new(),
            closed: false,
            next_msg: 0,
            msgs_retired: 0,
            adverts: BTreeMap::new(),
            recvs: VecDeque::new(),
            recvs_posted: 0,
            ctrl_out: VecDeque::new(),
            ctrl_free: if ctrl_ok {
                (0..CTRL_SLOTS).rev().collect()
            } else {
                Vec::new()
            },
            ctrl_base,
            ctrl_lkey,
            probing: 0,
            peer: Rc::new(RefCell::new(PeerPaths::new(n, self.trunk()))),
            sink_mr: Some(sink),
        }));
        Ok(app_qp)
    }

    /// MP_connect, second half: the peer's paths are found on the board under its (host, QP)
    /// and connected one to one. A peer without virtuoso gets plain RDMA on path 0.
    fn connect_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        let Some(c) = self.conn_of(qp) else {
            return below.connect_qp(qp, remote);
        };
        let n = self.cfg.paths as usize;
        let eps: Vec<Endpoint> = {
            let b = self.board.borrow();
            (0..n)
                .map_while(|i| b.lookup(board_key(remote.host, remote.qpn, i as u8), Side::Client))
                .collect()
        };
        let ctrl = self
            .board
            .borrow()
            .lookup(board_key(remote.host, remote.qpn, CTRL_PATH), Side::Client);
        let caps = self.cfg.capacities.clone();
        let trunk = self.trunk();
        let peer = self
            .peers
            .entry(remote.host)
            .or_insert_with(|| {
                let mut p = PeerPaths::new(n, trunk);
                if let Some(cs) = &caps {
                    for (e, r) in p.est.iter_mut().zip(cs) {
                        e.bps = Some(r.0 as f64);
                    }
                }
                Rc::new(RefCell::new(p))
            })
            .clone();
        let conn = self.conns[c].as_mut().unwrap();
        conn.peer = peer;
        if eps.is_empty() || eps[0].qpn != remote.qpn || ctrl.is_none() {
            below.connect_qp(qp, remote)?;
            conn.plain = true;
            conn.connected = true;
            conn.paths[0].up = true;
            return Ok(());
        }
        for (i, ep) in eps.iter().enumerate() {
            let r = RemoteQp {
                host: remote.host,
                qpn: ep.qpn,
                udp_sport: if i == 0 { remote.udp_sport } else { None },
            };
            below.connect_qp(conn.paths[i].qp, r)?;
            conn.paths[i].peer_qp = ep.qpn;
            conn.paths[i].up = true;
        }
        let ctrl = ctrl.unwrap();
        below.connect_qp(conn.ctrl_qp, ctrl.remote())?;
        conn.peer_ctrl = ctrl.qpn;
        conn.peer_host = remote.host;
        conn.sink = Some((eps[0].addr, eps[0].rkey));
        conn.connected = true;
        self.pump(below, c);
        Ok(())
    }

    /// MP_disconnect: every path QP, the control QP and the layer's regions go.
    fn destroy_qp(&mut self, below: &mut dyn Verbs, qp: QpNum) -> Result<(), VerbsError> {
        let Some(c) = self.conn_of(qp) else {
            return below.destroy_qp(qp);
        };
        let conn = self.conns[c].take().unwrap();
        self.pieces.retain(|_, p| p.conn != c);
        for p in conn.paths.iter() {
            self.by_qp.remove(&p.qp);
            if p.qp != qp {
                let _ = below.destroy_qp(p.qp);
            }
        }
        self.by_qp.remove(&conn.ctrl_qp);
        let _ = below.destroy_qp(conn.ctrl_qp);
        if let Some(mr) = conn.sink_mr {
            let _ = below.dereg_mr(&mr);
        }
        below.destroy_qp(qp)
    }

    fn modify_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        m: QpModify,
    ) -> Result<(), VerbsError> {
        let Some(c) = self.conn_of(qp) else {
            return below.modify_qp(qp, m);
        };
        if matches!(m, QpModify::Error | QpModify::Reset) {
            let conn = self.conns[c].as_mut().unwrap();
            conn.closed = true;
            let others: Vec<QpNum> = conn.paths.iter().skip(1).map(|p| p.qp).collect();
            for q in others {
                let _ = below.modify_qp(q, m);
            }
        }
        below.modify_qp(qp, m)
    }

    /// The application's regions become writable by the peer's layer: the paper registers the
    /// application's target memory in the paths' protection domain, so that split MP_SENDs can
    /// WRITE into a RECV's buffer.
    fn reg_mr(
        &mut self,
        below: &mut dyn Verbs,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        let access = if self.caps.data_tracking && access.local_write {
            Access {
                remote_write: true,
                ..access
            }
        } else {
            access
        };
        let mr = below.reg_mr(addr, len, access)?;
        if access.remote_write {
            self.mrs.insert(mr.lkey, mr);
        }
        Ok(mr)
    }

    fn dereg_mr(&mut self, below: &mut dyn Verbs, mr: &MemoryRegion) -> Result<(), VerbsError> {
        self.mrs.remove(&mr.lkey);
        below.dereg_mr(mr)
    }

    /// MP_WRITE / MP_READ / MP_SEND: one operation, decomposed when it is large.
    fn post_send(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: SendWr,
    ) -> Result<(), VerbsError> {
        let Some(c) = self.conn_of(qp) else {
            return below.post_send(qp, wr);
        };
        let conn = self.conns[c].as_mut().unwrap();
        if conn.plain || !conn.connected || conn.closed {
            return below.post_send(qp, wr);
        }
        let kind = match wr.op {
            SendOp::Write | SendOp::Nop => OpKind::Write,
            SendOp::Read => OpKind::Read,
            // A WRITE with immediate consumes a RECV like a SEND: it goes whole on path 0, in
            // order with the SENDs and after the bytes of earlier operations.
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::WriteWithImm(_) => OpKind::Send,
            _ => return Err(VerbsError::InvalidWr("cross-channel WRs on a virtuoso QP")),
        };
        let seq = conn.next_op;
        conn.next_op += 1;
        let msg = (kind == OpKind::Send).then(|| {
            conn.next_msg += 1;
            conn.next_msg - 1
        });
        let len = wr.len();
        conn.ops.push_back(Op {
            seq,
            wr,
            kind,
            len,
            data_left: 0,
            single_left: false,
            started: false,
            msg,
            target: None,
            send_posted: false,
            status: WcStatus::Success,
        });
        self.stats_op();
        self.pump(below, c);
        Ok(())
    }

    /// MP_RECV: the RECV goes on path 0 (a small SEND or a notify consumes it in order) and its
    /// buffer is advertised to the peer, which may then split a large SEND into WRITEs there.
    fn post_recv(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: RecvWr,
    ) -> Result<(), VerbsError> {
        let Some(c) = self.conn_of(qp) else {
            return below.post_recv(qp, wr);
        };
        let small = self.cfg.small.0;
        let tracking = self.caps.data_tracking;
        let advert = match wr.sg_list.as_slice() {
            [s] if s.length as u64 > small => self
                .mrs
                .get(&s.lkey)
                .filter(|m| s.addr >= m.addr && s.addr + s.length as u64 <= m.addr + m.len)
                .map(|m| (s.addr, s.length, m.rkey)),
            _ => None,
        };
        let conn = self.conns[c].as_mut().unwrap();
        below.post_recv(qp, wr.clone())?;
        if conn.plain {
            return Ok(());
        }
        let k = conn.recvs_posted;
        conn.recvs_posted += 1;
        conn.recvs.push_back(AppRecv {
            wr,
            advertised: advert.is_some(),
        });
        if tracking {
            let (addr, len, rkey) = advert.unwrap_or((0, 0, 0));
            self.send_ctrl(below, c, Ctrl::Advert { k, addr, len, rkey });
        }
        Ok(())
    }

    /// Completions of the application's CQ: the layer's (one per MP_ operation, RECVs of
    /// path 0) first, then whatever else the CQ holds.
    fn poll_cq(
        &mut self,
        below: &mut dyn Verbs,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        if Some(cq) == self.cq {
            return 0;
        }
        self.progress(below, false);
        let mut n = self.ready.get_mut(&cq).map_or(0, |q| q.poll(max, out));
        if n < max {
            n += below.poll_cq(cq, max - n, out);
        }
        n
    }

    fn req_notify_cq(&mut self, below: &mut dyn Verbs, cq: CqId) -> Result<(), VerbsError> {
        self.ready.entry(cq).or_default().arm();
        below.req_notify_cq(cq)
    }

    fn on_event(&mut self, below: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        match event {
            Event::Completion(cq) if Some(cq) == self.cq => {
                self.progress(below, true);
                self.notify(up);
            }
            Event::Completion(cq) => {
                if let Some(q) = self.ready.get_mut(&cq) {
                    q.disarm();
                }
                up.push(event);
            }
            e => up.push(e),
        }
    }
}
