//! Out-of-band connection setup: what rdma_cm or a TCP socket does on a real host.
//!
//! Both ends of a connection publish an [`Endpoint`] under a key they agree on (a connection id
//! and a side) and, once both are there, connect their QPs. The simulator implements the board
//! as a shared map; a real backend would exchange the same records over TCP. [`connect_all`] is
//! the loop every application and middleware otherwise writes again.

use crate::{QpNum, RemoteQp, Verbs, VerbsError};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// One end of a connection as exchanged out of band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub host: u32,
    pub qpn: QpNum,
    /// The memory the peer may access (WRITE target, READ source) and its key.
    pub addr: u64,
    pub rkey: u32,
}

impl Endpoint {
    pub fn remote(&self) -> RemoteQp {
        RemoteQp {
            host: self.host,
            qpn: self.qpn,
            udp_sport: None,
        }
    }
}

/// Which end of a connection an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn peer(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// The board both ends of a connection publish on.
pub trait Rendezvous {
    fn publish(&mut self, conn: u64, side: Side, ep: Endpoint);
    fn lookup(&self, conn: u64, side: Side) -> Option<Endpoint>;
}

/// An in-process board (one simulation, or a test).
#[derive(Debug, Default)]
pub struct Board {
    map: HashMap<(u64, Side), Endpoint>,
}

impl Rendezvous for Board {
    fn publish(&mut self, conn: u64, side: Side, ep: Endpoint) {
        self.map.insert((conn, side), ep);
    }
    fn lookup(&self, conn: u64, side: Side) -> Option<Endpoint> {
        self.map.get(&(conn, side)).copied()
    }
}

/// A board shared by the applications of one run.
pub type SharedBoard = Rc<RefCell<dyn Rendezvous>>;

/// A new, empty shared board.
pub fn board() -> SharedBoard {
    Rc::new(RefCell::new(Board::default()))
}

/// Connects each local QP `qps[i]` (published as connection `conn0 + i`, side `side`) to its
/// peer's endpoint; returns the peers' endpoints in order.
pub fn connect_all(
    v: &mut dyn Verbs,
    board: &SharedBoard,
    conn0: u64,
    side: Side,
    qps: &[QpNum],
) -> Result<Vec<Endpoint>, VerbsError> {
    let mut peers = Vec::with_capacity(qps.len());
    for (i, &qp) in qps.iter().enumerate() {
        let r = board.borrow().lookup(conn0 + i as u64, side.peer()).ok_or(
            VerbsError::InvalidState("the peer has not published its endpoint"),
        )?;
        v.connect_qp(qp, r.remote())?;
        peers.push(r);
    }
    Ok(peers)
}

/// Where a link (a QP between two hosts' agents: DRUM's pipes, PeRF's READ links, Justitia's
/// pacer links) is in the board handshake: publish its endpoint, connect once the peer's is
/// there, publish "ready", carry traffic once the peer's "ready" is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkPhase {
    Published,
    Connected,
    Ready,
    Failed,
}

/// One link's records on the board: its endpoint under `conn`, its "ready" record under
/// `ready`, both as `side` (the other host publishes as the other side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkKeys {
    pub conn: u64,
    pub ready: u64,
    pub side: Side,
}

impl LinkKeys {
    /// The keys of the link between hosts `me` and `peer`; the lower host is the client.
    pub fn between(me: u32, peer: u32, conn: u64, ready: u64) -> Self {
        let side = if me < peer {
            Side::Client
        } else {
            Side::Server
        };
        LinkKeys { conn, ready, side }
    }

    /// Publishes our endpoint of a new link (its phase is then [`LinkPhase::Published`]).
    pub fn publish(&self, board: &SharedBoard, ep: Endpoint) {
        board.borrow_mut().publish(self.conn, self.side, ep);
    }

    /// Moves the link one step on: Published → (the peer's endpoint is there) connect QP `ep.qpn`,
    /// run `on_connect` (post the link's receives), publish "ready" → Connected → (the peer's
    /// "ready" is there) Ready. Returns whether the link still waits for the peer; a failed
    /// connect leaves it `Failed` and returns the error.
    pub fn advance(
        &self,
        v: &mut dyn Verbs,
        board: &SharedBoard,
        ep: Endpoint,
        phase: &mut LinkPhase,
        on_connect: impl FnOnce(&mut dyn Verbs, Endpoint),
    ) -> Result<bool, VerbsError> {
        if *phase == LinkPhase::Published {
            let Some(peer) = board.borrow().lookup(self.conn, self.side.peer()) else {
                return Ok(true);
            };
            if let Err(e) = v.connect_qp(ep.qpn, peer.remote()) {
                *phase = LinkPhase::Failed;
                return Err(e);
            }
            on_connect(v, peer);
            *phase = LinkPhase::Connected;
            board.borrow_mut().publish(self.ready, self.side, ep);
        }
        if *phase == LinkPhase::Connected {
            if board
                .borrow()
                .lookup(self.ready, self.side.peer())
                .is_none()
            {
                return Ok(true);
            }
            *phase = LinkPhase::Ready;
        }
        Ok(false)
    }
}

