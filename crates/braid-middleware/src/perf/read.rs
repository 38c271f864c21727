//! PeRF's large-READ conversion, the agents' side (`read_convert`).
//!
//! The slides turn a READ of at least `large_msg` into a request the data holder serves with
//! chunked WRITEs, so that the holder's preemption (sub-WRs and 0_WAITs) applies to the READ's
//! data, which otherwise leaves the holder's NIC as one uninterruptible stream of responses.
//! braid's version relies on no NIC quirk (see `docs/perf.md`):
//!
//! - the agents of two PeRF hosts connect one RC QP to each other over the out-of-band board
//!   (`HostCtx::board`) when a tenant connects a QP to the other host: a peer whose agent never
//!   publishes does not run PeRF, and READs to it stay sub-READs;
//! - the requester's layer sends a [`Request`] through its agent (a SEND of 40 bytes from the
//!   agent's tracked memory); the holder's agent hands it to the layer of the tenant owning the
//!   holder's end of the QP, which serves it only if that QP is connected to the requesting QP
//!   on the requesting host (the request names both ends; the link names the host) and the key
//!   and range are its tenant's own remotely readable registration, and then queues the WRITEs
//!   on that QP (its own traffic, under its LMSE);
//! - the holder's layer answers through its agent with a DONE (a SEND_WITH_IMM carrying the
//!   request id and the outcome) once its last WRITE completed (RC: the data is placed), and the
//!   requester's agent wakes the requesting layer.
//!
//! [`ReadHub`] is what the layers and the agent share (inside [`super::state::HostState`]);
//! [`Links`] is the agent's connections.

use crate::peer_link::PeerLink;
use braid_verbs::rendezvous::{BoardWait, Endpoint, LinkKeys, SharedBoard};
use braid_verbs::*;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The wake token a layer sends the agent: messages wait in the outbox, or a new peer.
pub const WAKE_AGENT_READ: u64 = 0x5045_5246_0010;
/// The wake token the agent sends a layer: requests to serve or answers arrived.
pub const WAKE_LAYER_READ: u64 = 0x5045_5246_0011;
/// The agent's timer: look at the board again.
pub const TIMER_BOARD: u64 = 3;

/// Where an agent's link buffers live (one MiB apart per link, far from applications).
const LINK_ADDR: u64 = 0x5245_4144_0000_0000;
/// Bytes per message slot.
const SLOT: u64 = 64;
/// Receive slots per link (RECVs kept posted) and send slots.
const RECVS: u64 = 512;
const SENDS: u64 = 512;
/// A send completion without a slot (a DONE).
const NO_SLOT: u64 = u64::MAX;
/// How long an agent waits for a peer's agent on the board (100 ms).
const PATIENCE_PS: u64 = 100_000_000_000;

/// A converted READ as the requester's layer sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub id: u32,
    /// The holder's end of the application's QP (which tenant serves, on which QP).
    pub qpn: QpNum,
    /// The requester's end: the QP the READ was posted on. The holder serves only if its QP is
    /// connected to exactly this QP on the host the request came from (an RC responder
    /// answers only its connected peer).
    pub from_qpn: QpNum,
    /// The READ's remote address, key and length.
    pub raddr: u64,
    pub rkey: u32,
    pub len: u32,
    /// Where the data goes at the requester, and the layer's private key for it.
    pub dest: u64,
    pub dest_rkey: u32,
}

pub const REQUEST_BYTES: usize = 40;

