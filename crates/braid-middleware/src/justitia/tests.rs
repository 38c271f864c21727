//! Justitia's rules, each on the fake NIC (or on the host state alone) so that a wrong rule fails.

use super::agent::HostState;
use super::*;
use braid_verbs::testing::{Call, FakeNet, NetConfig};
use braid_verbs::*;

const H1: u32 = 1;
const H2: u32 = 2;
const MB: u64 = 1_000_000;

/// One tenant's end of a connection: CQ, QP and a tracked buffer.
#[derive(Debug, Clone, Copy)]
struct End {
    host: u32,
    t: TenantId,
    cq: CqId,
    qp: QpNum,
    mr: MemoryRegion,
}

fn end(
    net: &mut FakeNet,
    host: u32,
    t: TenantId,
    base: u64,
    len: u64,
    init: fn(CqId) -> QpInit,
) -> End {
    net.call_as(host, t, |v| {
        let cq = v.create_cq(1 << 16).unwrap();
        let qp = v.create_qp(&init(cq)).unwrap();
        let mr = v.reg_mr(base, len, Access::ALL.tracked()).unwrap();
        End {
            host,
            t,
            cq,
            qp,
            mr,
        }
    })
}

fn connect(net: &mut FakeNet, a: &End, b: &End) {
    let (ra, rb) = (
        RemoteQp {
            host: a.host,
            qpn: a.qp,
            udp_sport: None,
        },
        RemoteQp {
            host: b.host,
            qpn: b.qp,
            udp_sport: None,
        },
    );
    net.call_as(a.host, a.t, |v| v.connect_qp(a.qp, rb))
        .unwrap();
    net.call_as(b.host, b.t, |v| v.connect_qp(b.qp, ra))
        .unwrap();
}

/// A WRITE of `len` bytes at `off` of `from`'s buffer to the same offset of `to`'s.
fn write(id: u64, from: &End, off: u64, len: u64, to: &End) -> SendWr {
    let sge = Sge {
        addr: from.mr.addr + off,
        length: len as u32,
        lkey: from.mr.lkey,
    };
    let mut wr = SendWr::new(id, SendOp::Write, vec![sge]);
    wr.remote_addr = to.mr.addr + off;
    wr.rkey = to.mr.rkey;
    wr
}

fn post(net: &mut FakeNet, e: &End, wr: SendWr) -> Result<(), VerbsError> {
    net.call_as(e.host, e.t, |v| v.post_send(e.qp, wr))
}

fn poll(net: &mut FakeNet, e: &End) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    while net.call_as(e.host, e.t, |v| v.poll_cq(e.cq, 7, &mut out)) > 0 {}
    out
}

/// The send WRs a tenant's stack posted to the NIC: (time, wr).
fn sends(net: &FakeNet, host: u32, t: TenantId) -> Vec<(u64, SendWr)> {
    net.calls()
        .iter()
        .filter(|l| l.host == host && l.tenant == t && l.ok)
        .filter_map(|l| match &l.call {
            Call::PostSend(_, w) => Some((l.at, w.clone())),
            _ => None,
        })
        .collect()
}

