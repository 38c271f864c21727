//! The drum tests' common setup over the fake NIC: hosts with tenants under a middleware, a
//! tenant's end of a connection (CQ, QP, region), pairs of ends connected, the WRs and polls
//! the tests use, and a byte pattern. Used by `drum/tests.rs` and the files of `drum/tests/`.

use braid_verbs::testing::{Call, FakeNet, NetConfig};
use braid_verbs::*;

pub(super) const H1: u32 = 1;
pub(super) const H2: u32 = 2;
pub(super) const H3: u32 = 3;

/// One tenant's end of a connection: its CQ (send and receive), QP and 1 MiB region.
#[derive(Debug, Clone, Copy)]
pub(super) struct End {
    pub host: u32,
    pub t: TenantId,
    pub cq: CqId,
    pub qp: QpNum,
    pub mr: MemoryRegion,
}

pub(super) fn end(net: &mut FakeNet, host: u32, t: TenantId, base: u64, access: Access) -> End {
    end_sized(net, host, t, base, 1 << 20, access)
}

/// An end whose region has `len` bytes.
pub(super) fn end_sized(
    net: &mut FakeNet,
    host: u32,
    t: TenantId,
    base: u64,
    len: u64,
    access: Access,
) -> End {
    net.call_as(host, t, |v| {
        let cq = v.create_cq(1 << 16).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        let mr = v.reg_mr(base, len, access).unwrap();
        End {
            host,
            t,
            cq,
            qp,
            mr,
        }
    })
}

pub(super) fn rq(e: &End) -> RemoteQp {
    RemoteQp {
        host: e.host,
        qpn: e.qp,
        udp_sport: None,
    }
}

pub(super) fn connect(net: &mut FakeNet, a: &End, b: &End) {
    net.call_as(a.host, a.t, |v| v.connect_qp(a.qp, rq(b)))
        .unwrap();
    net.call_as(b.host, b.t, |v| v.connect_qp(b.qp, rq(a)))
        .unwrap();
}

pub(super) fn poll(net: &mut FakeNet, e: &End) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    net.call_as(e.host, e.t, |v| while v.poll_cq(e.cq, 64, &mut out) > 0 {});
    out
}

/// (wr_id, status) of what `e` polls now.
pub(super) fn statuses(net: &mut FakeNet, e: &End) -> Vec<(u64, WcStatus)> {
    poll(net, e).iter().map(|w| (w.wr_id, w.status)).collect()
}

pub(super) fn state(net: &mut FakeNet, e: &End) -> QpState {
    net.call_as(e.host, e.t, |v| v.query_qp(e.qp))
        .unwrap()
        .state
}

pub(super) fn write(e: &End, peer: &End, wr_id: u64, off: u64, len: u32) -> SendWr {
    let mut wr = SendWr::new(
        wr_id,
        SendOp::Write,
        vec![Sge {
            addr: e.mr.addr + off,
            length: len,
            lkey: e.mr.lkey,
        }],
    );
    wr.remote_addr = peer.mr.addr + off;
    wr.rkey = peer.mr.rkey;
    wr
}

pub(super) fn send(e: &End, wr_id: u64, len: u32) -> SendWr {
    SendWr::new(
        wr_id,
        SendOp::Send,
        vec![Sge {
            addr: e.mr.addr,
            length: len,
            lkey: e.mr.lkey,
        }],
    )
}

/// A 4 KiB receive at the start of `e`'s region.
pub(super) fn recv(e: &End, wr_id: u64) -> RecvWr {
    recv_at(e, wr_id, 0, 4096)
}

/// A receive of `len` bytes at offset `off` of `e`'s region.
pub(super) fn recv_at(e: &End, wr_id: u64, off: u64, len: u32) -> RecvWr {
    RecvWr {
        wr_id,
        sg_list: vec![Sge {
            addr: e.mr.addr + off,
            length: len,
            lkey: e.mr.lkey,
        }],
    }
}

/// A net of two hosts (H1, H2) whose tenants (`per_host` on each) all run `f`; returns the
/// net and the tenants' ids per host, agents started.
pub(super) fn net_with(
    f: &dyn MiddlewareFactory,
    per_host: u32,
    cfg: NetConfig,
) -> (FakeNet, Vec<TenantId>, Vec<TenantId>) {
    let mut net = FakeNet::with_config(2, cfg);
    let mut t = [Vec::new(), Vec::new()];
    for (i, h) in [H1, H2].into_iter().enumerate() {
        for _ in 0..per_host {
            t[i].push(net.add_tenant_with(h, Box::new(Idle), &[f]).unwrap());
        }
    }
    net.run();
    let [a, b] = t;
    (net, a, b)
}

/// [`net_with`] one memory per host, as the simulator and a real host have (`host_memory`):
/// two tenants' regions over the same addresses hold the same bytes, so what keeps a tenant
/// from another's memory is the protection the agent and the NIC check, not the address space.
pub(super) fn net_of(
    f: &dyn MiddlewareFactory,
    per_host: u32,
) -> (FakeNet, Vec<TenantId>, Vec<TenantId>) {
    net_with(
        f,
        per_host,
        NetConfig {
            host_memory: true,
            ..NetConfig::default()
        },
    )
}

/// Ends for tenants `a[i]` on H1 and `b[i]` on H2, connected pairwise, the net run until the
/// pipes are up. `spread`: each pair's regions at an address of their own (tenants of one host
/// share its memory under raw RDMA with host memory).
pub(super) fn pairs(
    net: &mut FakeNet,
    a: &[TenantId],
    b: &[TenantId],
    access: Access,
    spread: bool,
) -> (Vec<End>, Vec<End>) {
    let base = |i: usize| {
        if spread {
            0x1000_0000 * (i as u64 + 1)
        } else {
            0x1000_0000
        }
    };
    let ea: Vec<End> = a
        .iter()
        .enumerate()
        .map(|(i, &t)| end(net, H1, t, base(i), access))
        .collect();
    let eb: Vec<End> = b
        .iter()
        .enumerate()
        .map(|(i, &t)| end(net, H2, t, base(i), access))
        .collect();
    for (x, y) in ea.iter().zip(&eb) {
        connect(net, x, y);
    }
    net.run();
    (ea, eb)
}

/// `n` connections from tenants on H1 to tenants on H2 under `f`, connected, pipes ready.
pub(super) fn setup(f: &dyn MiddlewareFactory, n: usize) -> (FakeNet, Vec<End>, Vec<End>) {
    let (mut net, a, b) = net_of(f, n as u32);
    let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL, false);
    (net, ea, eb)
}

pub(super) fn agent_sends(net: &FakeNet, host: u32) -> Vec<(QpNum, SendWr)> {
    net.calls_of(host, AGENT)
        .into_iter()
        .filter_map(|c| match c {
            Call::PostSend(q, w) => Some((q, w)),
            _ => None,
        })
        .collect()
}

/// The agent's shared QPs on `host`, in the order it connected them.
pub(super) fn pipes(net: &FakeNet, host: u32) -> Vec<QpNum> {
    net.calls_of(host, AGENT)
        .into_iter()
        .filter_map(|c| match c {
            Call::Connect(q, _) => Some(q),
            _ => None,
        })
        .collect()
}

pub(super) fn counter(net: &FakeNet, host: u32, t: TenantId, name: &str) -> f64 {
    net.counters(host, t)
        .into_iter()
        .find(|(_, k, _)| *k == name)
        .map_or(f64::NAN, |x| x.2)
}

/// `n` bytes of a pattern that differs with `seed` (xorshift).
pub(super) fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
