//! `pipe = "ud"`: the host's two-sided traffic on one UD QP (DRUM §IV: "DRUM implicitly
//! converts the shared QP to UD type, and such conversion is transparent to applications").
//!
//! One UD QP per host carries the SENDs (and SEND_WITH_IMMs) of every connection of the host,
//! to every peer. The paper does not say how UD's limits are hidden from applications that
//! expect RC; braid's agent does it as a small reliable transport per connection:
//!
//! - **Segments**: a message is cut to the UD MTU; each segment carries a 24-byte header (kind,
//!   first/last flags, the sender's connection id, the connection's segment sequence number, the
//!   message length, the application's immediate value) ahead of its payload. Headers are bytes
//!   that must travel, so the agent keeps its header buffers as tracked memory (`caps.data_tracking`
//!   is required); payloads travel as tracked bytes only when tenants track memory.
//! - **In order, once**: the receiver accepts only the next sequence number of the connection
//!   (go-back-N); the first segment of a message takes the tenant's oldest receive (none posted:
//!   the segment is dropped and comes again, as an RNR retry would), each segment's payload is
//!   copied into it at its offset, the last completes it (`RecvWithImm` with the application's
//!   value, or `LocalLengthError` if it does not fit).
//! - **Acknowledged**: every accepted segment is answered with a cumulative ACK (a header-only
//!   UD message); a sender keeps at most [`WINDOW`] segments unacknowledged per connection and
//!   completes an application's SEND once its last segment is acknowledged (an RC completion
//!   means the same). Nothing acknowledged within `ud_rto`: the connection sends again from its
//!   oldest unacknowledged segment; after 7 such timeouts in a row (RC's `retry_cnt`) it fails
//!   with `RetryExceeded` alone: unlike a shared RC QP, a dead peer fails only its own
//!   connections and a lossy one none.
//! - **One-sided operations stay on the RC pipes** (UD has no WRITE or READ). A connection's WRs
//!   keep their order across the two: a SEND leaves the pool only when the connection has
//!   nothing on its RC pipe, a WRITE or READ only when it has no SEND unacknowledged (what RC
//!   gives a WRITE-then-SEND notification, at the price of not pipelining across a change).

use super::state::{flush, Conn, HostState, SCRATCH};
use braid_verbs::rendezvous::{Endpoint, SharedBoard, Side};
use braid_verbs::*;
use std::collections::{BTreeMap, VecDeque};

/// Bytes of a segment header (in a 32-byte slot).
pub(crate) const HDR: u64 = 24;
const SLOT: u64 = 32;
/// Unacknowledged segments per connection.
pub(crate) const WINDOW: usize = 32;
/// Send-header slots (UD sends in flight at once, data and ACKs).
const TX_SLOTS: u32 = 2048;
/// Bytes of the global buffer the UD QP's buffers use (just below the receive-slot half).
pub(crate) const UD_AREA: u64 = 8 << 20;
/// Timeouts in a row before a connection gives up (RC's retry_cnt).
const RETRIES: u32 = 7;
/// wr_id tag of the UD QP's WRs (the slot in the low 32 bits).
pub(crate) const UD_TX: u64 = 0x5544_0000 << 32;
pub(crate) const UD_RX: u64 = 0x5545_0000 << 32;

const DATA: u8 = 1;
const ACK: u8 = 2;
const FIRST: u8 = 1;
const LAST: u8 = 2;
const WITH_IMM: u8 = 4;

/// A segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hdr {
    kind: u8,
    flags: u8,
    conn: u32,
    seq: u32,
    total: u32,
    imm: u32,
}

impl Hdr {
    fn bytes(&self) -> [u8; HDR as usize] {
        let mut b = [0u8; HDR as usize];
        b[0] = self.kind;
        b[1] = self.flags;
        b[4..8].copy_from_slice(&self.conn.to_le_bytes());
        b[8..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..16].copy_from_slice(&self.total.to_le_bytes());
        b[16..20].copy_from_slice(&self.imm.to_le_bytes());
        b
    }
    fn parse(b: &[u8]) -> Option<Hdr> {
        if b.len() < HDR as usize || !matches!(b[0], DATA | ACK) {
            return None;
        }
        let u = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Some(Hdr {
            kind: b[0],
            flags: b[1],
            conn: u(4),
            seq: u(8),
            total: u(12),
            imm: u(16),
        })
    }
}

/// One segment waiting for its acknowledgement.
#[derive(Debug, Clone)]
struct Seg {
    seq: u32,
    hdr: Hdr,
    /// The payload, as global-buffer SGEs.
    sges: Vec<Sge>,
    /// Set on the last segment: (application wr_id, signaled, message length).
    done: Option<(u64, bool, u64)>,
}

