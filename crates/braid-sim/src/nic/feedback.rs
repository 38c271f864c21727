//! What a packet's PSNs mean to the QP it reaches: the 24-bit wire PSNs mapped back to the
//! QP's own numbering (`transport/psn.rs`), and whether an ACK or NAK names a PSN the requester
//! has outstanding (forged or stale feedback is dropped).

use super::{Nic, Qp, NAK_INVALID_REQUEST, NAK_REMOTE_ACCESS};
use crate::packet::*;
use crate::transport::psn::from_wire;
use braid_verbs::*;

/// Maps the 24-bit PSNs of a packet for `q` back to its internal numbering
/// (`transport/psn.rs`): what the QP sent as a requester (ACKs, NAKs, READ responses) near what
/// it has acknowledged, its remote's requests near the PSN it expects. False when the PSN lies
/// before the connection's first one.
pub(super) fn unwire(q: &Qp, pk: &mut Packet) -> bool {
    let (base, near) = match pk.kind {
        PktKind::Ack | PktKind::Nak | PktKind::RnrNak => (q.sq_psn, q.t.acked()),
        PktKind::Data if pk.op == DataOp::ReadResp => (q.sq_psn, q.t.acked()),
        PktKind::Data | PktKind::ReadReq if q.qp_type == QpType::Uc => (q.rq_psn, q.uc_epsn),
        PktKind::Data | PktKind::ReadReq => (q.rq_psn, q.t.expected()),
        PktKind::Cnp | PktKind::Pfc => return true,
    };
    let Some(psn) = from_wire(pk.psn, base, near) else {
        return false;
    };
    pk.psn = psn;
    if pk.sack != u32::MAX && pk.kind != PktKind::Data {
        match from_wire(pk.sack, base, near) {
            Some(s) => pk.sack = s,
            None => return false,
        }
    }
    true
}

impl Nic {
    /// Whether an ACK or NAK names a PSN the requester has outstanding (the IBTA's requester
    /// validates the PSN of every response against the PSNs it sent and has not seen
    /// acknowledged; rxe's completer, `check_psn`, drops the others). An access NAK must name a
    /// PSN of a WR it sent; an in-order transport's ACK or sequence/RNR NAK must not
    /// acknowledge beyond the last PSN sent, and a NAK must not go back behind what is already
    /// acknowledged. A forged or stale one (a same-host injector's, or a responder answering a
    /// request its requester never made) is dropped instead of failing or completing the
    /// victim's WRs. Other packets, and QPs a multipath transport runs (its feedback is per
    /// path), pass; the RC's selective repeat is checked like go-back-N.
    pub(super) fn expects_feedback(&self, qpn: QpNum, pk: &Packet) -> bool {
        let nak = matches!(pk.kind, PktKind::Nak | PktKind::RnrNak);
        if !nak && pk.kind != PktKind::Ack {
            return true;
        }
        let Some(q) = self.qp(qpn) else { return true };
        if q.qp_type != QpType::Rc {
            return true;
        }
        let sent = q.cursor_psn();
        if pk.kind == PktKind::Nak && matches!(pk.aux, NAK_REMOTE_ACCESS | NAK_INVALID_REQUEST) {
            return q.t.acked() <= pk.psn
                && q.sq.iter().any(|w| {
                    w.first_psn
                        .is_some_and(|f| pk.psn >= f && pk.psn < f + w.npkts.max(1))
                        && pk.psn < sent
                });
        }
        if q.t.out_of_order() && !matches!(q.t, super::QpTransport::Rc(_)) {
            return true;
        }
        // An ACK's or NAK's PSN is the responder's next expected one: at most one past the
        // last PSN sent; a NAK's at least what is acknowledged already. Selective repeat's
        // (`transport.recovery = "irn"`) NACK also SACKs a PSN, which must have been sent.
        let sack_sent = pk.aux != super::NAK_SACK || pk.kind != PktKind::Nak || pk.sack < sent;
        pk.psn <= sent && (!nak || pk.psn >= q.t.acked()) && sack_sent
    }
}
