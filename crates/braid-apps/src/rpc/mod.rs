//! Request and reply over RDMA messages: the engine under the two-sided KV store
//! ([`crate::kv`]) and the Redis-like application ([`crate::redis`]).
//!
//! A client keeps `tx_depth` requests outstanding on each of its connections; every request is a
//! message (a 16-byte header, then a PUT's value) and gets a reply (a header, then a GET's
//! value). Messages travel one of two ways ([`Wire`]):
//!
//! - **two-sided**: SENDs into RECVs. The client posts the RECVs of a reply before it sends the
//!   request (so a reply never waits for a buffer); the server keeps a ring of RECVs on every
//!   connection, reposted as they complete, and copies a PUT's value from the ring into its store.
//! - **one-sided**: RDMA WRITEs into the peer's memory: the request into the server's inbox slot
//!   for the connection, the reply into the client's reply buffer. A plain WRITE gives the target
//!   no event, and braid's simulated memory has no bytes to poll by default, so the last WRITE of
//!   each message carries an immediate value: its receive completion is the doorbell (the
//!   original Redis RDMA module's `write_with_imm`). RC delivers in order, so every earlier WRITE
//!   of the message has landed when it completes.
//!
//! A message longer than `chunk` bytes goes as several WRs of at most `chunk` bytes (only the
//! last signaled); the receiver of a two-sided message consumes one RECV per piece.
//!
//! **Where the request's description comes from.** With `verify` on, every region keeps its
//! bytes (tracked memory; a real NIC always does): the server reads each request's header and the
//! client checks every reply's header and every GET's value byte for byte against what it PUT
//! (each connection owns [`KEYS`] keys, so it knows what each must hold; a GET of `n` bytes reads
//! the first `n` bytes of the key's value slot, as the one-sided KV's READ does). Without it
//! (the default: simulations of many large values, and the DRUM agent, which does not carry
//! bytes through its global buffer), payloads are sizes only, and the server takes each
//! request's (op, key, size) from the same seeded per-connection request stream the client
//! draws from: RC keeps a connection's requests in order, so the two agree. Timing is the same
//! either way.

use braid_verbs::*;

mod client;
mod server;
pub use client::RpcClient;
pub use server::RpcServer;

/// Bytes of a request's or a reply's header.
pub const HDR: u64 = 16;
/// Keys per connection.
pub const KEYS: u32 = 2;

/// A request's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read a value (KV GET, Redis GET): the reply carries `size` bytes.
    Get,
    /// Store a value (KV PUT, Redis SET): the request carries `size` bytes.
    Put,
    /// Neither (Redis PING): header-only request and reply.
    Ping,
}

impl Op {
    fn code(self) -> u8 {
        match self {
            Op::Get => 1,
            Op::Put => 2,
            Op::Ping => 3,
        }
    }
    fn from_code(c: u8) -> Option<Op> {
        match c {
            1 => Some(Op::Get),
            2 => Some(Op::Put),
            3 => Some(Op::Ping),
            _ => None,
        }
    }
}

/// One request: its operation, key (below [`KEYS`]) and value size in bytes (0 for PING).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Req {
    pub op: Op,
    pub key: u32,
    pub size: u64,
}

impl Req {
    /// Bytes of the request message.
    pub fn request_len(&self) -> u64 {
        HDR + if self.op == Op::Put { self.size } else { 0 }
    }
    /// Bytes of the reply message.
    pub fn reply_len(&self) -> u64 {
        HDR + if self.op == Op::Get { self.size } else { 0 }
    }
    /// Value bytes the request moves (what the flow's progress counts).
    pub fn value_bytes(&self) -> u64 {
        if self.op == Op::Ping {
            0
        } else {
            self.size
        }
    }
}

/// A connection's next request, by connection index (0-based within the application). Client
/// and server of one application get two copies of the same per-connection streams.
pub type ReqDraw = Box<dyn FnMut(usize) -> Req>;

/// A request stream per connection (`app-rpc`, app `index`, connection `c`), drawn by `f`; the
/// client and the server each get one, and draw the same requests in the same order.
pub(crate) fn per_connection(
    draws: crate::SharedDraws,
    index: u64,
    f: impl Fn(&mut dyn crate::Draw) -> Req + 'static,
) -> ReqDraw {
    let mut streams: Vec<Box<dyn crate::Draw>> = Vec::new();
    Box::new(move |c: usize| {
        while streams.len() <= c {
            streams.push(draws.stream("app-rpc", &[index, streams.len() as u64]));
        }
        f(streams[c].as_mut())
    })
}

/// A request/reply application's two ends (server, client) with `rpc`'s protocol, each drawing
/// its requests from its own copy of the per-connection streams `draw` makes.
pub(crate) fn build_pair(
    spec: &crate::PerfSpec,
    rpc: RpcSpec,
    e: crate::AppEnds,
    draw: impl Fn() -> ReqDraw,
) -> (Box<dyn App>, Box<dyn App>) {
    let server = RpcServer::new(
        spec.clone(),
        rpc,
        e.flow,
        e.conn0,
        e.meter.clone(),
        e.rdv.clone(),
        e.server_base,
        draw(),
    );
    let client = RpcClient::new(
        spec.clone(),
        rpc,
        e.flow,
        e.conn0,
        e.meter,
        e.rdv,
        e.client_base,
        draw(),
    );
    (Box::new(server), Box::new(client))
}

/// A value size uniform in [`lo`, `hi`] from a uniform draw `u` in [0, 1).
pub(crate) fn size_in(lo: u64, hi: u64, u: f64) -> u64 {
    (lo + ((hi - lo + 1) as f64 * u) as u64).min(hi)
}

