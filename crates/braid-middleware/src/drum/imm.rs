//! How a tenant's WR goes onto a shared QP, and how the application's immediate value travels.
//!
//! The 32-bit immediate data of what the agent sends carries the connection id (DRUM §IV:
//! "the remote scheduler can write Connection ID in the imm_data domain"), so it cannot carry
//! the application's own value as well. The agent sends that value in a second message right
//! behind the first on the same shared QP: a zero-byte `SEND_WITH_IMM(app imm)`.
//!
//! - `SEND` goes as `SEND_WITH_IMM(id | IMM_SEND)`, `WRITE` and `READ` as they are: no cost.
//! - `SEND_WITH_IMM(v)` goes as `SEND_WITH_IMM(id | IMM_SEND | IMM_APP)` then
//!   `SEND_WITH_IMM(v)` with no payload; `WRITE_WITH_IMM(v)` as `WRITE_WITH_IMM(id | IMM_APP)`
//!   then the same zero-byte `SEND_WITH_IMM(v)`.
//! - The receiving agent, on a completion flagged `IMM_APP`, holds it; the next receive
//!   completion of the same shared QP is its companion (an RC QP delivers in order and the
//!   sender posts the pair back to back, nothing in between), whose immediate value is the
//!   application's, bit-exact. The tenant's receive then completes as `RecvWithImm` with it.
//!
//! Cost per WR with immediate data: one more WQE on the shared QP (a header-only packet on the
//! wire), one more of the peer agent's receive buffers and CQEs; nothing for other WRs. No
//! payload byte is touched, so it works whether or not memory contents are tracked.
//!
//! On the sender the pair is one application WR: the first WR is the agent's helper (`aux`:
//! its success is silent, its error is the application WR's), the second completes it.

use super::state::{send_opcode, Conn, InFlight, Pooled};
use braid_verbs::*;

/// Immediate data on a shared QP: the sender's connection id (24 bits) and these flags.
/// A SEND (its payload is in the peer agent's receive buffer).
pub(crate) const IMM_SEND: u32 = 1 << 31;
/// The application's WR carried immediate data: the next message on the shared QP is its
/// zero-byte companion with the value.
pub(crate) const IMM_APP: u32 = 1 << 30;
/// A segment of a SEND longer than the agent's receive buffers: more of the same message
/// follows on the shared QP (the last segment goes without this flag, as a whole SEND would).
pub(crate) const IMM_MORE: u32 = 1 << 29;
/// A zero-byte control message between the agents about the connection named in the low 24
/// bits; its kind in bits 24..28.
pub(crate) const IMM_CTRL: u32 = 1 << 28;
/// Control kinds: the sender's agent refused a WR of the connection as the responder's NIC
/// would (a remote key, range or permission its slice refuses): the responder's end goes to
/// Error, as an RC responder QP does (IBA 9.9.3.1.3, class C).
pub(crate) const CTRL_REFUSED: u32 = 1 << 24;
/// The receiving agent found a SEND longer than the tenant's receive (its end completed the
/// receive `LocalLengthError` and went to Error): the sender's end goes to Error.
pub(crate) const CTRL_LENGTH: u32 = 2 << 24;
pub(crate) const CTRL_KIND: u32 = 0xF << 24;

/// The agent's scratch area for inline data: (address in the global buffer, lkey), when it
/// keeps bytes.
pub(crate) type Scratch = Option<(u64, u32)>;

/// What posting one pooled WR did.
pub(crate) enum Posted {
    /// Nothing went onto the shared QP (full or broken); the WR is the caller's to keep.
    No,
    /// One segment of a long SEND went onto the shared QP (the pooled WR's `sent` is the
    /// caller's to advance by the returned bytes); the WR stays at the head of the pool.
    Part(u64),
    /// Posted; the count is WRs on the shared QP (1 or 2). If the companion could not follow,
    /// it must be the next WR posted on this QP.
    Yes(u32, Option<SendWr>),
}