/// A connection's UD state: what it sends and what it is receiving.
#[derive(Debug, Default)]
pub(crate) struct UdConn {
    segs: VecDeque<Seg>,
    /// Index in `segs` of the next segment to send.
    next: usize,
    next_seq: u32,
    /// When the oldest unacknowledged segment was last (re)sent, or an ACK last advanced.
    since: u64,
    retries: u32,
    /// Receiving: the next sequence number accepted, the receive being filled.
    expected: u32,
    cur: Option<(RecvWr, u64)>,
    /// Messages sent and not yet acknowledged whole.
    pub msgs: usize,
}

impl UdConn {
    /// Completions for everything outstanding when the connection goes to Error: each
    /// unfinished SEND once, in order, then the receive being filled.
    pub fn flush(&mut self, vq: QpNum) -> Vec<WorkCompletion> {
        let mut out = Vec::new();
        for s in self.segs.drain(..) {
            if let Some((id, _, _)) = s.done {
                out.push(flush(vq, id, WcOpcode::Send));
            }
        }
        if let Some((r, _)) = self.cur.take() {
            out.push(flush(vq, r.wr_id, WcOpcode::Recv));
        }
        self.msgs = 0;
        self.next = 0;
        out
    }
}

/// Board key of host `h`'s UD QP.
fn ud_key(h: u32) -> u64 {
    (1 << 63) | (0x2F << 56) | (h as u64 & 0xFF_FFFF)
}

/// The host's UD QP and its buffers.
pub(crate) struct Ud {
    pub qp: QpNum,
    lkey: u32,
    payload: u64,
    tx_hdr: u64,
    rx_hdr: u64,
    rx_payload: u64,
    nrecv: u32,
    rto: u64,
    free_tx: Vec<u32>,
    peers: BTreeMap<u32, RemoteQp>,
    board: SharedBoard,
    payload_tracked: bool,
    /// When a connection's timeout falls next.
    pub wake_at: Option<u64>,
    pub segments: u64,
    pub retransmits: u64,
    pub acks: u64,
    pub dropped: u64,
}

impl Ud {
    /// Creates the UD QP on `cq` with its buffers in `[area, area + UD_AREA)` of the global
    /// buffer `g`, posts its receives and publishes it.
    pub fn start(
        v: &mut dyn Verbs,
        cq: CqId,
        g: &MemoryRegion,
        area: u64,
        rto: u64,
        board: SharedBoard,
    ) -> Result<Ud, VerbsError> {
        if !v.caps().data_tracking {
            return Err(VerbsError::Unsupported(
                "drum pipe = \"ud\" needs memory contents tracked (its segment headers)",
            ));
        }
        let mtu = v.caps().mtu as u64;
        let tx_hdr = area;
        let rx_hdr = tx_hdr + TX_SLOTS as u64 * SLOT;
        let nrecv = 256u32;
        let rx_payload = rx_hdr + nrecv as u64 * SLOT;
        let payload = mtu - HDR;
        if rx_payload + nrecv as u64 * payload > area + UD_AREA || mtu <= HDR {
            return Err(VerbsError::InvalidArgument(
                "drum: the MTU is too large for UD buffers",
            ));
        }
        let qp = open_ud_qp(v, cq, TX_SLOTS, nrecv)?;
        let me = v.local_host();
        let hdrs = Access::LOCAL.tracked();
        v.reg_mr(tx_hdr, rx_payload - tx_hdr, hdrs)?;
        let ud = Ud {
            qp,
            lkey: g.lkey,
            payload,
            tx_hdr,
            rx_hdr,
            rx_payload,
            nrecv,
            rto,
            free_tx: (0..TX_SLOTS).rev().collect(),
            peers: BTreeMap::new(),
            board: board.clone(),
            payload_tracked: false,
            wake_at: None,
            segments: 0,
            retransmits: 0,
            acks: 0,
            dropped: 0,
        };
        for k in 0..nrecv {
            v.post_recv(qp, ud.recv(k))?;
        }
        board.borrow_mut().publish(
            ud_key(me),
            Side::Server,
            Endpoint {
                host: me,
                qpn: qp,
                addr: 0,
                rkey: 0,
            },
        );
        Ok(ud)
    }