impl Request {
    pub fn encode(&self) -> [u8; REQUEST_BYTES] {
        let mut b = [0u8; REQUEST_BYTES];
        b[0..4].copy_from_slice(&self.id.to_le_bytes());
        b[4..8].copy_from_slice(&self.qpn.to_le_bytes());
        b[8..16].copy_from_slice(&self.raddr.to_le_bytes());
        b[16..20].copy_from_slice(&self.rkey.to_le_bytes());
        b[20..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..32].copy_from_slice(&self.dest.to_le_bytes());
        b[32..36].copy_from_slice(&self.dest_rkey.to_le_bytes());
        b[36..40].copy_from_slice(&self.from_qpn.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Option<Request> {
        if b.len() < REQUEST_BYTES {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8"));
        Some(Request {
            id: u32_at(0),
            qpn: u32_at(4),
            raddr: u64_at(8),
            rkey: u32_at(16),
            len: u32_at(20),
            dest: u64_at(24),
            dest_rkey: u32_at(32),
            from_qpn: u32_at(36),
        })
    }
}

/// What goes between agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    Request(Request),
    /// The holder's answer: the READ's data is placed (`ok`) or the request was refused.
    Done {
        id: u32,
        ok: bool,
    },
}

/// The DONE's immediate: the id (31 bits) and the outcome.
fn done_imm(id: u32, ok: bool) -> u32 {
    (id << 1) | ok as u32
}

/// What the agent and the layers of a host share for the conversion.
#[derive(Debug, Default)]
pub struct ReadHub {
    /// The host converts READs (`read_convert`, and a board to find peers on).
    pub enabled: bool,
    /// Hosts the tenants connected QPs to.
    pub wanted: BTreeSet<u32>,
    /// Hosts whose agent is connected to ours (they run PeRF).
    pub ready: BTreeSet<u32>,
    /// Messages for the agent to send: (peer host, message).
    pub outbox: VecDeque<(u32, Msg)>,
    /// Requests for a tenant's layer to serve: (requester host, request).
    pub serve_in: BTreeMap<TenantId, VecDeque<(u32, Request)>>,
    /// Answers for a tenant's layer: (id, the READ's status).
    pub done_in: BTreeMap<TenantId, VecDeque<(u32, WcStatus)>>,
    /// Which tenant made request `id`, to which host.
    pub owners: BTreeMap<u32, (TenantId, u32)>,
    next_id: u32,
    /// Counters: READs converted (requester), requests served and refused (holder).
    pub converted: u64,
    pub served: u64,
    pub refused: u64,
}

impl ReadHub {
    /// A fresh request id (31 bits: the DONE's immediate carries it beside the outcome).
    pub fn new_id(&mut self, tenant: TenantId, peer: u32) -> u32 {
        let id = self.next_id & 0x7FFF_FFFF;
        self.next_id = self.next_id.wrapping_add(1);
        self.owners.insert(id, (tenant, peer));
        id
    }

    /// Request `id` is answered: its tenant's layer is told (and woken).
    fn answer(&mut self, v: &mut dyn Verbs, id: u32, st: WcStatus) {
        if let Some((t, _)) = self.owners.remove(&id) {
            self.done_in.entry(t).or_default().push_back((id, st));
            v.wake(t, WAKE_LAYER_READ);
        }
    }

    /// The link to `peer` failed: its outstanding requests fail as a READ whose transport gave
    /// up (RetryExceeded), and nothing more is converted towards it.
    fn lose_peer(&mut self, v: &mut dyn Verbs, peer: u32) {
        self.ready.remove(&peer);
        let ids: Vec<u32> = self
            .owners
            .iter()
            .filter(|(_, &(_, p))| p == peer)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.answer(v, id, WcStatus::RetryExceeded);
        }
        self.outbox.retain(|(p, _)| *p != peer);
    }
}

/// The board key of the READ-conversion link between two hosts' agents.
fn board_key(a: u32, b: u32, ready: bool) -> u64 {
    let (lo, hi) = (a.min(b) as u64 & 0x7FF_FFFF, a.max(b) as u64 & 0x7FF_FFFF);
    (1 << 63) | (0x52 << 56) | ((ready as u64) << 54) | (lo << 27) | hi
}

struct Link {
    link: PeerLink,
    mr: MemoryRegion,
    free: VecDeque<u64>,
}

/// The agent's links to the other PeRF hosts' agents.
pub struct Links {
    board: Option<SharedBoard>,
    cq: Option<CqId>,
    links: BTreeMap<u32, Link>,
    by_qp: BTreeMap<QpNum, u32>,
    /// Waiting on the board for peers' agents.
    wait: BoardWait,
    pub peers_missing: u64,
    pub errors: u64,
}

impl Links {
    pub fn new(board: Option<SharedBoard>) -> Self {
        Links {
            board,
            cq: None,
            links: BTreeMap::new(),
            by_qp: BTreeMap::new(),
            wait: BoardWait::new(PATIENCE_PS),
            peers_missing: 0,
            errors: 0,
        }
    }