/// `min_size` checked against `size` (a value from 1 B up to it): the smallest value of the
/// range [`min_size`, `size`] values are drawn from (absent: all `size`; `size` at least 1).
pub(crate) fn check_min_size(
    c: &crate::AppCommon,
    min_size: Option<u64>,
) -> Result<u64, crate::KeyError> {
    if min_size.is_some_and(|m| m == 0 || m > c.size) {
        return Err(crate::KeyError::new(
            "min_size",
            "expected a size from 1 B up to the app's `size`",
        ));
    }
    let hi = c.size.max(1);
    Ok(min_size.map_or(hi, |m| m).min(hi))
}

/// `verify` keeps every value's bytes in memory: the keys' bound on it.
pub(crate) fn check_verify(c: &crate::AppCommon, verify: bool) -> Result<(), crate::KeyError> {
    if verify && c.size > 64 << 20 {
        return Err(crate::KeyError::new(
            "verify",
            "checked values keep their bytes in memory: expected size up to 64 MiB with verify",
        ));
    }
    Ok(())
}

/// How messages travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// RDMA WRITEs into the peer's memory, the last with immediate data.
    OneSided,
    /// SEND / RECV.
    TwoSided,
}

/// The request/reply protocol's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcSpec {
    pub wire: Wire,
    /// The largest WR a message is split into (bytes, at least `HDR + 1`); `u64::MAX`: none.
    pub chunk: u64,
    /// Carry real bytes and check them (tracked memory).
    pub verify: bool,
}

/// What a client checked (with `verify`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RpcStats {
    /// Replies whose header and value matched.
    pub verified: u64,
    /// Replies that did not (the connection then stops, and the flow never finishes).
    pub mismatched: u64,
    pub gets: u64,
    pub puts: u64,
    pub pings: u64,
}

/// Encodes a header: op (or status), key, length.
pub(crate) fn header(op: Op, key: u32, len: u64) -> [u8; HDR as usize] {
    let mut h = [0u8; HDR as usize];
    h[0] = op.code();
    h[4..8].copy_from_slice(&key.to_le_bytes());
    h[8..16].copy_from_slice(&len.to_le_bytes());
    h
}

pub(crate) fn parse(h: &[u8]) -> Option<Req> {
    if h.len() < HDR as usize {
        return None;
    }
    Some(Req {
        op: Op::from_code(h[0])?,
        key: u32::from_le_bytes(h[4..8].try_into().ok()?),
        size: u64::from_le_bytes(h[8..16].try_into().ok()?),
    })
}

/// The value a client PUTs: unique to (connection, key, request number).
pub(crate) fn value_bytes(conn: u32, key: u32, seq: u64, len: u64) -> Vec<u8> {
    let salt = conn.wrapping_mul(0x9E37_79B9) ^ key.wrapping_mul(0x85EB_CA6B) ^ (seq as u32);
    (0..len as u32)
        .map(|i| (i.wrapping_mul(31) ^ salt ^ (i >> 8).wrapping_mul(7) ^ (salt >> 13)) as u8)
        .collect()
}

/// The pieces `[off, off + len)` of a message of `total` bytes cut at `chunk`.
pub(crate) fn pieces(total: u64, chunk: u64) -> Vec<(u64, u64)> {
    let c = chunk.max(1);
    let mut v = Vec::new();
    let mut off = 0;
    while off < total {
        let l = (total - off).min(c);
        v.push((off, l));
        off += l;
    }
    if v.is_empty() {
        v.push((0, 0));
    }
    v
}

// wr_id: connection index in bits 0..24, what the WR is in 24..32, a slot in 32..64.
pub(crate) const SEND_PIECE: u64 = 1;
pub(crate) const REPLY_RECV: u64 = 2;
pub(crate) const REQ_RECV: u64 = 3;
pub(crate) fn wr_id(i: usize, tag: u64, slot: u64) -> u64 {
    i as u64 | tag << 24 | slot << 32
}
pub(crate) fn wr_conn(id: u64) -> usize {
    (id & 0xFF_FFFF) as usize
}
pub(crate) fn wr_tag(id: u64) -> u64 {
    (id >> 24) & 0xFF
}
pub(crate) fn wr_slot(id: u64) -> u64 {
    id >> 32
}

/// Posts a message: the pieces of `[addr, addr + len)` as SENDs (two-sided) or as WRITEs to
/// `remote` (one-sided, the last with immediate data `imm`). Only the last is signaled.
#[allow(clippy::too_many_arguments)]
pub(crate) fn post_message(
    v: &mut dyn Verbs,
    qp: QpNum,
    spec: &RpcSpec,
    sg: &[Sge],
    len: u64,
    remote: (u64, u32),
    imm: u32,
    id: u64,
) -> Result<(), VerbsError> {
    let ps = pieces(len, spec.chunk);
    let n = ps.len();
    let mut wrs = Vec::with_capacity(n);
    for (k, &(off, l)) in ps.iter().enumerate() {
        let last = k + 1 == n;
        let op = match (spec.wire, last) {
            (Wire::TwoSided, _) => SendOp::Send,
            (Wire::OneSided, false) => SendOp::Write,
            (Wire::OneSided, true) => SendOp::WriteWithImm(imm),
        };
        let mut wr = SendWr::new(id, op, slice_sges(sg, off, l));
        wr.signaled = last;
        if spec.wire == Wire::OneSided {
            wr.remote_addr = remote.0 + off;
            wr.rkey = remote.1;
        }
        wrs.push(wr);
    }
    if wrs.len() == 1 {
        v.post_send(qp, wrs.pop().expect("one"))
    } else {
        v.post_send_list(qp, wrs).map_err(|b| b.error)
    }
}

pub(crate) fn access(verify: bool) -> Access {
    if verify {
        Access::ALL.tracked()
    } else {
        Access::ALL
    }
}