    fn recv(&self, k: u32) -> RecvWr {
        RecvWr {
            wr_id: UD_RX | k as u64,
            sg_list: vec![
                Sge {
                    addr: self.rx_hdr + k as u64 * SLOT,
                    length: HDR as u32,
                    lkey: self.lkey,
                },
                Sge {
                    addr: self.rx_payload + k as u64 * self.payload,
                    length: self.payload as u32,
                    lkey: self.lkey,
                },
            ],
        }
    }

    /// Once a tenant tracks memory, the receive payload slots keep bytes too.
    pub fn track_payloads(&mut self, v: &mut dyn Verbs) {
        if !self.payload_tracked {
            let n = self.nrecv as u64 * self.payload;
            self.payload_tracked = v
                .reg_mr(self.rx_payload, n, Access::LOCAL.tracked())
                .is_ok();
        }
    }

    fn peer(&mut self, host: u32) -> Option<RemoteQp> {
        if let Some(p) = self.peers.get(&host) {
            return Some(*p);
        }
        let ep = self.board.borrow().lookup(ud_key(host), Side::Server)?;
        let r = ep.remote();
        self.peers.insert(host, r);
        Some(r)
    }

    /// Posts one UD message: header `h` then `payload` to `dest`.
    fn post(&mut self, v: &mut dyn Verbs, dest: RemoteQp, h: &Hdr, payload: &[Sge]) -> bool {
        let Some(slot) = self.free_tx.pop() else {
            return false;
        };
        let at = self.tx_hdr + slot as u64 * SLOT;
        if v.write_local(at, &h.bytes()).is_err() {
            self.free_tx.push(slot);
            return false;
        }
        let mut sg = vec![Sge {
            addr: at,
            length: HDR as u32,
            lkey: self.lkey,
        }];
        sg.extend_from_slice(payload);
        let mut wr = SendWr::new(UD_TX | slot as u64, SendOp::Send, sg);
        wr.ud_dest = Some(dest);
        if v.post_send(self.qp, wr).is_err() {
            self.free_tx.push(slot);
            return false;
        }
        true
    }

    /// Cuts a pooled SEND of connection `c` into segments (its bytes at `sges`).
    pub fn enqueue(
        &mut self,
        c: &mut Conn,
        app_wr_id: u64,
        signaled: bool,
        op: SendOp,
        sges: &[Sge],
    ) {
        let vq = c.vqpn;
        let u = c.ud.get_or_insert_with(Default::default);
        let total: u64 = sges.iter().map(|s| s.length as u64).sum();
        let imm = match op {
            SendOp::SendWithImm(x) => Some(x),
            _ => None,
        };
        let n = total.div_ceil(self.payload).max(1);
        for i in 0..n {
            let off = i * self.payload;
            let len = (total - off).min(self.payload);
            let mut flags = 0;
            if i == 0 {
                flags |= FIRST;
            }
            if i == n - 1 {
                flags |= LAST;
            }
            if imm.is_some() {
                flags |= WITH_IMM;
            }
            let seq = u.next_seq;
            u.next_seq = u.next_seq.wrapping_add(1);
            u.segs.push_back(Seg {
                seq,
                hdr: Hdr {
                    kind: DATA,
                    flags,
                    conn: vq,
                    seq,
                    total: total as u32,
                    imm: imm.unwrap_or(0),
                },
                sges: slice_sges(sges, off, len),
                done: (i == n - 1).then_some((app_wr_id, signaled, total)),
            });
        }
        u.msgs += 1;
    }

