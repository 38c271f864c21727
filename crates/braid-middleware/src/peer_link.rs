//! A host agent's link to the agent of another host (PeRF's READ-conversion link, Justitia's
//! pacer link): one RC QP, set up through the board's handshake ([`LinkKeys::advance`]), then
//! carrying control messages both ways.
//!
//! The link is bound to the peer it was set up for: the peer's endpoint must come from that
//! host, and once connected, a receive counts only if it came from the peer's QP. Anything
//! else on the link's QP is a forgery (a tenant of the peer's host, or any other sender the
//! NIC let through, e.g. one that guessed the PSN: the BTH names no source QP) and is dropped
//! and counted, never acted on.
//!
//! **Re-class.** A QP's traffic class is fixed when it is created, so a link whose traffic must
//! move to another class (Justitia's reference probe, once the latency tenants' class becomes
//! known after the link was made) gets a new QP in that class: a *leg* of the link, with its own
//! handshake under the link's next *generation* of board keys. The link's first QP keeps carrying
//! the control messages (so none is lost while the legs come up, and the peer learns of a new
//! generation on it); the newest ready leg carries the class-bound traffic. Older legs stay
//! connected: the peer may still use them until its own leg is ready.

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
    /// The traffic class `qp` was created in (None: the NIC's default).
    class: Option<u8>,
    /// QPs the link was re-created in for another class, oldest first (generations 1, 2, ...).
    legs: Vec<Leg>,
}

/// Generations a link may have (its first QP and `MAX_GENERATIONS - 1` legs): a class is set once
/// per host, so two (one re-class per end) are what a run needs; the bound keeps a peer that
/// keeps asking for new generations from making us create QPs without end.
pub const MAX_GENERATIONS: u32 = 8;

impl Leg {
    /// The peer's endpoint of this generation, once connected.
    pub fn remote(&self) -> Option<Endpoint> {
        self.remote
    }
}