    pub fn start(&mut self, v: &mut dyn Verbs) {
        if self.board.is_none() {
            return;
        }
        if let Ok(cq) = v.create_cq(4096) {
            if v.req_notify_cq(cq).is_ok() {
                self.cq = Some(cq);
            }
        }
    }

    pub fn owns_cq(&self, cq: CqId) -> bool {
        self.cq == Some(cq)
    }

    /// Everything the agent does for the conversion when woken, on its timer or completions.
    pub fn service(&mut self, v: &mut dyn Verbs, hub: &mut ReadHub) {
        self.setup(v, hub);
        self.send(v, hub);
    }

    fn setup(&mut self, v: &mut dyn Verbs, hub: &mut ReadHub) {
        let (Some(cq), Some(board)) = (self.cq, self.board.clone()) else {
            return;
        };
        if self.wait.idle() && hub.wanted.len() == self.links.len() {
            return;
        }
        let me = v.local_host();
        let keys = |p| LinkKeys::between(me, p, board_key(me, p, false), board_key(me, p, true));
        let wanted: Vec<u32> = hub.wanted.iter().copied().collect();
        for p in wanted {
            if p == me || self.links.contains_key(&p) {
                continue;
            }
            let k = self.links.len() as u64;
            let addr = LINK_ADDR + (k << 20);
            let mr = match v.reg_mr(addr, (RECVS + SENDS) * SLOT, Access::ALL.tracked()) {
                Ok(m) => m,
                Err(_) => {
                    self.errors += 1;
                    continue;
                }
            };
            let init = QpInit {
                max_send_wr: 2 * SENDS as u32,
                max_recv_wr: RECVS as u32,
                ..QpInit::rc(cq)
            };
            let Ok(qp) = v.create_qp(&init) else {
                self.errors += 1;
                continue;
            };
            let ep = Endpoint {
                host: me,
                qpn: qp,
                addr,
                rkey: mr.rkey,
            };
            keys(p).publish(&board, ep);
            self.by_qp.insert(qp, p);
            self.links.insert(
                p,
                Link {
                    link: PeerLink::published(p, qp),
                    mr,
                    free: (RECVS..RECVS + SENDS).collect(),
                },
            );
        }
        let mut waiting = false;
        for (&p, l) in self.links.iter_mut() {
            let ep = Endpoint {
                host: me,
                qpn: l.link.qp,
                addr: l.mr.addr,
                rkey: l.mr.rkey,
            };
            let mr = l.mr;
            let was = l.link.is_ready();
            let step = l.link.advance(v, &board, keys(p), ep, |v, _| {
                for i in 0..RECVS {
                    let _ = v.post_recv(ep.qpn, recv_wr(&mr, i));
                }
            });
            match step {
                Ok(w) => waiting |= w,
                Err(_) => self.errors += 1,
            }
            if !was && l.link.is_ready() {
                hub.ready.insert(p);
            }
        }
        if self.wait.after_pass(v, waiting, TIMER_BOARD) {
            // Those peers run no PeRF: their READs stay sub-READs.
            for l in self.links.values_mut() {
                if l.link.give_up() {
                    self.peers_missing += 1;
                }
            }
        }
    }

    pub fn on_timer(&mut self, v: &mut dyn Verbs, hub: &mut ReadHub) {
        self.wait.fired();
        self.service(v, hub);
    }

    /// Sends what waits in the outbox (requests while a send slot is free).
    fn send(&mut self, v: &mut dyn Verbs, hub: &mut ReadHub) {
        while let Some(&(peer, msg)) = hub.outbox.front() {
            let Some(l) = self.links.get_mut(&peer).filter(|l| l.link.is_ready()) else {
                // The link is gone: its requests fail, a DONE for it is dropped.
                hub.lose_peer(v, peer);
                continue;
            };
            let wr = match msg {
                Msg::Request(r) => {
                    let Some(&slot) = l.free.front() else { return };
                    let addr = l.mr.addr + slot * SLOT;
                    if v.write_local(addr, &r.encode()).is_err() {
                        self.errors += 1;
                        hub.outbox.pop_front();
                        continue;
                    }
                    let sge = Sge {
                        addr,
                        length: REQUEST_BYTES as u32,
                        lkey: l.mr.lkey,
                    };
                    SendWr::new(slot, SendOp::Send, vec![sge])
                }
                Msg::Done { id, ok } => {
                    SendWr::new(NO_SLOT, SendOp::SendWithImm(done_imm(id, ok)), vec![])
                }
            };
            match v.post_send(l.link.qp, wr) {
                Ok(()) => {
                    if matches!(msg, Msg::Request(_)) {
                        l.free.pop_front();
                    }
                    hub.outbox.pop_front();
                }
                Err(VerbsError::QueueFull) => return,
                Err(_) => {
                    self.errors += 1;
                    l.link.fail();
                    hub.lose_peer(v, peer);
                }
            }
        }
    }