fn counter(net: &FakeNet, host: u32, t: TenantId, name: &str) -> f64 {
    net.counters(host, t)
        .into_iter()
        .find(|c| c.0 == "justitia" && c.1 == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .2
}

/// Two hosts; on H1 a bandwidth tenant `b` (and, if `with_lat`, a latency tenant `l`), their
/// peers on H2; every tenant runs justitia with `cfg`. Returns (net, b, b's peer, l, l's peer).
fn setup(cfg: &JustitiaConfig, with_lat: bool) -> (FakeNet, End, End, Option<(End, End)>) {
    let mut net = FakeNet::new(2);
    let f: &dyn MiddlewareFactory = cfg;
    let tb = net.add_tenant_with(H1, Box::new(Idle), &[f]).unwrap();
    let tb2 = net.add_tenant_with(H2, Box::new(Idle), &[f]).unwrap();
    let lat = with_lat.then(|| {
        let tl = net.add_tenant_with(H1, Box::new(Idle), &[f]).unwrap();
        let tl2 = net.add_tenant_with(H2, Box::new(Idle), &[f]).unwrap();
        (tl, tl2)
    });
    net.run_until(0);
    let b = end(&mut net, H1, tb, 0x1_0000_0000, 4 * MB, QpInit::rc);
    let b2 = end(&mut net, H2, tb2, 0x1_0000_0000, 4 * MB, QpInit::rc);
    connect(&mut net, &b, &b2);
    let lat = lat.map(|(tl, tl2)| {
        let l = end(&mut net, H1, tl, 0x2_0000_0000, 4096, QpInit::rc);
        let l2 = end(&mut net, H2, tl2, 0x2_0000_0000, 4096, QpInit::rc);
        connect(&mut net, &l, &l2);
        (l, l2)
    });
    (net, b, b2, lat)
}

/// A config whose controller never acts (a target no probe misses).
fn calm() -> JustitiaConfig {
    JustitiaConfig {
        target: braid_units::Duration(1_000_000_000_000),
        ..Default::default()
    }
}

#[test]
fn a_large_write_is_split_into_small_chunks_only_while_a_latency_tenant_is_present() {
    let (mut net, b, b2, lat) = setup(&calm(), true);
    let (l, l2) = lat.unwrap();
    // Alone: a 1 MB WRITE goes as one WR (one 1 MB chunk).
    post(&mut net, &b, write(1, &b, 0, MB, &b2)).unwrap();
    net.run_until(net.now() + 1_000_000_000);
    let s = sends(&net, H1, b.t);
    assert_eq!(s.len(), 1, "alone: one WR");
    assert_eq!((s[0].1.len(), s[0].1.wr_id), (MB, 1));
    assert_eq!(counter(&net, H1, b.t, "chunks"), 0.0);
    // A latency tenant appears (a 16 B WRITE): chunks of 5,000 B from now on.
    post(&mut net, &l, write(7, &l, 0, 16, &l2)).unwrap();
    assert_eq!(
        sends(&net, H1, l.t).len(),
        1,
        "the latency tenant's WR goes at once, untouched"
    );
    assert_eq!(sends(&net, H1, l.t)[0].1, write(7, &l, 0, 16, &l2));
    post(&mut net, &b, write(2, &b, 0, MB, &b2)).unwrap();
    net.run_until(net.now() + 1_000_000_000);
    let s = sends(&net, H1, b.t);
    assert_eq!(s.len(), 1 + 200, "1 MB in 5,000 B chunks");
    assert!(
        s[1..].iter().all(|(_, w)| w.len() == 5000),
        "every chunk is 5,000 B"
    );
    assert_eq!(counter(&net, H1, b.t, "chunks"), 200.0);
    assert_eq!(counter(&net, H1, b.t, "class"), 0.0, "bandwidth");
    assert_eq!(counter(&net, H1, l.t, "class"), 1.0, "latency");
    assert_eq!(counter(&net, H1, AGENT, "chunk_bytes"), 5000.0);
    // Both completions, one per signaled WR, with the application's wr_ids.
    let wcs = poll(&mut net, &b);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

#[test]
fn one_completion_per_signaled_application_wr_and_none_for_the_rest() {
    let (mut net, b, b2, _lat) = setup(&calm(), true);
    let (l, l2) = _lat.unwrap();
    post(&mut net, &l, write(99, &l, 0, 16, &l2)).unwrap();
    // Signaled 1 MB, unsignaled 1 MB, signaled 3,000 B (one chunk), unsignaled 12,345 B,
    // signaled 700,001 B.
    let plan: [(u64, u64, bool); 5] = [
        (10, MB, true),
        (11, MB, false),
        (12, 3000, true),
        (13, 12_345, false),
        (14, 700_001, true),
    ];
    let mut off = 0;
    for &(id, len, sig) in &plan {
        let mut wr = write(id, &b, off, len, &b2);
        wr.signaled = sig;
        post(&mut net, &b, wr).unwrap();
        off += len;
    }
    net.run_until(net.now() + 2_000_000_000);
    let wcs = poll(&mut net, &b);
    assert_eq!(
        wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        vec![10, 12, 14],
        "{wcs:?}"
    );
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
    // The chunks: 200 + 200 + 1 + 3 + 141, the hidden signaled ones among them.
    assert_eq!(
        counter(&net, H1, b.t, "chunks"),
        (200 + 200 + 3 + 141) as f64
    );
    assert!(counter(&net, H1, b.t, "hidden_completions") > 0.0);
    // An sq_sig_all QP signals every chunk: still one completion per application WR.
    let t3 = b.t;
    let e3 = end(&mut net, H1, t3, 0x3_0000_0000, MB, |cq| QpInit {
        sq_sig_all: true,
        ..QpInit::rc(cq)
    });
    let e4 = end(&mut net, H2, b2.t, 0x3_0000_0000, MB, QpInit::rc);
    connect(&mut net, &e3, &e4);
    let mut wr = write(21, &e3, 0, 60_000, &e4);
    wr.signaled = false;
    post(&mut net, &e3, wr).unwrap();
    net.run_until(net.now() + 1_000_000_000);
    let wcs = poll(&mut net, &e3);
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id, w.byte_len))
            .collect::<Vec<_>>(),
        vec![(21, 60_000)]
    );
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
}

