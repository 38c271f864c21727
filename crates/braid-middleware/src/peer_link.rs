//! A host agent's link to the agent of another host (PeRF's READ-conversion link, Justitia's
//! pacer link): one RC QP, set up through the board's handshake ([`LinkKeys::advance`]), then
//! carrying control messages both ways.
//!
//! The link is bound to the peer it was set up for: the peer's endpoint must come from that
//! host, and once connected, a receive counts only if it came from the peer's QP. Anything
//! else on the link's QP is a forgery (a tenant of the peer's host, or any other sender the
//! NIC let through, e.g. one that guessed the PSN: the BTH names no source QP) and is dropped
//! and counted, never acted on.

use braid_verbs::rendezvous::{Endpoint, LinkKeys, LinkPhase, SharedBoard};
use braid_verbs::{QpNum, Verbs, VerbsError, WorkCompletion};

/// One link: its QP, where it is in the handshake, and the peer it is bound to.
#[derive(Debug, Clone)]
pub struct PeerLink {
    /// The host of the agent at the other end.
    peer: u32,
    pub qp: QpNum,
    pub phase: LinkPhase,
    /// The peer's endpoint, once connected: the only sender the link takes messages from.
    remote: Option<Endpoint>,
    /// Receives on the link that did not come from `remote` (dropped).
    pub forged: u64,
}

/// Why a link step failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkError {
    /// The NIC refused the connect.
    Verbs(VerbsError),
    /// The endpoint on the board under this link's key is not on the peer's host.
    Impostor(Endpoint),
}

impl PeerLink {
    /// A link to `peer` whose endpoint (QP `qp`) was just published.
    pub fn published(peer: u32, qp: QpNum) -> Self {
        PeerLink {
            peer,
            qp,
            phase: LinkPhase::Published,
            remote: None,
            forged: 0,
        }
    }

    pub fn is_ready(&self) -> bool {
        self.phase == LinkPhase::Ready
    }

    /// The peer's endpoint once the link is connected.
    pub fn remote(&self) -> Option<Endpoint> {
        self.remote
    }

    /// Moves the handshake one step on ([`LinkKeys::advance`]; `on_connect` posts the link's
    /// receives). An endpoint under the link's key that is not on the peer's host fails the
    /// link before anything connects to it. Returns whether the link still waits.
    pub fn advance(
        &mut self,
        v: &mut dyn Verbs,
        board: &SharedBoard,
        keys: LinkKeys,
        ours: Endpoint,
        on_connect: impl FnOnce(&mut dyn Verbs, Endpoint),
    ) -> Result<bool, LinkError> {
        if self.phase == LinkPhase::Published {
            if let Some(ep) = board.borrow().lookup(keys.conn, keys.side.peer()) {
                if ep.host != self.peer {
                    self.phase = LinkPhase::Failed;
                    return Err(LinkError::Impostor(ep));
                }
            }
        }
        let mut remote = None;
        let step = keys.advance(v, board, ours, &mut self.phase, |v, peer| {
            remote = Some(peer);
            on_connect(v, peer);
        });
        self.remote = self.remote.or(remote);
        step.map_err(LinkError::Verbs)
    }

    /// Whether a receive completion on the link came from the peer's QP. One that did not is
    /// counted in `forged`; the caller drops it (re-posting the receive it consumed).
    pub fn from_peer(&mut self, wc: &WorkCompletion) -> bool {
        let ok = self
            .remote
            .is_some_and(|r| wc.src_host == r.host && wc.src_qp == r.qpn);
        if !ok {
            self.forged += 1;
        }
        ok
    }

    /// The link failed (an error completion, a refused post). Returns whether it was up to
    /// now (so that each failure is counted once).
    pub fn fail(&mut self) -> bool {
        let was = self.phase != LinkPhase::Failed;
        self.phase = LinkPhase::Failed;
        was
    }

    /// The board's patience ran out: a link still waiting for its peer fails. Returns whether
    /// this one did.
    pub fn give_up(&mut self) -> bool {
        if matches!(self.phase, LinkPhase::Published | LinkPhase::Connected) {
            self.phase = LinkPhase::Failed;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests;