/// A QP of a link made for another traffic class ([`PeerLink::reclass`]).
#[derive(Debug, Clone)]
pub struct Leg {
    pub qp: QpNum,
    pub phase: LinkPhase,
    /// The generation of board keys its handshake uses (at least 1).
    pub generation: u32,
    /// The traffic class the QP was created in.
    pub class: Option<u8>,
    remote: Option<Endpoint>,
    /// The peer has been told of this generation (on the link's first QP).
    pub announced: bool,
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
        Self::published_in(peer, qp, None)
    }

    /// A link to `peer` whose endpoint (QP `qp`, created in traffic class `class`) was just
    /// published.
    pub fn published_in(peer: u32, qp: QpNum, class: Option<u8>) -> Self {
        PeerLink {
            peer,
            qp,
            phase: LinkPhase::Published,
            remote: None,
            forged: 0,
            class,
            legs: Vec::new(),
        }
    }

    /// The link's legs, oldest first.
    pub fn legs(&self) -> &[Leg] {
        &self.legs
    }

    /// The class the link's class-bound traffic would run in now: the newest QP's that has not
    /// failed (a leg still in its handshake counts: it is on its way).
    fn newest_class(&self) -> Option<u8> {
        self.legs
            .iter()
            .rev()
            .find(|l| l.phase != LinkPhase::Failed)
            .map_or(self.class, |l| l.class)
    }

    /// Whether the link needs a leg in `class`: it is up or coming up, its newest QP is in
    /// another class, and a generation is left.
    pub fn wants_reclass(&self, class: Option<u8>) -> bool {
        self.phase != LinkPhase::Failed
            && self.newest_class() != class
            && self.next_generation() < MAX_GENERATIONS
    }

    /// The generation a new leg of ours would take.
    pub fn next_generation(&self) -> u32 {
        self.legs.iter().map(|l| l.generation).max().unwrap_or(0) + 1
    }

    /// Whether the peer's request for generation `generation` calls for a new leg here: we have
    /// none of it yet and it is within [`MAX_GENERATIONS`].
    pub fn wants_generation(&self, generation: u32) -> bool {
        self.phase != LinkPhase::Failed
            && (1..MAX_GENERATIONS).contains(&generation)
            && !self.legs.iter().any(|l| l.generation == generation)
    }

    /// Starts a leg: QP `qp`, created in `class`, whose endpoint the caller has just published
    /// under generation `generation`'s keys. `announced`: the peer asked for it (so it need not
    /// be told).
    pub fn reclass(&mut self, qp: QpNum, class: Option<u8>, generation: u32, announced: bool) {
        self.legs.push(Leg {
            qp,
            phase: LinkPhase::Published,
            generation,
            class,
            remote: None,
            announced,
        });
    }

    /// Legs the peer has not been told of yet (marks them told).
    pub fn take_unannounced(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        for l in self.legs.iter_mut().filter(|l| !l.announced) {
            l.announced = true;
            out.push(l.generation);
        }
        out
    }

    /// The QP the class-bound traffic goes on now and its class: the newest ready leg, else the
    /// first QP (None while the link is not ready).
    pub fn class_qp(&self) -> Option<(QpNum, Option<u8>)> {
        if !self.is_ready() {
            return None;
        }
        Some(
            self.legs
                .iter()
                .rev()
                .find(|l| l.phase == LinkPhase::Ready)
                .map_or((self.qp, self.class), |l| (l.qp, l.class)),
        )
    }

    /// Whether `qp` is one of the link's QPs.
    pub fn owns(&self, qp: QpNum) -> bool {
        self.qp == qp || self.legs.iter().any(|l| l.qp == qp)
    }

    /// Every handshake is over (each QP ready or failed).
    pub fn settled(&self) -> bool {
        let done = |p: LinkPhase| matches!(p, LinkPhase::Ready | LinkPhase::Failed);
        done(self.phase) && self.legs.iter().all(|l| done(l.phase))
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

    /// Moves every leg's handshake one step on, as [`PeerLink::advance`] does the first QP's;
    /// `keys(generation)` are a generation's board keys, `ours(qp)` our endpoint of a QP. A leg
    /// whose endpoint on the board is not on the peer's host, or whose connect fails, fails
    /// alone (the link keeps its other QPs). Returns whether a leg still waits, and the legs'
    /// errors.
    pub fn advance_legs(
        &mut self,
        v: &mut dyn Verbs,
        board: &SharedBoard,
        keys: impl Fn(u32) -> LinkKeys,
        ours: impl Fn(QpNum) -> Endpoint,
    ) -> (bool, Vec<LinkError>) {
        let mut waiting = false;
        let mut errors = Vec::new();
        if self.phase == LinkPhase::Failed {
            return (false, errors);
        }
        for leg in self.legs.iter_mut() {
            let k = keys(leg.generation);
            if leg.phase == LinkPhase::Published {
                if let Some(ep) = board.borrow().lookup(k.conn, k.side.peer()) {
                    if ep.host != self.peer {
                        leg.phase = LinkPhase::Failed;
                        errors.push(LinkError::Impostor(ep));
                        continue;
                    }
                }
            }
            let mut remote = None;
            match k.advance(v, board, ours(leg.qp), &mut leg.phase, |_, peer| {
                remote = Some(peer)
            }) {
                Ok(w) => waiting |= w,
                Err(e) => errors.push(LinkError::Verbs(e)),
            }
            leg.remote = leg.remote.or(remote);
        }
        (waiting, errors)
    }

    /// Whether a receive completion on the link came from the peer's QP. One that did not is
    /// counted in `forged`; the caller drops it (re-posting the receive it consumed).
    /// A receive on a leg must come from the peer's QP of the same generation.
    pub fn from_peer(&mut self, wc: &WorkCompletion) -> bool {
        let remote = if wc.qp_num == self.qp {
            self.remote
        } else {
            self.legs
                .iter()
                .find(|l| l.qp == wc.qp_num)
                .and_then(|l| l.remote)
        };
        let ok = remote.is_some_and(|r| wc.src_host == r.host && wc.src_qp == r.qpn);
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

    /// QP `qp` of the link failed: the whole link if it is the first QP (which carries the
    /// control messages), else that leg alone. Returns whether it was up to now.
    pub fn fail_qp(&mut self, qp: QpNum) -> bool {
        if qp == self.qp {
            return self.fail();
        }
        match self.legs.iter_mut().find(|l| l.qp == qp) {
            Some(l) => std::mem::replace(&mut l.phase, LinkPhase::Failed) != LinkPhase::Failed,
            None => false,
        }
    }

    /// The board's patience ran out: a link still waiting for its peer fails. Returns whether
    /// this one did.
    pub fn give_up(&mut self) -> bool {
        for l in self.legs.iter_mut() {
            if matches!(l.phase, LinkPhase::Published | LinkPhase::Connected) {
                l.phase = LinkPhase::Failed;
            }
        }
        if matches!(self.phase, LinkPhase::Published | LinkPhase::Connected) {
            self.phase = LinkPhase::Failed;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests;