#[test]
fn no_byte_is_lost_duplicated_or_reordered() {
    let (mut net, b, b2, lat) = setup(&calm(), true);
    let (l, l2) = lat.unwrap();
    post(&mut net, &l, write(99, &l, 0, 16, &l2)).unwrap();
    let data = pattern(3 * MB as usize, 7);
    net.write_mem(H1, b.t, b.mr.addr, &data);
    // Odd sizes, several SGEs per WR, a WRITE_WITH_IMM whose immediate must arrive once.
    let sges = |off: u64, parts: &[u64]| {
        let mut v = Vec::new();
        let mut o = off;
        for &p in parts {
            v.push(Sge {
                addr: b.mr.addr + o,
                length: p as u32,
                lkey: b.mr.lkey,
            });
            o += p;
        }
        v
    };
    let mut w1 = SendWr::new(1, SendOp::Write, sges(0, &[1, 4999, 123_457, 2, 1_000_000]));
    w1.remote_addr = b2.mr.addr;
    w1.rkey = b2.mr.rkey;
    let n1: u64 = w1.len();
    let mut w2 = SendWr::new(2, SendOp::WriteWithImm(0xBEEF), sges(n1, &[777_777, 5001]));
    w2.remote_addr = b2.mr.addr + n1;
    w2.rkey = b2.mr.rkey;
    let total = n1 + w2.len();
    net.call_as(H2, b2.t, |v| {
        v.post_recv(
            b2.qp,
            RecvWr {
                wr_id: 5,
                sg_list: vec![],
            },
        )
    })
    .unwrap();
    post(&mut net, &b, w1).unwrap();
    post(&mut net, &b, w2).unwrap();
    net.run_until(net.now() + 2_000_000_000);
    assert_eq!(
        net.nic(H2).read_mem(b2.t, b2.mr.addr, total),
        data[..total as usize].to_vec()
    );
    // Nothing beyond the range was touched.
    assert!(net
        .nic(H2)
        .read_mem(b2.t, b2.mr.addr + total, 4096)
        .iter()
        .all(|&x| x == 0));
    // The chunks cover the WRs exactly once, in order.
    let s = sends(&net, H1, b.t);
    let mut next = b2.mr.addr;
    for (_, w) in &s {
        assert_eq!(w.remote_addr, next, "chunks in order, no gap or overlap");
        next += w.len();
    }
    assert_eq!(next, b2.mr.addr + total);
    let imms: Vec<_> = s
        .iter()
        .filter(|(_, w)| matches!(w.op, SendOp::WriteWithImm(_)))
        .collect();
    assert_eq!(imms.len(), 1, "only the last chunk carries the immediate");
    let rx = poll(&mut net, &b2);
    assert_eq!(
        rx.iter().map(|w| (w.wr_id, w.imm)).collect::<Vec<_>>(),
        vec![(5, Some(0xBEEF))]
    );
    assert_eq!(
        poll(&mut net, &b)
            .iter()
            .map(|w| w.wr_id)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
}

#[test]
fn sges_are_sliced_by_byte_offset() {
    let sg = [
        Sge {
            addr: 100,
            length: 10,
            lkey: 1,
        },
        Sge {
            addr: 500,
            length: 5,
            lkey: 2,
        },
    ];
    assert_eq!(
        slice_sges(&sg, 8, 4),
        vec![
            Sge {
                addr: 108,
                length: 2,
                lkey: 1
            },
            Sge {
                addr: 500,
                length: 2,
                lkey: 2
            }
        ]
    );
    assert_eq!(
        slice_sges(&sg, 10, 5),
        vec![Sge {
            addr: 500,
            length: 5,
            lkey: 2
        }]
    );
    assert_eq!(slice_sges(&sg, 0, 15).len(), 2);
}

fn state(cfg: JustitiaConfig) -> HostState {
    let mut s = HostState::new(cfg, 100_000_000_000, 1);
    s.add_receiver(2);
    s
}

#[test]
fn capacity_halves_on_a_miss_never_below_the_share_and_grows_back() {
    let cfg = JustitiaConfig {
        increase: braid_units::Rate(10_000_000_000),
        ..Default::default()
    };
    let (miss, hit) = (3_000_000, 1_000_000);
    let mut s = state(cfg.clone());
    s.set_class(1, Class::Bandwidth);
    // No latency tenant: nothing to protect, the capacity stays at line rate.
    s.on_sample(0, miss);
    assert_eq!((s.capacity(), s.misses), (100_000_000_000, 0));
    s.set_class(2, Class::Latency);
    s.on_sample(0, miss);
    assert_eq!((s.capacity(), s.misses), (50_000_000_000, 1), "halved");
    s.on_sample(0, miss);
    assert_eq!(
        s.capacity(),
        50_000_000_000,
        "one bandwidth tenant's share (latency counts as one): 1/2"
    );
    s.on_sample(0, hit);
    assert_eq!(s.capacity(), 60_000_000_000, "grows back by `increase`");
    for _ in 0..10 {
        s.on_sample(0, hit);
    }
    assert_eq!(s.capacity(), 100_000_000_000, "never above the line rate");
    // Three bandwidth tenants: their share is 3/4.
    s.set_class(3, Class::Bandwidth);
    s.set_class(4, Class::Throughput);
    s.on_sample(0, miss);
    assert_eq!(s.capacity(), 75_000_000_000);
    // Without TREAT_L_AS_ONE: B / (B + L), here 1 / (1 + 3).
    let mut s = state(JustitiaConfig {
        latency_as_one: false,
        ..cfg
    });
    s.set_class(1, Class::Bandwidth);
    for t in 2..5 {
        s.set_class(t, Class::Latency);
    }
    for _ in 0..5 {
        s.on_sample(0, miss);
    }
    assert_eq!(s.capacity(), 25_000_000_000);
    // The latency tenants leave (here: the only one changes class): back to the line rate.
    let mut s = state(JustitiaConfig::default());
    s.set_class(1, Class::Bandwidth);
    s.set_class(2, Class::Latency);
    s.on_sample(0, miss);
    assert_eq!(s.capacity(), 50_000_000_000);
    s.set_class(2, Class::Bandwidth);
    assert_eq!(s.capacity(), 100_000_000_000);
}

#[test]
fn the_window_takes_the_nearest_rank_percentile_of_its_last_samples() {
    let mut w = window::Window::new(100);
    for x in 1..=100 {
        w.push(x);
    }
    assert_eq!(w.quantile(0.99), 99);
    assert_eq!(w.quantile(0.5), 50);
    assert_eq!(w.quantile(1.0), 100);
    for _ in 0..100 {
        w.push(7);
    }
    assert_eq!(w.quantile(0.99), 7, "old samples leave the window");
}

/// With the default 2 µs target and the fake net's 4 µs round trip, every reference sample
/// misses: the capacity falls to the share and the chunks are paced at it.
#[test]
fn the_reference_flow_misses_the_target_and_paces_the_chunks_at_the_share() {
    let (mut net, b, b2, lat) = setup(&JustitiaConfig::default(), true);
    let (l, l2) = lat.unwrap();
    post(&mut net, &l, write(99, &l, 0, 16, &l2)).unwrap();
    post(&mut net, &b, write(1, &b, 0, 8 * 5000, &b2)).unwrap();
    net.run_until(net.now() + 200_000_000);
    let samples = counter(&net, H1, AGENT, "samples");
    assert!(samples > 10.0, "back-to-back probes: {samples}");
    assert_eq!(counter(&net, H1, AGENT, "links_ready"), 1.0);
    assert_eq!(counter(&net, H2, AGENT, "links_ready"), 1.0);
    assert!(counter(&net, H1, AGENT, "tail_us") > 2.0);
    assert_eq!(counter(&net, H1, AGENT, "target_misses"), samples);
    assert_eq!(counter(&net, H1, AGENT, "capacity_gbps"), 50.0);
    // Pacing: a 4 MB WRITE now goes at 50 Gbit/s, one 5,000 B chunk per 800 ns (after a burst
    // of at most the bucket's 5 tokens).
    let before = sends(&net, H1, b.t).len();
    let t0 = net.now();
    post(&mut net, &b, write(2, &b, 0, 4 * MB, &b2)).unwrap();
    net.run_until(t0 + 100_000_000);
    let s: Vec<u64> = sends(&net, H1, b.t)[before..]
        .iter()
        .map(|x| x.0 - t0)
        .collect();
    assert!(
        s.iter().filter(|&&t| t == 0).count() <= 5,
        "a burst of at most max_tokens"
    );
    let in_window = s.iter().filter(|&&t| t <= 80_000_000).count();
    assert!(
        (100..=106).contains(&in_window),
        "80 µs at 50 Gbit/s is 100 chunks (+5 burst): {in_window}"
    );
    assert!(counter(&net, H1, b.t, "tokens_waited") > 0.0);
}

#[test]
fn a_burst_after_idle_is_at_most_the_bucket_then_one_chunk_per_token() {
    let cfg = JustitiaConfig {
        max_tokens: 5,
        ..calm()
    };
    let (mut net, b, b2, lat) = setup(&cfg, true);
    let (l, l2) = lat.unwrap();
    post(&mut net, &l, write(99, &l, 0, 16, &l2)).unwrap();
    net.run_until(net.now() + 50_000_000); // the bucket fills
    let t0 = net.now();
    post(&mut net, &b, write(1, &b, 0, 100_000, &b2)).unwrap();
    net.run_until(t0 + 50_000_000);
    let times: Vec<u64> = sends(&net, H1, b.t).iter().map(|x| x.0 - t0).collect();
    assert_eq!(times.len(), 20);
    assert_eq!(times.iter().filter(|&&t| t == 0).count(), 5, "{times:?}");
    // At 100 Gbit/s a 5,000 B chunk is 400 ns.
    for w in times[5..].windows(2) {
        assert!(
            w[1] - w[0] >= 399_000 && w[1] - w[0] <= 401_000,
            "{times:?}"
        );
    }
}

#[test]
fn a_throughput_tenant_gets_a_batch_of_operations_per_token() {
    let cfg = JustitiaConfig {
        batch_ops: 100,
        ..calm()
    };
    let tput = JustitiaConfig {
        class: Class::Throughput,
        ..cfg.clone()
    };
    let mut net = FakeNet::new(2);
    let tb = net.add_tenant_with(H1, Box::new(Idle), &[&cfg]).unwrap();
    let tb2 = net.add_tenant_with(H2, Box::new(Idle), &[&cfg]).unwrap();
    let tt = net.add_tenant_with(H1, Box::new(Idle), &[&tput]).unwrap();
    let tt2 = net.add_tenant_with(H2, Box::new(Idle), &[&tput]).unwrap();
    net.run_until(0);
    let b = end(&mut net, H1, tb, 0x1_0000, MB, QpInit::rc);
    let b2 = end(&mut net, H2, tb2, 0x1_0000, MB, QpInit::rc);
    connect(&mut net, &b, &b2);
    let m = end(&mut net, H1, tt, 0x1_0000, 4096, QpInit::rc);
    let m2 = end(&mut net, H2, tt2, 0x1_0000, 4096, QpInit::rc);
    connect(&mut net, &m, &m2);
    // The bandwidth tenant keeps the bucket busy; the throughput tenant posts 350 small WRs.
    post(&mut net, &b, write(1, &b, 0, 4 * MB, &b2)).unwrap();
    let t0 = net.now();
    for i in 0..350 {
        let mut wr = write(i, &m, 0, 16, &m2);
        wr.signaled = i % 32 == 31;
        post(&mut net, &m, wr).unwrap();
    }
    // No latency tenant: 1 MB chunks, one token per 80 µs, shared round robin.
    net.run_until(t0 + 2_000_000_000);
    let times: Vec<u64> = sends(&net, H1, m.t).iter().map(|x| x.0).collect();
    assert_eq!(
        times.len(),
        350,
        "{:?} {:?}",
        net.counters(H1, m.t),
        net.counters(H1, AGENT)
    );
    // Batches of 100: posts 0..100 together, then a wait for the next token, and so on.
    let batches: Vec<usize> = times.chunk_by(|a, b| a == b).map(|c| c.len()).collect();
    assert_eq!(batches, vec![100, 100, 100, 50], "{times:?}");
    assert_eq!(counter(&net, H1, m.t, "class"), 2.0);
    assert_eq!(counter(&net, H1, m.t, "chunks"), 0.0, "never split");
}

#[test]
fn latency_at_the_receiver_also_calls_for_small_chunks() {
    // The only latency tenant is on H2, sending to H1: H2's pacer tells H1's.
    let (mut net, b, b2, lat) = setup(&calm(), true);
    let (l, l2) = lat.unwrap();
    post(&mut net, &l2, write(5, &l2, 0, 16, &l)).unwrap();
    net.run_until(net.now() + 50_000_000);
    assert_eq!(counter(&net, H1, AGENT, "latency_tenants"), 0.0);
    post(&mut net, &b, write(1, &b, 0, MB, &b2)).unwrap();
    net.run_until(net.now() + 1_000_000_000);
    assert_eq!(
        sends(&net, H1, b.t).len(),
        200,
        "H2's latency tenant makes H1 split"
    );
}

#[test]
fn an_error_in_a_chunk_is_reported_once_with_the_application_wr_id() {
    let (mut net, b, b2, lat) = setup(&calm(), true);
    let (l, l2) = lat.unwrap();
    post(&mut net, &l, write(99, &l, 0, 16, &l2)).unwrap();
    // 4 MB region at the peer: a WRITE running 50,000 B past its end fails in its last chunks.
    let mut bad = write(1, &b, 0, 60_000, &b2);
    bad.remote_addr = b2.mr.addr + b2.mr.len - 10_000;
    bad.signaled = false;
    post(&mut net, &b, bad).unwrap();
    post(&mut net, &b, write(2, &b, 0, 30_000, &b2)).unwrap();
    net.run_until(net.now() + 1_000_000_000);
    let wcs = poll(&mut net, &b);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::RemoteAccessError), (2, WcStatus::Flushed)],
        "an unsignaled WR's error is reported (once), what follows is flushed"
    );
}