    /// The link CQ's completions: requests to hand to a layer, answers, freed send slots.
    pub fn on_completions(
        &mut self,
        v: &mut dyn Verbs,
        hub: &mut ReadHub,
        owner_of: &dyn Fn(QpNum) -> Option<TenantId>,
    ) {
        let Some(cq) = self.cq else { return };
        let mut wcs = Vec::new();
        if poll_and_rearm(v, cq, &mut wcs).is_err() {
            return;
        }
        for wc in wcs {
            let Some(&peer) = self.by_qp.get(&wc.qp_num) else {
                continue;
            };
            let l = self.links.get_mut(&peer).expect("indexed");
            if wc.status != WcStatus::Success {
                if l.link.fail() {
                    self.errors += 1;
                }
                hub.lose_peer(v, peer);
                continue;
            }
            let is_recv = matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvWithImm);
            if is_recv && !l.link.from_peer(&wc) {
                // Not from the peer's agent: dropped, its receive put back.
                self.errors += 1;
                let _ = v.post_recv(l.link.qp, recv_wr(&l.mr, wc.wr_id));
                continue;
            }
            match wc.opcode {
                WcOpcode::Send if wc.wr_id != NO_SLOT => l.free.push_back(wc.wr_id),
                WcOpcode::Recv => {
                    let slot = wc.wr_id;
                    let bytes = v
                        .read_local(l.mr.addr + slot * SLOT, REQUEST_BYTES as u64)
                        .ok();
                    let _ = v.post_recv(l.link.qp, recv_wr(&l.mr, slot));
                    let Some(r) = bytes.as_deref().and_then(Request::decode) else {
                        self.errors += 1;
                        continue;
                    };
                    match owner_of(r.qpn) {
                        Some(t) => {
                            hub.serve_in.entry(t).or_default().push_back((peer, r));
                            v.wake(t, WAKE_LAYER_READ);
                        }
                        None => {
                            hub.refused += 1;
                            hub.outbox.push_back((
                                peer,
                                Msg::Done {
                                    id: r.id,
                                    ok: false,
                                },
                            ));
                        }
                    }
                }
                WcOpcode::RecvWithImm => {
                    let _ = v.post_recv(l.link.qp, recv_wr(&l.mr, wc.wr_id));
                    let imm = wc.imm.unwrap_or(0);
                    let (id, ok) = (imm >> 1, imm & 1 == 1);
                    let st = if ok {
                        WcStatus::Success
                    } else {
                        WcStatus::RemoteAccessError
                    };
                    hub.answer(v, id, st);
                }
                _ => {}
            }
        }
    }

    pub fn ready_links(&self) -> usize {
        self.links.values().filter(|l| l.link.is_ready()).count()
    }
}

fn recv_wr(mr: &MemoryRegion, slot: u64) -> RecvWr {
    RecvWr {
        wr_id: slot,
        sg_list: vec![Sge {
            addr: mr.addr + slot * SLOT,
            length: SLOT as u32,
            lkey: mr.lkey,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_survives_its_encoding() {
        let r = Request {
            id: 0x1234_5678,
            qpn: 77,
            raddr: 0xDEAD_BEEF_0000_1000,
            rkey: 0x8000_0101,
            len: 1 << 20,
            dest: 0x1_0000,
            dest_rkey: 0x8000_0102,
            from_qpn: 0x0003_0001,
        };
        assert_eq!(Request::decode(&r.encode()), Some(r));
        assert_eq!(Request::decode(&r.encode()[..REQUEST_BYTES - 1]), None);
        let imm = done_imm(0x7FFF_FFFF, true);
        assert_eq!((imm >> 1, imm & 1), (0x7FFF_FFFF, 1));
    }
}