    /// Sends what the windows allow, and arms the next timeout.
    pub fn pump(&mut self, v: &mut dyn Verbs, st: &mut HostState) {
        let now = v.now();
        let mut wake: Option<u64> = None;
        let vqs: Vec<QpNum> = st
            .conns
            .iter()
            .filter(|(_, c)| c.ud.as_ref().is_some_and(|u| !u.segs.is_empty()))
            .map(|(&q, _)| q)
            .collect();
        for vq in vqs {
            let Some(host) = st.conns[&vq].remote.map(|r| r.host) else {
                continue;
            };
            let Some(dest) = self.peer(host) else {
                wake = Some(wake.map_or(now + self.rto, |w: u64| w.min(now + self.rto)));
                continue;
            };
            let c = st.conns.get_mut(&vq).expect("listed");
            let u = c.ud.as_mut().expect("listed");
            if u.next == 0 {
                u.since = now;
            }
            while u.next < u.segs.len().min(WINDOW) {
                let s = u.segs[u.next].clone();
                if !self.post(v, dest, &s.hdr, &s.sges) {
                    break;
                }
                self.segments += 1;
                u.next += 1;
            }
            let t = u.since + self.rto;
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        self.wake_at = wake;
    }

    /// Timeouts: go back to the oldest unacknowledged segment, or give up.
    pub fn on_timer(&mut self, now: u64, st: &mut HostState) {
        let vqs: Vec<QpNum> = st.conns.keys().copied().collect();
        for vq in vqs {
            let c = st.conns.get_mut(&vq).expect("listed");
            let Some(u) = c.ud.as_mut() else {
                continue;
            };
            if u.segs.is_empty() || u.next == 0 || now < u.since + self.rto {
                continue;
            }
            u.retries += 1;
            if u.retries > RETRIES {
                // As an RC QP whose retries are spent: the oldest WR reports it, the rest flush.
                let mut out = Vec::new();
                let mut first = true;
                for s in u.segs.drain(..) {
                    if let Some((id, _, _)) = s.done {
                        let status = if first {
                            WcStatus::RetryExceeded
                        } else {
                            WcStatus::Flushed
                        };
                        first = false;
                        out.push(WorkCompletion {
                            status,
                            ..flush(vq, id, WcOpcode::Send)
                        });
                    }
                }
                out.extend(u.flush(vq));
                c.done.extend(out);
                st.has_done.insert(vq);
                st.fail_conn(vq);
                continue;
            }
            self.retransmits += u.next as u64;
            u.next = 0;
            u.since = now;
        }
    }

    /// A completion of the UD QP: a send slot freed, or a segment or ACK received.
    pub fn on_wc(
        &mut self,
        v: &mut dyn Verbs,
        st: &mut HostState,
        wc: &WorkCompletion,
        convert: u64,
    ) {
        if wc.wr_id & UD_RX != UD_RX {
            if wc.wr_id & UD_TX == UD_TX {
                self.free_tx.push(wc.wr_id as u32);
            }
            return;
        }
        let k = wc.wr_id as u32;
        if wc.status != WcStatus::Success {
            return;
        }
        let hdr = v
            .read_local(self.rx_hdr + k as u64 * SLOT, HDR)
            .ok()
            .and_then(|b| Hdr::parse(&b));
        let plen = wc.byte_len.saturating_sub(HDR);
        let data = (self.payload_tracked && plen > 0)
            .then(|| {
                v.read_local(self.rx_payload + k as u64 * self.payload, plen)
                    .ok()
            })
            .flatten();
        let _ = v.post_recv(self.qp, self.recv(k));
        let Some(h) = hdr else {
            self.dropped += 1;
            return;
        };
        v.charge(Work::Ns(convert / 1000));
        match h.kind {
            ACK => self.on_ack(v.now(), st, wc.src_host, &h),
            _ => self.on_data(v, st, wc.src_host, &h, plen, data),
        }
    }

    fn on_ack(&mut self, now: u64, st: &mut HostState, from: u32, h: &Hdr) {
        self.acks += 1;
        let Some(c) = st.conns.get_mut(&h.conn) else {
            return;
        };
        if c.remote.map(|r| r.host) != Some(from) {
            return;
        }
        let vq = c.vqpn;
        let Some(u) = c.ud.as_mut() else {
            return;
        };
        let mut out = Vec::new();
        // Cumulative: everything before h.seq arrived.
        while let Some(s) = u.segs.front() {
            if h.seq.wrapping_sub(s.seq) as i32 <= 0 {
                break;
            }
            let s = u.segs.pop_front().expect("non-empty");
            u.next = u.next.saturating_sub(1);
            u.retries = 0;
            u.since = now;
            if let Some((id, signaled, len)) = s.done {
                u.msgs -= 1;
                c.completed += 1;
                if signaled {
                    out.push(WorkCompletion {
                        status: WcStatus::Success,
                        byte_len: len,
                        ..flush(vq, id, WcOpcode::Send)
                    });
                }
            }
        }
        if !out.is_empty() {
            c.done.extend(out);
            st.has_done.insert(vq);
        }
        st.dirty = true;
    }

    fn on_data(
        &mut self,
        v: &mut dyn Verbs,
        st: &mut HostState,
        from: u32,
        h: &Hdr,
        plen: u64,
        data: Option<Vec<u8>>,
    ) {
        let local = st.by_remote.get(&(from, h.conn)).copied();
        let Some(c) = local.and_then(|l| st.conns.get_mut(&l)) else {
            self.dropped += 1;
            return;
        };
        let vq = c.vqpn;
        let src_qp = c.remote.map_or(0, |r| r.qpn);
        let tenant = c.tenant;
        let alive = c.state == QpState::Rts;
        let u = c.ud.get_or_insert_with(Default::default);
        let mut done = None;
        let mut writes = Vec::new();
        if alive && h.seq == u.expected {
            if h.flags & FIRST != 0 && u.cur.is_none() {
                u.cur = c.recvs.pop_front().map(|r| (r, 0));
            }
            if let Some((r, got)) = u.cur.as_mut() {
                if let Some(d) = &data {
                    for (sge, piece) in spans(&r.sg_list, *got, d) {
                        writes.push((sge, piece));
                    }
                } else if plen > 0 {
                    v.charge(Work::Copy(plen));
                }
                *got += plen;
                u.expected = u.expected.wrapping_add(1);
                if h.flags & LAST != 0 {
                    let (r, _) = u.cur.take().expect("filling");
                    let room: u64 = r.sg_list.iter().map(|s| s.length as u64).sum();
                    let total = h.total as u64;
                    let with_imm = h.flags & WITH_IMM != 0;
                    done = Some(WorkCompletion {
                        wr_id: r.wr_id,
                        status: if total > room {
                            WcStatus::LocalLengthError
                        } else {
                            WcStatus::Success
                        },
                        opcode: if with_imm {
                            WcOpcode::RecvWithImm
                        } else {
                            WcOpcode::Recv
                        },
                        byte_len: total,
                        imm: with_imm.then_some(h.imm),
                        qp_num: vq,
                        src_host: from,
                        src_qp,
                    });
                }
            } else {
                // No receive posted: dropped, it comes again (an RNR retry).
                self.dropped += 1;
            }
        } else {
            self.dropped += 1;
        }
        let ack = Hdr {
            kind: ACK,
            flags: 0,
            conn: h.conn,
            seq: u.expected,
            total: 0,
            imm: 0,
        };
        if let Some(wc) = done {
            let too_long = wc.status == WcStatus::LocalLengthError;
            c.done.push_back(wc);
            st.has_done.insert(vq);
            st.dirty = true;
            if too_long {
                st.too_long(vq);
            }
        }
        if !writes.is_empty() {
            st.pending_writes.entry(tenant).or_default().extend(writes);
        }
        if let Some(dest) = self.peer(from) {
            let _ = self.post(v, dest, &ack, &[]);
        }
    }
}

/// `data` scattered over `sg` from byte `off`: (address, bytes) pieces.
fn spans(sg: &[Sge], off: u64, data: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut at = 0usize;
    slice_sges(sg, off, data.len() as u64)
        .into_iter()
        .map(|s| {
            let piece = data[at..at + s.length as usize].to_vec();
            at += s.length as usize;
            (s.addr, piece)
        })
        .collect()
}

/// Where the UD buffers go in a global buffer of `len` bytes at `addr` (just below the half
/// the receive slots use), or None if it is too small.
pub(crate) fn area(addr: u64, len: u64) -> Option<u64> {
    (len / 2 >= 2 * UD_AREA + SCRATCH).then(|| addr + len / 2 - UD_AREA)
}

/// A UD QP on `cq` brought to RTS (a UD QP's "connection" names only its own QPN: every send
/// carries its destination), used by the UD carrier and by the online solver's UD control.
pub(crate) fn open_ud_qp(
    v: &mut dyn Verbs,
    cq: CqId,
    sends: u32,
    recvs: u32,
) -> Result<QpNum, VerbsError> {
    let init = QpInit {
        max_send_wr: sends,
        max_recv_wr: recvs,
        ..QpInit::of_type(QpType::Ud, cq)
    };
    let qp = v.create_qp(&init)?;
    let me = v.local_host();
    v.connect_qp(
        qp,
        RemoteQp {
            host: me,
            qpn: qp,
            udp_sport: None,
        },
    )?;
    Ok(qp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_garbage_is_refused() {
        let h = Hdr {
            kind: DATA,
            flags: FIRST | WITH_IMM,
            conn: 0x10_0003,
            seq: 0xFFFF_FFFE,
            total: 123_456,
            imm: 0xDEAD_BEEF,
        };
        assert_eq!(Hdr::parse(&h.bytes()), Some(h));
        assert_eq!(Hdr::parse(&[0u8; 24]), None);
        assert_eq!(Hdr::parse(&h.bytes()[..10]), None);
    }

    #[test]
    fn spans_cut_data_across_elements_from_an_offset() {
        let sg = [
            Sge {
                addr: 100,
                length: 4,
                lkey: 1,
            },
            Sge {
                addr: 200,
                length: 4,
                lkey: 1,
            },
        ];
        let got = spans(&sg, 2, &[1, 2, 3, 4, 5]);
        assert_eq!(got, vec![(102, vec![1, 2]), (200, vec![3, 4, 5])]);
    }
}