#[test]
fn the_config_parses_with_defaults_and_refuses_unknown_keys() {
    let e: crate::MiddlewareEntry = serde_json::from_str(r#""justitia""#).unwrap();
    assert_eq!(
        e.0,
        crate::MiddlewareSpec::Justitia(JustitiaConfig::default())
    );
    let r: crate::MiddlewareEntry =
        serde_json::from_str(r#"{"kind": "justitia", "target": "15us"}"#).unwrap();
    let crate::MiddlewareSpec::Justitia(c) = r.0 else {
        panic!()
    };
    assert_eq!(c.target, braid_units::Duration(15_000_000));
    assert_eq!(c.small_chunk, braid_units::Bytes(5000));
    let bad =
        serde_json::from_str::<crate::MiddlewareEntry>(r#"{"kind": "justitia", "chunk": "5KB"}"#);
    assert!(bad.unwrap_err().to_string().contains("chunk"));
    let bad =
        serde_json::from_str::<crate::MiddlewareEntry>(r#"{"kind": "justitia", "target": 15}"#);
    assert!(bad.is_err(), "a duration needs a unit");
    // Parameters are checked when built, by key.
    let mut h =
        HostCtx::new(1, FakeNet::default_caps(1)).with_board(braid_verbs::rendezvous::board());
    let e = JustitiaConfig {
        window: 0,
        ..Default::default()
    }
    .build(&mut h, 1)
    .err()
    .unwrap();
    assert_eq!(e.key, "window");
    let mut no_board = HostCtx::new(1, FakeNet::default_caps(1));
    assert!(JustitiaConfig::default().build(&mut no_board, 1).is_err());
    // One pacer per host: its tenants may differ in class only.
    JustitiaConfig::default().build(&mut h, 1).unwrap();
    JustitiaConfig {
        class: Class::Latency,
        ..Default::default()
    }
    .build(&mut h, 2)
    .unwrap();
    assert!(JustitiaConfig {
        target: braid_units::Duration(15_000_000),
        ..Default::default()
    }
    .build(&mut h, 3)
    .is_err());
    assert_eq!(h.take_agents().len(), 1, "one agent per host");
}

#[test]
fn the_layer_charges_a_built_wr_per_chunk() {
    let (mut net, b, b2, lat) = setup(&JustitiaConfig { ..calm() }, true);
    let (l, l2) = lat.unwrap();
    post(&mut net, &l, write(99, &l, 0, 16, &l2)).unwrap();
    post(&mut net, &b, write(1, &b, 0, 50_000, &b2)).unwrap();
    net.run_until(net.now() + 100_000_000);
    let built = net
        .calls_of(H1, b.t)
        .iter()
        .filter(|c| matches!(c, Call::Charge("justitia", Work::WrBuilt(1))))
        .count();
    assert_eq!(built, 10);
    let cpu = net.cpu(H1, b.t);
    assert_eq!(
        cpu.by_layer.get("justitia").copied(),
        Some(10 * NetConfig::default().cpu.ps(Work::WrBuilt(1)))
    );
}

#[test]
fn a_latency_tenants_calls_reach_the_nic_one_for_one() {
    let (mut net, _b, _b2, lat) = setup(&calm(), true);
    let (l, l2) = lat.unwrap();
    let before = net.calls_of(H1, l.t).len();
    post(&mut net, &l, write(5, &l, 0, 16, &l2)).unwrap();
    net.run_until(net.now() + 50_000_000);
    let mut out = Vec::new();
    net.call_as(H1, l.t, |v| v.poll_cq(l.cq, 16, &mut out));
    net.call_as(H1, l.t, |v| v.poll_cq(l.cq, 16, &mut out));
    let calls: Vec<Call> = net.calls_of(H1, l.t)[before..].to_vec();
    assert_eq!(
        calls,
        vec![
            Call::PostSend(l.qp, write(5, &l, 0, 16, &l2)),
            Call::Poll(l.cq),
            Call::Poll(l.cq)
        ]
    );
    assert_eq!(out.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![5]);
    assert_eq!(
        net.cpu(H1, l.t).by_layer.get("justitia"),
        None,
        "no work charged to the layer"
    );
}

/// The latency tenant's QPs are in class 5.
fn class5(cq: CqId) -> QpInit {
    QpInit {
        priority: Some(5),
        ..QpInit::rc(cq)
    }
}

/// The QPs host `host`'s agent created, with their class, in creation order, and the QPs its
/// probes (inline WRITEs with the probe's wr_id) went on, in order.
fn agent_qps(net: &FakeNet, host: u32) -> (Vec<Option<u8>>, Vec<QpNum>) {
    let mut created = Vec::new();
    let mut probes = Vec::new();
    for l in net
        .calls()
        .iter()
        .filter(|l| l.host == host && l.tenant == AGENT && l.ok)
    {
        match &l.call {
            Call::CreateQp(init) => created.push(init.priority),
            Call::PostSend(qp, w) if w.wr_id == 1 && w.inline => probes.push(*qp),
            _ => {}
        }
    }
    (created, probes)
}

/// Late classification: a bandwidth tenant classified first makes the pacer's link before any
/// latency tenant's class is known (so in the NIC's default class); a latency tenant in class
/// 5 classified later moves the reference flow to a leg of the link in class 5, which the peer
/// makes its end of on request; the probes keep coming (on the old QP until the leg is up).
#[test]
fn a_late_latency_tenant_moves_the_reference_flow_into_its_class() {
    let cfg = calm();
    let mut net = FakeNet::new(2);
    let f: &dyn MiddlewareFactory = &cfg;
    let tb = net.add_tenant_with(H1, Box::new(Idle), &[f]).unwrap();
    let tb2 = net.add_tenant_with(H2, Box::new(Idle), &[f]).unwrap();
    let tl = net.add_tenant_with(H1, Box::new(Idle), &[f]).unwrap();
    let tl2 = net.add_tenant_with(H2, Box::new(Idle), &[f]).unwrap();
    net.run_until(0);
    let b = end(&mut net, H1, tb, 0x1_0000_0000, 4 * MB, QpInit::rc);
    let b2 = end(&mut net, H2, tb2, 0x1_0000_0000, 4 * MB, QpInit::rc);
    connect(&mut net, &b, &b2);
    let l = end(&mut net, H1, tl, 0x2_0000_0000, 4096, class5);
    let l2 = end(&mut net, H2, tl2, 0x2_0000_0000, 4096, class5);
    connect(&mut net, &l, &l2);
    // (The fake NIC sends a host's messages one after the other: the 1 MB WRITE, posted once
    // the bucket holds its token at ~80 µs, holds the probes back for its 80 µs of wire.)
    post(&mut net, &b, write(1, &b, 0, MB, &b2)).unwrap();
    net.run_until(net.now() + 300_000_000);
    let (created, probes) = agent_qps(&net, H1);
    assert_eq!(
        created,
        vec![None],
        "the link, made before any latency class was known"
    );
    assert!(!probes.is_empty());
    assert_eq!(
        counter(&net, H1, AGENT, "probe_class"),
        -2.0,
        "the NIC's default"
    );
    assert_eq!(counter(&net, H1, AGENT, "relinks"), 0.0);
    let first = probes[0];
    // The latency tenant posts: classified latency, in class 5.
    post(&mut net, &l, write(7, &l, 0, 16, &l2)).unwrap();
    let samples = counter(&net, H1, AGENT, "samples");
    net.run_until(net.now() + 100_000_000);
    let (created, probes) = agent_qps(&net, H1);
    assert_eq!(
        created,
        vec![None, Some(5)],
        "a leg in the latency tenants' class"
    );
    assert_eq!(counter(&net, H1, AGENT, "relinks"), 1.0);
    assert_eq!(
        counter(&net, H2, AGENT, "relinks"),
        1.0,
        "the peer made its end"
    );
    assert_eq!(counter(&net, H1, AGENT, "probe_class"), 5.0);
    let last = *probes.last().unwrap();
    assert_ne!(last, first, "the probes moved to the leg");
    assert!(
        probes
            .iter()
            .skip_while(|&&q| q == first)
            .all(|&q| q == last),
        "once on the leg they stay there"
    );
    assert!(counter(&net, H1, AGENT, "samples") > samples + 10.0);
    assert_eq!(counter(&net, H1, AGENT, "link_errors"), 0.0);
    assert_eq!(counter(&net, H2, AGENT, "link_errors"), 0.0);
    assert_eq!(counter(&net, H1, AGENT, "links_ready"), 1.0);
}

/// A latency class known before the link is made needs no leg.
#[test]
fn a_latency_class_known_first_makes_the_link_in_it() {
    let cfg = calm();
    let mut net = FakeNet::new(2);
    let f: &dyn MiddlewareFactory = &cfg;
    let tb = net.add_tenant_with(H1, Box::new(Idle), &[f]).unwrap();
    let tb2 = net.add_tenant_with(H2, Box::new(Idle), &[f]).unwrap();
    let tl = net.add_tenant_with(H1, Box::new(Idle), &[f]).unwrap();
    let tl2 = net.add_tenant_with(H2, Box::new(Idle), &[f]).unwrap();
    net.run_until(0);
    let l = end(&mut net, H1, tl, 0x2_0000_0000, 4096, class5);
    let l2 = end(&mut net, H2, tl2, 0x2_0000_0000, 4096, class5);
    connect(&mut net, &l, &l2);
    post(&mut net, &l, write(7, &l, 0, 16, &l2)).unwrap();
    let b = end(&mut net, H1, tb, 0x1_0000_0000, 4 * MB, QpInit::rc);
    let b2 = end(&mut net, H2, tb2, 0x1_0000_0000, 4 * MB, QpInit::rc);
    connect(&mut net, &b, &b2);
    post(&mut net, &b, write(1, &b, 0, MB, &b2)).unwrap();
    net.run_until(net.now() + 100_000_000);
    assert_eq!(agent_qps(&net, H1).0, vec![Some(5)]);
    assert_eq!(counter(&net, H1, AGENT, "relinks"), 0.0);
    assert_eq!(counter(&net, H2, AGENT, "relinks"), 0.0);
    assert_eq!(counter(&net, H1, AGENT, "probe_class"), 5.0);
}