/// Posts pooled WR `p` of connection `vq` on shared QP `qp`, with `wr_id = vq << 32 | seq` per
/// WR on it, and records what is in flight. A SEND longer than `bounce` (the peer agent's
/// receive buffers) goes in segments of `bounce` bytes, one per call: `SEND_WITH_IMM(id |
/// IMM_SEND | IMM_MORE)` for all but the last (helpers of the agent's, `aux`), then the last as
/// a whole SEND would go; the peer's agent joins them (an RC QP delivers in order).
pub(crate) fn post_pooled(
    v: &mut dyn Verbs,
    qp: QpNum,
    vq: QpNum,
    c: &mut Conn,
    p: &Pooled,
    scratch: Scratch,
    bounce: u64,
) -> Posted {
    let two_sided = matches!(p.wr.op, SendOp::Send | SendOp::SendWithImm(_));
    let len = p.wr.len();
    if two_sided && !p.wr.inline && len - p.sent > bounce {
        let seq = c.seq;
        let wr = SendWr {
            wr_id: ((vq as u64) << 32) | seq as u64,
            op: SendOp::SendWithImm(vq | IMM_SEND | IMM_MORE),
            signaled: true,
            sg_list: slice_sges(&p.wr.sg_list, p.sent, bounce),
            ..p.wr.clone()
        };
        if v.post_send(qp, wr).is_err() {
            return Posted::No;
        }
        c.inflight.push_back(InFlight {
            seq,
            app_wr_id: p.app_wr_id,
            signaled: p.signaled,
            opcode: WcOpcode::Send,
            len,
            aux: true,
            refused: None,
        });
        c.seq = seq.wrapping_add(1);
        return Posted::Part(bounce);
    }
    let (op, app_imm) = match p.wr.op {
        SendOp::Send => (SendOp::SendWithImm(vq | IMM_SEND), None),
        SendOp::SendWithImm(x) => (SendOp::SendWithImm(vq | IMM_SEND | IMM_APP), Some(x)),
        SendOp::WriteWithImm(x) => (SendOp::WriteWithImm(vq | IMM_APP), Some(x)),
        o => (o, None),
    };
    let seq = c.seq;
    let mut wr = SendWr {
        wr_id: ((vq as u64) << 32) | seq as u64,
        op,
        signaled: true,
        ..p.wr.clone()
    };
    if p.sent > 0 {
        // The last segment of a long SEND.
        wr.sg_list = slice_sges(&p.wr.sg_list, p.sent, len - p.sent);
    }
    if let (Some(d), Some((addr, lkey))) = (&p.inline_data, scratch) {
        // The bytes the application posted inline, from the agent's scratch area (the NIC
        // copies inline data when it is posted, so the area is free again at once).
        if d.len() as u64 <= super::state::SCRATCH && v.write_local(addr, d).is_ok() {
            wr.sg_list = vec![Sge {
                addr,
                length: d.len() as u32,
                lkey,
            }];
        }
    }
    let companion = app_imm.map(|x| SendWr {
        wr_id: ((vq as u64) << 32) | seq.wrapping_add(1) as u64,
        op: SendOp::SendWithImm(x),
        sg_list: Vec::new(),
        signaled: true,
        inline: false,
        remote_addr: 0,
        rkey: 0,
        ud_dest: None,
        fence: false,
    });
    if v.post_send(qp, wr).is_err() {
        return Posted::No;
    }
    let opcode = send_opcode(&p.wr.op);
    let entry = |seq: u32, aux: bool| InFlight {
        seq,
        app_wr_id: p.app_wr_id,
        signaled: p.signaled,
        opcode,
        len,
        aux,
        refused: None,
    };
    c.inflight.push_back(entry(seq, companion.is_some()));
    c.seq = seq.wrapping_add(1);
    let Some(comp) = companion else {
        return Posted::Yes(1, None);
    };
    c.inflight.push_back(entry(seq.wrapping_add(1), false));
    c.seq = seq.wrapping_add(2);
    match v.post_send(qp, comp.clone()) {
        Ok(()) => Posted::Yes(2, None),
        Err(_) => Posted::Yes(2, Some(comp)),
    }
}

/// Posts, in place of connection `vq`'s pooled WR `p` that the agent refused with `status`, a
/// zero-byte `SEND_WITH_IMM(id | IMM_CTRL | CTRL_REFUSED)` that tells the peer's agent (its end
/// of the connection goes to Error, as the responder's QP would). When it completes, `p`
/// completes with `status` (behind the connection's WRs already on the shared QP, as on its
/// own QP); the connection is halted meanwhile. Returns whether it was posted.
pub(crate) fn post_refusal(
    v: &mut dyn Verbs,
    qp: QpNum,
    vq: QpNum,
    c: &mut Conn,
    p: &Pooled,
    status: WcStatus,
) -> bool {
    let seq = c.seq;
    let wr = SendWr::new(
        ((vq as u64) << 32) | seq as u64,
        SendOp::SendWithImm(vq | IMM_CTRL | CTRL_REFUSED),
        Vec::new(),
    );
    if v.post_send(qp, wr).is_err() {
        return false;
    }
    c.inflight.push_back(InFlight {
        seq,
        app_wr_id: p.app_wr_id,
        signaled: true,
        opcode: send_opcode(&p.wr.op),
        len: 0,
        aux: false,
        refused: Some(status),
    });
    c.seq = seq.wrapping_add(1);
    c.halted = true;
    true
}

/// The receiving side of one shared QP: a completion flagged [`IMM_APP`] waiting for its
/// companion.
#[derive(Debug)]
pub(crate) struct Pairing<T> {
    held: Option<T>,
}

impl<T> Default for Pairing<T> {
    fn default() -> Self {
        Pairing { held: None }
    }
}

impl<T> Pairing<T> {
    /// Holds `t` until the companion arrives.
    pub fn hold(&mut self, t: T) {
        debug_assert!(self.held.is_none(), "companions follow at once");
        self.held = Some(t);
    }
    /// The completion this one is the companion of, if one waits.
    pub fn companion_of(&mut self) -> Option<T> {
        self.held.take()
    }
}