/// Waiting on the board for a set of links: the agent looks again on a timer that backs off
/// (1 µs doubling to 1 ms), and gives up on links still waiting after `patience` picoseconds.
#[derive(Debug, Clone)]
pub struct BoardWait {
    since: Option<u64>,
    backoff: u64,
    timer: bool,
    patience: u64,
}

impl BoardWait {
    pub fn new(patience_ps: u64) -> Self {
        BoardWait {
            since: None,
            backoff: 1_000_000,
            timer: false,
            patience: patience_ps,
        }
    }

    /// Nothing is waiting (the links, if any, are up or failed).
    pub fn idle(&self) -> bool {
        self.since.is_none()
    }

    /// The timer armed by [`BoardWait::after_pass`] fired.
    pub fn fired(&mut self) {
        self.timer = false;
    }

    /// After a pass over the links, `waiting` whether some still wait for their peer: arms
    /// timer `token` to look again, or returns true when the patience ran out (the caller fails
    /// the links still waiting).
    pub fn after_pass(&mut self, v: &mut dyn Verbs, waiting: bool, token: u64) -> bool {
        let now = v.now();
        if !waiting {
            self.since = None;
            self.backoff = 1_000_000;
            return false;
        }
        let since = *self.since.get_or_insert(now);
        if now - since > self.patience {
            self.since = None;
            return true;
        }
        if !self.timer {
            self.timer = true;
            v.set_timer(now + self.backoff, token);
            self.backoff = (self.backoff * 2).min(1_000_000_000);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeNet, NetConfig};
    use crate::{Idle, QpInit};

    #[test]
    fn a_link_comes_up_once_both_ends_published_and_connected() {
        let mut net = FakeNet::with_config(2, NetConfig::default());
        let t: Vec<_> = [1, 2]
            .into_iter()
            .map(|h| net.add_tenant_with(h, Box::new(Idle), &[]).unwrap())
            .collect();
        net.run();
        let b = board();
        let mut ends = Vec::new();
        for (i, h) in [1u32, 2].into_iter().enumerate() {
            let qp = net.call_as(h, t[i], |v| {
                let cq = v.create_cq(16).unwrap();
                v.create_qp(&QpInit::rc(cq)).unwrap()
            });
            let keys = LinkKeys::between(h, 3 - h, 77, 78);
            let ep = Endpoint {
                host: h,
                qpn: qp,
                addr: 0x1000 * h as u64,
                rkey: h,
            };
            ends.push((h, t[i], keys, ep, LinkPhase::Published));
        }
        assert_eq!(ends[0].2.side, Side::Client);
        assert_eq!(ends[1].2.side, Side::Server);
        let mut connected = Vec::new();
        let mut step = |net: &mut FakeNet, e: &mut (u32, u32, LinkKeys, Endpoint, LinkPhase)| {
            let (h, tid, keys, ep, mut phase) = *e;
            let w = net
                .call_as(h, tid, |v| {
                    keys.advance(v, &b, ep, &mut phase, |_, peer| connected.push((h, peer)))
                })
                .unwrap();
            e.4 = phase;
            w
        };
        ends[0].2.publish(&b, ends[0].3);
        // Host 2 has not published: host 1 waits.
        assert!(step(&mut net, &mut ends[0]));
        assert_eq!(ends[0].4, LinkPhase::Published);
        ends[1].2.publish(&b, ends[1].3);
        // Host 2 connects and waits for host 1's "ready"; host 1 connects and sees host 2's.
        assert!(step(&mut net, &mut ends[1]));
        assert_eq!(ends[1].4, LinkPhase::Connected);
        assert!(!step(&mut net, &mut ends[0]));
        assert_eq!(ends[0].4, LinkPhase::Ready);
        assert!(!step(&mut net, &mut ends[1]));
        assert_eq!(ends[1].4, LinkPhase::Ready);
        assert!(!step(&mut net, &mut ends[1]), "Ready stays Ready");
        // Each end connected once, to the other's endpoint.
        assert_eq!(connected, vec![(2, ends[0].3), (1, ends[1].3)]);
    }

    #[test]
    fn waiting_backs_off_then_gives_up_after_the_patience() {
        let mut net = FakeNet::with_config(1, NetConfig::default());
        let t = net.add_tenant_with(1, Box::new(Idle), &[]).unwrap();
        net.run();
        let mut w = BoardWait::new(10_000_000);
        assert!(w.idle());
        assert!(!net.call_as(1, t, |v| w.after_pass(v, true, 5)));
        assert!(!w.idle());
        // A second pass before the timer fired arms nothing more.
        assert!(!net.call_as(1, t, |v| w.after_pass(v, true, 5)));
        let t0 = net.now();
        net.run_until(t0 + 11_000_000);
        w.fired();
        assert!(net.call_as(1, t, |v| w.after_pass(v, true, 5)), "gave up");
        assert!(w.idle());
        // Nothing waiting: idle, no timer.
        assert!(!net.call_as(1, t, |v| w.after_pass(v, false, 5)));
        assert!(w.idle());
    }
}
