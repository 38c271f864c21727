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
