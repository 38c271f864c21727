//! Unit tests of the perf layer and agent over a recording bottom that can also complete what
//! was posted (in order, as an RC send queue does).

use super::agent::PerfAgent;
use super::state::HostState;
use super::*;
use braid_verbs::testing::{Call, Recorder};
use braid_verbs::*;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// A Recorder whose CQs can be filled: `complete(qp)` completes every WR posted to `qp` so far.
#[derive(Default)]
struct Nic {
    rec: Recorder,
    cqs: HashMap<CqId, VecDeque<WorkCompletion>>,
    send_cq: HashMap<QpNum, CqId>,
    done: HashMap<QpNum, usize>,
}

impl Nic {
    fn new() -> Self {
        let mut n = Nic::default();
        n.rec.caps.cross_channel = true;
        n.rec.caps.max_qp_wr = 1 << 15;
        n
    }
    /// The send WRs posted to `qp`, in order.
    fn sends(&self, qp: QpNum) -> Vec<SendWr> {
        self.rec
            .sends()
            .into_iter()
            .filter(|s| s.0 == qp)
            .map(|s| s.1)
            .collect()
    }
    /// Completes the WRs posted to `qp` not completed yet (signaled ones produce a CQE).
    fn complete(&mut self, qp: QpNum) {
        let sends = self.sends(qp);
        let from = self.done.get(&qp).copied().unwrap_or(0);
        let cq = self.send_cq[&qp];
        for w in &sends[from..] {
            if w.signaled {
                self.cqs.entry(cq).or_default().push_back(WorkCompletion {
                    wr_id: w.wr_id,
                    status: WcStatus::Success,
                    opcode: queue::opcode_of(&w.op),
                    byte_len: w.len(),
                    imm: None,
                    qp_num: qp,
                    src_host: 0,
                    src_qp: 0,
                });
            }
        }
        self.done.insert(qp, sends.len());
    }
    fn built(&self) -> u32 {
        self.rec
            .calls
            .iter()
            .map(|c| match c {
                Call::Charge("perf", Work::WrBuilt(n)) => *n,
                _ => 0,
            })
            .sum()
    }
}

impl Verbs for Nic {
    fn now(&self) -> u64 {
        self.rec.now
    }
    fn local_host(&self) -> u32 {
        0
    }
    fn caps(&self) -> &Caps {
        &self.rec.caps
    }
    fn tenant(&self) -> TenantId {
        self.rec.tenant
    }
    fn create_cq(&mut self, d: u32) -> Result<CqId, VerbsError> {
        self.rec.create_cq(d)
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.rec.destroy_cq(cq)
    }
    fn req_notify_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        self.rec.req_notify_cq(cq)
    }
    fn create_qp(&mut self, init: &QpInit) -> Result<QpNum, VerbsError> {
        let q = self.rec.create_qp(init)?;
        self.send_cq.insert(q, init.send_cq);
        Ok(q)
    }
    fn connect_qp(&mut self, qp: QpNum, r: RemoteQp) -> Result<(), VerbsError> {
        self.rec.connect_qp(qp, r)
    }
    fn modify_qp(&mut self, qp: QpNum, m: QpModify) -> Result<(), VerbsError> {
        self.rec.modify_qp(qp, m)
    }
    fn query_qp(&mut self, qp: QpNum) -> Result<QpAttr, VerbsError> {
        self.rec.query_qp(qp)
    }
    fn destroy_qp(&mut self, qp: QpNum) -> Result<(), VerbsError> {
        self.rec.destroy_qp(qp)
    }
    fn reg_mr(&mut self, a: u64, l: u64, x: Access) -> Result<MemoryRegion, VerbsError> {
        self.rec.reg_mr(a, l, x)
    }
    fn dereg_mr(&mut self, mr: &MemoryRegion) -> Result<(), VerbsError> {
        self.rec.dereg_mr(mr)
    }
    fn post_send(&mut self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        self.rec.post_send(qp, wr)
    }
    fn post_send_list(&mut self, qp: QpNum, wrs: Vec<SendWr>) -> Result<(), BadWr> {
        self.rec.post_send_list(qp, wrs)
    }
    fn post_recv(&mut self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        self.rec.post_recv(qp, wr)
    }
    fn poll_cq(&mut self, cq: CqId, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        let q = self.cqs.entry(cq).or_default();
        let n = max.min(q.len());
        out.extend(q.drain(..n));
        n
    }
    fn set_timer(&mut self, at: u64, token: u64) {
        self.rec.set_timer(at, token)
    }
    fn wake(&mut self, t: TenantId, token: u64) {
        self.rec.wake(t, token)
    }
    fn charge_as(&mut self, layer: &'static str, w: Work) {
        self.rec.charge_as(layer, w)
    }
}

/// A tenant under test: its layer over its own bottom.
struct Tenant {
    layers: Vec<Box<dyn Middleware>>,
    nic: Nic,
    cq: CqId,
    qps: Vec<QpNum>,
}

impl Tenant {
    fn new(ctx: &mut HostCtx, cfg: &PerfConfig, id: TenantId, nqps: usize) -> Self {
        let layer = cfg.build(ctx, id).expect("builds");
        let mut t = Tenant {
            layers: vec![layer],
            nic: Nic::new(),
            cq: 0,
            qps: vec![],
        };
        t.nic.rec.tenant = id;
        t.with(|v| {
            let cq = v.create_cq(1024).unwrap();
            v.req_notify_cq(cq).unwrap();
            let qps = (0..nqps)
                .map(|_| v.create_qp(&QpInit::rc(cq)).unwrap())
                .collect();
            (cq, qps)
        })
        .pipe(|(cq, qps)| {
            t.cq = cq;
            t.qps = qps;
        });
        t
    }
    fn with<R>(&mut self, f: impl FnOnce(&mut Stack) -> R) -> R {
        let mut s = Stack::new(&mut self.layers, &mut self.nic);
        f(&mut s)
    }
    fn start(&mut self) {
        self.with(|s| s.start_layers());
    }
    fn write(&mut self, qp: usize, wr_id: u64, len: u32, signaled: bool) -> Result<(), VerbsError> {
        let q = self.qps[qp];
        self.with(|v| v.post_send(q, write(wr_id, len, signaled)))
    }
    /// Completes qp's posted WRs in the NIC, delivers the event, polls what the app sees.
    fn complete(&mut self, qp: usize) -> Vec<WorkCompletion> {
        let q = self.qps[qp];
        self.nic.complete(q);
        let cq = self.cq;
        let mut up = Vec::new();
        self.with(|s| s.deliver(Event::Completion(cq), &mut up));
        let mut out = Vec::new();
        self.with(|v| poll_and_rearm(v, cq, &mut out)).unwrap();
        out
    }
    fn counter(&self, name: &str) -> f64 {
        self.layers[0]
            .counters()
            .into_iter()
            .find(|(k, _)| *k == name)
            .unwrap_or_else(|| panic!("no counter {name}"))
            .1
    }
}

trait Pipe: Sized {
    fn pipe<R>(self, f: impl FnOnce(Self) -> R) -> R {
        f(self)
    }
}
impl<T> Pipe for T {}

fn write(wr_id: u64, len: u32, signaled: bool) -> SendWr {
    let mut w = SendWr::new(
        wr_id,
        SendOp::Write,
        vec![Sge {
            addr: 0x10_0000,
            length: len,
            lkey: 1,
        }],
    );
    w.remote_addr = 0x80_0000;
    w.rkey = 2;
    w.signaled = signaled;
    w
}

fn host() -> HostCtx {
    HostCtx::new(
        0,
        Caps {
            cross_channel: true,
            line_rate_bps: 100_000_000_000,
            max_qp_wr: 1 << 15,
            mtu: 4096,
            ..Default::default()
        },
    )
}

fn state(ctx: &mut HostCtx) -> Rc<RefCell<HostState>> {
    ctx.shared::<HostState>(|| unreachable!("built by the factory"))
        .0
}

const MIB: u32 = 1 << 20;

#[test]
fn a_large_write_is_split_with_zero_waits_only_beside_a_small_tenant() {
    let cfg = PerfConfig::default();
    let mut ctx = host();
    let mut b = Tenant::new(&mut ctx, &cfg, 1, 1);
    let mut d = Tenant::new(&mut ctx, &cfg, 2, 1);
    b.start();
    d.start();
    assert_eq!(ctx.take_agents().len(), 1, "one agent per host");
    // Alone: one WR, as the application posted it (work-conserving).
    b.write(0, 7, MIB, true).unwrap();
    let qp = b.qps[0];
    let sends = b.nic.sends(qp);
    assert_eq!(sends.len(), 1);
    assert_eq!((sends[0].len(), sends[0].op), (MIB as u64, SendOp::Write));
    assert_eq!(b.counter("sub_wrs"), 0.0);
    // A delay-sensitive tenant becomes active.
    d.write(0, 1, 16, true).unwrap();
    b.write(0, 8, MIB, true).unwrap();
    let sends = &b.nic.sends(qp)[1..];
    assert_eq!(
        sends.len(),
        64 * 17,
        "64 sub-WRs, each followed by 16 0_WAITs"
    );
    let dummy = match sends[1].op {
        SendOp::Wait { cq, count: 0 } => cq,
        ref op => panic!("expected a 0_WAIT, got {op:?}"),
    };
    assert_ne!(dummy, b.cq, "0_WAITs wait on a private CQ");
    for (k, chunk) in sends.chunks(17).enumerate() {
        let s = &chunk[0];
        assert_eq!(s.op, SendOp::Write);
        assert_eq!(s.len(), 16_384);
        assert_eq!(s.sg_list[0].addr, 0x10_0000 + k as u64 * 16_384);
        assert_eq!(s.remote_addr, 0x80_0000 + k as u64 * 16_384);
        for w in &chunk[1..] {
            assert_eq!(
                w.op,
                SendOp::Wait {
                    cq: dummy,
                    count: 0
                }
            );
            assert!(!w.signaled);
        }
    }
    assert_eq!(b.counter("sub_wrs"), 64.0);
    assert_eq!(b.counter("zero_waits"), 1024.0);
    assert_eq!(
        b.nic.built(),
        16 + 64,
        "the QP's list of 16 0_WAITs is built once, each sub-WR once"
    );
    // Each sub-WR is one post, its 16 0_WAITs one post list (one doorbell).
    let calls = &b.nic.rec.calls;
    let lists: Vec<usize> = calls
        .iter()
        .filter_map(|c| match c {
            Call::PostSendList(q, ws) if *q == qp => Some(ws.len()),
            _ => None,
        })
        .collect();
    assert_eq!(lists, vec![16; 64]);
    let singles = calls
        .iter()
        .filter(|c| matches!(c, Call::PostSend(q, _) if *q == qp))
        .count();
    assert_eq!(singles, 1 + 64, "the whole WR alone, then the sub-WRs");
    // The QPs were created cross-channel (0_WAITs need it).
    assert!(b
        .nic
        .rec
        .calls
        .iter()
        .any(|c| matches!(c, Call::CreateQp(i) if i.cross_channel)));
    // The small tenant's own 16 B write went down as it was.
    assert_eq!(d.nic.sends(d.qps[0]).len(), 1);
}

#[test]
fn the_application_sees_one_completion_per_signaled_wr_with_its_wr_id() {
    let cfg = PerfConfig::default();
    let mut ctx = host();
    let mut b = Tenant::new(&mut ctx, &cfg, 1, 1);
    let mut d = Tenant::new(&mut ctx, &cfg, 2, 1);
    b.start();
    d.start();
    d.write(0, 1, 16, true).unwrap();
    b.write(0, 100, MIB, true).unwrap();
    b.write(0, 101, 512 * 1024, false).unwrap();
    b.write(0, 102, 64, true).unwrap();
    b.write(0, 103, 40_000, true).unwrap();
    let posted = b.nic.sends(b.qps[0]).len();
    assert!(posted > 100, "split: {posted}");
    let wcs = b.complete(0);
    let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(
        ids,
        vec![100, 102, 103],
        "unsignaled 101 is silent, parts are hidden"
    );
    assert_eq!(wcs[0].byte_len, MIB as u64);
    assert_eq!(wcs[2].byte_len, 40_000);
    assert!(wcs
        .iter()
        .all(|w| w.status == WcStatus::Success && w.opcode == WcOpcode::Write));
    assert!(b.counter("hidden") > 0.0);
    // Nothing is left outstanding: the next poll is empty.
    assert!(b.complete(0).is_empty());
    let st = state(&mut ctx);
    let s = st.borrow();
    assert_eq!(s.tenants[&1].qps().next().unwrap().outstanding, 0);
}

#[test]
fn classification_follows_behaviour() {
    let cfg = PerfConfig {
        window: braid_units::Duration(20_000_000_000), // 4 samples
        ..PerfConfig::default()
    };
    let mut ctx = host();
    let mut t = Tenant::new(&mut ctx, &cfg, 1, 1);
    t.start();
    let st = state(&mut ctx);
    let mut agent = PerfAgent::new(st.clone(), None);
    let class = |st: &Rc<RefCell<HostState>>| st.borrow().tenants[&1].class;
    assert_eq!(
        class(&st),
        Class::DelaySensitive,
        "new tenants start delay-sensitive"
    );
    // One 16 B message at a time: delay-sensitive.
    let mut now = 0;
    for i in 0..4 {
        now += 5_000_000_000;
        t.nic.rec.now = now;
        t.write(0, i, 16, true).unwrap();
        agent.sample(now);
        t.complete(0);
    }
    assert_eq!(class(&st), Class::DelaySensitive);
    // A batch of 8 outstanding: message-intensive.
    for i in 0..8 {
        t.write(0, 10 + i, 16, true).unwrap();
    }
    now += 5_000_000_000;
    agent.sample(now);
    assert_eq!(class(&st), Class::MessageIntensive);
    assert_eq!(t.counter("class"), 1.0);
    // Back to one at a time: delay-sensitive again once the batch leaves the window.
    t.complete(0);
    for i in 0..4 {
        now += 5_000_000_000;
        t.nic.rec.now = now;
        t.write(0, 20 + i, 16, true).unwrap();
        agent.sample(now);
        t.complete(0);
    }
    assert_eq!(class(&st), Class::DelaySensitive);
    // One large message: bandwidth-intensive, for good.
    t.write(0, 30, 2048, true).unwrap();
    t.complete(0);
    now += 5_000_000_000;
    agent.sample(now);
    assert_eq!(class(&st), Class::BandwidthIntensive);
    assert_eq!(t.counter("class_changes"), 3.0);
    assert_eq!(t.counter("class"), 2.0);
}

#[test]
fn large_reads_do_not_make_a_tenant_bandwidth_intensive() {
    let cfg = PerfConfig::default();
    let mut ctx = host();
    let mut t = Tenant::new(&mut ctx, &cfg, 1, 1);
    t.start();
    let q = t.qps[0];
    let mut r = write(1, 64 * 1024, true);
    r.op = SendOp::Read;
    t.with(|v| v.post_send(q, r)).unwrap();
    let st = state(&mut ctx);
    PerfAgent::new(st.clone(), None).sample(5_000_000_000);
    assert!(!st.borrow().tenants[&1].bw_send);
}

#[test]
fn a_paused_qp_sends_nothing_until_resumed() {
    let cfg = PerfConfig::default();
    let mut ctx = host();
    let mut b = Tenant::new(&mut ctx, &cfg, 1, 2);
    let mut d = Tenant::new(&mut ctx, &cfg, 2, 1);
    b.start();
    d.start();
    let st = state(&mut ctx);
    let mut agent = PerfAgent::new(st.clone(), None);
    // B (2 QPs, 64 KB messages) beside an active D: the limit is 1 QP per tenant.
    b.write(0, 1, 65_536, true).unwrap();
    b.write(1, 2, 65_536, true).unwrap();
    d.write(0, 9, 16, true).unwrap();
    let now = 10_000_000_000;
    agent.sample(now);
    b.nic.rec.now = now;
    let woken = agent.allocate(now);
    assert_eq!(st.borrow().qp_limit, 1);
    assert!(st.borrow().gating);
    assert_eq!(
        woken,
        vec![1],
        "only the bandwidth tenant's allowance changed"
    );
    assert_eq!(
        st.borrow().tenants[&2].allowed_qps,
        state::UNGATED,
        "D is never paused"
    );
    let (q0, q1) = (b.qps[0], b.qps[1]);
    let before1 = b.nic.sends(q1).len();
    // QP 0 takes the one slot; QP 1 is paused: what it is given stays in the layer.
    b.write(0, 3, 65_536, true).unwrap();
    b.write(1, 4, 65_536, true).unwrap();
    b.write(1, 5, 65_536, true).unwrap();
    let data = |b: &Tenant, q| {
        b.nic
            .sends(q)
            .iter()
            .filter(|w| w.op.carries_data())
            .count()
    };
    assert_eq!(
        data(&b, q0),
        1 + 4,
        "QP 0 sends (split into 16 KiB sub-WRs beside D)"
    );
    assert_eq!(b.nic.sends(q1).len(), before1, "a paused QP sends nothing");
    assert!(b.counter("pauses") >= 1.0);
    // Still paused while QP 0 works, within its turn.
    b.nic.rec.now = now + 100_000;
    b.write(0, 6, 65_536, true).unwrap();
    assert_eq!(b.nic.sends(q1).len(), before1);
    // QP 0 finishes its work: QP 1 resumes on the completion.
    b.nic.rec.now = now + 200_000;
    b.nic.complete(q0);
    b.complete(1);
    assert_eq!(
        data(&b, q1) - before1,
        2 * 4,
        "resumed: both queued WRs went down"
    );
    assert!(b.counter("resumes") >= 1.0);
    // The agent lifts the limit when D goes idle: a wake reschedules.
    let later = now + 1_000_000_000_000;
    d.complete(0);
    agent.sample(later);
    assert_eq!(agent.allocate(later), vec![1]);
    assert_eq!(st.borrow().tenants[&1].allowed_qps, state::UNGATED);
}

#[test]
fn a_small_message_qp_is_paused_while_the_other_has_data_in_the_nic() {
    // PeRF pauses QPs whatever their message size: a 2-QP tenant of 1,000 B WRITEs (no large
    // bytes ever in the NIC) beside D, held to 1 QP, sends on one QP at a time.
    let cfg = PerfConfig::default();
    let mut ctx = host();
    let mut b = Tenant::new(&mut ctx, &cfg, 1, 2);
    let mut d = Tenant::new(&mut ctx, &cfg, 2, 1);
    b.start();
    d.start();
    d.write(0, 9, 16, true).unwrap();
    let st = state(&mut ctx);
    st.borrow_mut().tenants.get_mut(&1).unwrap().allowed_qps = 1;
    let (q0, q1) = (b.qps[0], b.qps[1]);
    let data = |b: &Tenant, q| {
        b.nic
            .sends(q)
            .iter()
            .filter(|w| w.op.carries_data())
            .count()
    };
    b.write(0, 1, 1_000, true).unwrap();
    b.write(1, 2, 1_000, true).unwrap();
    b.write(1, 3, 1_000, true).unwrap();
    assert_eq!(data(&b, q0), 1, "QP 0 takes the slot");
    assert_eq!(
        b.nic.sends(q1).len(),
        0,
        "QP 1 is paused while QP 0's data is in the NIC"
    );
    assert!(b.counter("pauses") >= 1.0);
    // QP 0 keeps its turn.
    b.write(0, 4, 1_000, true).unwrap();
    assert_eq!(data(&b, q0), 2);
    assert_eq!(b.nic.sends(q1).len(), 0, "still paused");
    // QP 0's data completes: its slot is free and QP 1 resumes.
    let done = b.complete(0);
    assert_eq!(done.len(), 2);
    assert_eq!(data(&b, q1), 2, "resumed: both queued WRs went down");
    assert!(b.counter("resumes") >= 1.0);
    // Now QP 0 waits for QP 1's data.
    b.write(0, 5, 1_000, true).unwrap();
    assert_eq!(data(&b, q0), 2, "QP 0 paused in turn");
    b.complete(1);
    assert_eq!(data(&b, q0), 3, "and resumed when QP 1's data completed");
}

#[test]
fn many_paused_qps_take_the_slots_in_turn_and_every_wr_completes_once() {
    // 64 QPs of 1,000 B WRITEs held to 2 active (the layer visits only the slot holders and the
    // first paused QP): the NIC never holds data of more than 2 of them, and every application
    // WR is posted and completed exactly once.
    let cfg = PerfConfig::default();
    let mut ctx = host();
    let n = 64;
    let mut b = Tenant::new(&mut ctx, &cfg, 1, n);
    let mut d = Tenant::new(&mut ctx, &cfg, 2, 1);
    b.start();
    d.start();
    d.write(0, 999, 16, true).unwrap();
    let st = state(&mut ctx);
    st.borrow_mut().tenants.get_mut(&1).unwrap().allowed_qps = 2;
    for k in 0..n {
        b.write(k, 2 * k as u64, 1_000, true).unwrap();
        b.write(k, 2 * k as u64 + 1, 1_000, true).unwrap();
    }
    let pending = |b: &Tenant, k: usize| {
        let q = b.qps[k];
        let from = b.nic.done.get(&q).copied().unwrap_or(0);
        b.nic.sends(q)[from..]
            .iter()
            .filter(|w| w.op.carries_data())
            .count()
    };
    let mut seen = Vec::new();
    let mut rounds = 0;
    loop {
        let busy: Vec<usize> = (0..n).filter(|&k| pending(&b, k) > 0).collect();
        assert!(busy.len() <= 2, "data of {} QPs in the NIC", busy.len());
        if busy.is_empty() {
            break;
        }
        for k in busy {
            seen.extend(b.complete(k).into_iter().map(|w| w.wr_id));
        }
        rounds += 1;
        assert!(rounds <= n, "no progress");
    }
    seen.sort();
    assert_eq!(seen, (0..2 * n as u64).collect::<Vec<_>>());
    assert!(b.counter("pauses") >= (n - 2) as f64);
    assert_eq!(st.borrow().tenants[&1].qps().count(), n);
}

#[test]
fn a_timed_release_rotates_the_slot() {
    let cfg = PerfConfig::default();
    let mut ctx = host();
    let mut b = Tenant::new(&mut ctx, &cfg, 1, 2);
    let mut d = Tenant::new(&mut ctx, &cfg, 2, 1);
    b.start();
    d.start();
    let st = state(&mut ctx);
    st.borrow_mut().tenants.get_mut(&1).unwrap().allowed_qps = 1;
    b.write(0, 1, 65_536, true).unwrap();
    b.write(1, 2, 65_536, true).unwrap();
    let q1 = b.qps[1];
    assert_eq!(b.nic.sends(q1).len(), 0);
    // The layer asked to come back when QP 0's turn (release_after) is over.
    let timers = b.nic.rec.timers();
    let (at, tok) = *timers.last().expect("a rotation timer");
    assert_eq!(at, cfg.release_after.0);
    b.nic.rec.now = at;
    let mut up = Vec::new();
    b.with(|s| s.deliver(Event::Timer(tok), &mut up));
    // QP 0's turn is over: it posts no more, but keeps the slot while its 64 KB are in the NIC.
    b.write(0, 3, 65_536, true).unwrap();
    assert_eq!(b.nic.sends(b.qps[0]).len(), 1, "QP 0 paused");
    assert_eq!(
        b.nic.sends(q1).len(),
        0,
        "the slot is not free before QP 0 drained"
    );
    b.complete(0);
    assert_eq!(b.nic.sends(q1).len(), 1, "QP 1 got the turn");
    assert_eq!(
        b.nic.sends(b.qps[0]).len(),
        1,
        "and QP 0 waits for its next one"
    );
}

/// The NIC scheduler PeRF relies on, reduced to its rule: one WQE per turn, round-robin over the
/// QPs with work; a data WQE holds the port for its bytes, a WAIT completes at once but uses its
/// turn. Returns when each of `m`'s WQEs was done (ns).
fn wqe_round_robin(queues: &[Vec<SendWr>], m: usize) -> Vec<f64> {
    let mut pos = vec![0usize; queues.len()];
    let (mut t, mut done) = (0.0f64, Vec::new());
    while pos.iter().zip(queues).any(|(p, q)| *p < q.len()) {
        for (i, q) in queues.iter().enumerate() {
            if let Some(w) = q.get(pos[i]) {
                pos[i] += 1;
                t += if w.op.carries_data() {
                    w.len() as f64 * 8.0 / 100.0
                } else {
                    5.0
                };
                if i == m {
                    done.push(t);
                }
            }
        }
    }
    done
}

#[test]
fn zero_waits_hand_the_turn_to_another_qp() {
    // M: 32 16-byte WRITEs batched beside B's 1 MiB WRITE.
    let m: Vec<SendWr> = (0..32).map(|i| write(i, 16, true)).collect();
    let run = |with_small: bool| {
        let cfg = PerfConfig::default();
        let mut ctx = host();
        let mut b = Tenant::new(&mut ctx, &cfg, 1, 1);
        let mut d = Tenant::new(&mut ctx, &cfg, 2, 1);
        b.start();
        d.start();
        if with_small {
            d.write(0, 1, 16, true).unwrap();
        }
        b.write(0, 7, MIB, true).unwrap();
        let q = b.qps[0];
        wqe_round_robin(&[b.nic.sends(q), m.clone()], 1)
    };
    let raw = run(false);
    let perf = run(true);
    // Raw: one WQE of 1 MiB holds the turn (~84 us) before M's second message.
    assert!(raw[1] > 80_000.0, "{raw:?}");
    // PeRF: M's whole batch goes within the first two 16 KiB sub-WRs (~1.3 us each).
    assert!(perf[31] < 3_000.0, "M's 32 WRs done by {} ns", perf[31]);
}

#[test]
fn the_token_bucket_holds_a_tenant_to_its_rate() {
    let cfg = PerfConfig {
        rate: Some(braid_units::Rate(8_000_000_000)), // 1 GB/s
        burst: braid_units::Bytes(100_000),
        ..PerfConfig::default()
    };
    let mut ctx = host();
    let mut t = Tenant::new(&mut ctx, &cfg, 1, 1);
    t.start();
    for i in 0..4 {
        t.write(0, i, 60_000, true).unwrap();
    }
    let q = t.qps[0];
    assert_eq!(
        t.nic.sends(q).len(),
        2,
        "the burst lets 100 KB (two) through"
    );
    assert!(t.counter("bucket_waits") >= 1.0);
    let (at, tok) = *t.nic.rec.timers().last().unwrap();
    // 20 KB of debt at 1 GB/s: 20 us.
    assert!((at as f64 - 20e6).abs() < 1e6, "{at}");
    t.nic.rec.now = at;
    let mut up = Vec::new();
    t.with(|s| s.deliver(Event::Timer(tok), &mut up));
    assert_eq!(t.nic.sends(q).len(), 3);
}

#[test]
fn a_nic_without_cross_channel_is_refused_at_build_time() {
    let mut ctx = HostCtx::new(0, Caps::default());
    let e = PerfConfig::default()
        .build(&mut ctx, 1)
        .err()
        .expect("refused");
    assert!(e.message.contains("cross-channel"), "{e}");
}

#[test]
fn bad_parameters_are_refused_by_key() {
    let mut ctx = host();
    let cases = [
        (
            PerfConfig {
                sub_wr: braid_units::Bytes(0),
                ..Default::default()
            },
            "sub_wr",
        ),
        (
            PerfConfig {
                zero_wait_unit: braid_units::Bytes(32_768),
                ..Default::default()
            },
            "zero_wait_unit",
        ),
        (
            PerfConfig {
                qp_capacity: 0,
                ..Default::default()
            },
            "qp_capacity",
        ),
        (
            PerfConfig {
                link_fraction: 1.5,
                ..Default::default()
            },
            "link_fraction",
        ),
        (
            PerfConfig {
                weight: 0.0,
                ..Default::default()
            },
            "weight",
        ),
        (
            PerfConfig {
                window: braid_units::Duration(1),
                ..Default::default()
            },
            "window",
        ),
    ];
    for (c, key) in cases {
        let e = c.build(&mut ctx, 1).err().expect("refused");
        assert_eq!(e.key, key, "{e}");
    }
}

#[test]
fn scenario_entries_parse_with_units_and_defaults() {
    let v: Vec<crate::MiddlewareEntry> = serde_json::from_str(
        r#"["perf", {"kind": "perf", "sub_wr": "16KiB", "allowance": "5ms"}]"#,
    )
    .unwrap();
    assert_eq!(v[0].0, crate::MiddlewareSpec::Perf(PerfConfig::default()));
    match &v[1].0 {
        crate::MiddlewareSpec::Perf(c) => {
            assert_eq!(c.sub_wr.0, 16_384);
            assert_eq!(c.allowance.0, 5_000_000_000);
            assert_eq!(c.zero_waits_per_sub_wr(), 16);
        }
        _ => unreachable!(),
    }
    let e =
        serde_json::from_str::<Vec<crate::MiddlewareEntry>>(r#"[{"kind": "perf", "chunk": 1}]"#)
            .unwrap_err()
            .to_string();
    assert!(e.contains("chunk"), "{e}");
}

#[test]
fn two_bandwidth_tenants_do_not_split_for_each_other() {
    let cfg = PerfConfig::default();
    let mut ctx = host();
    let mut a = Tenant::new(&mut ctx, &cfg, 1, 1);
    let mut b = Tenant::new(&mut ctx, &cfg, 2, 1);
    a.start();
    b.start();
    // Both post large WRITEs before any sample: each is bandwidth-intensive at once.
    a.write(0, 1, MIB, true).unwrap();
    b.write(0, 1, MIB, true).unwrap();
    a.write(0, 2, MIB, true).unwrap();
    assert_eq!(a.counter("class"), 2.0);
    assert_eq!(b.counter("class_changes"), 1.0);
    assert_eq!(
        a.nic.sends(a.qps[0]).len(),
        2,
        "whole WRs: no small tenant to yield to"
    );
    assert_eq!(b.nic.sends(b.qps[0]).len(), 1);
}

#[test]
fn weight_scales_the_zero_waits() {
    let cfg = |w: f64| PerfConfig {
        weight: w,
        ..PerfConfig::default()
    };
    assert_eq!(cfg(1.0).zero_waits_per_sub_wr(), 16);
    assert_eq!(cfg(2.0).zero_waits_per_sub_wr(), 8);
    assert_eq!(cfg(0.5).zero_waits_per_sub_wr(), 32);
    let mut ctx = host();
    let mut b = Tenant::new(&mut ctx, &cfg(4.0), 1, 1);
    let mut d = Tenant::new(&mut ctx, &cfg(1.0), 2, 1);
    b.start();
    d.start();
    d.write(0, 1, 16, true).unwrap();
    b.write(0, 2, 65_536, true).unwrap();
    assert_eq!(b.counter("sub_wrs"), 4.0);
    assert_eq!(b.counter("zero_waits"), 16.0, "4 per 16 KiB at weight 4");
}

#[test]
fn more_than_four_bandwidth_tenants_take_turns_beside_a_small_one() {
    let cfg = PerfConfig::default();
    let mut ctx = host();
    let mut bs: Vec<Tenant> = (1..=5).map(|t| Tenant::new(&mut ctx, &cfg, t, 1)).collect();
    let mut d = Tenant::new(&mut ctx, &cfg, 6, 1);
    for b in bs.iter_mut() {
        b.start();
        b.write(0, 1, 65_536, true).unwrap();
    }
    d.start();
    d.write(0, 1, 16, true).unwrap();
    let st = state(&mut ctx);
    let mut agent = PerfAgent::new(st.clone(), None);
    let posting = |st: &Rc<RefCell<HostState>>| -> Vec<TenantId> {
        let s = st.borrow();
        (1..=5).filter(|t| !s.tenants[t].bw_paused).collect()
    };
    let t0 = 10_000_000_000;
    let woken = agent.allocate(t0);
    assert_eq!(posting(&st), vec![1], "one bandwidth tenant at a time");
    assert!(
        [2, 3, 4, 5].iter().all(|t| woken.contains(t)),
        "paused ones are woken: {woken:?}"
    );
    assert!(!woken.contains(&6), "D is neither limited nor paused");
    // A paused tenant's posts wait in its layer.
    let before = bs[1].nic.sends(bs[1].qps[0]).len();
    bs[1].write(0, 2, 65_536, true).unwrap();
    assert_eq!(bs[1].nic.sends(bs[1].qps[0]).len(), before);
    assert!(bs[1].counter("pauses") >= 1.0);
    // 100 ms later the turn moves on, and the woken tenant posts.
    agent.allocate(t0 + 50_000_000_000);
    assert_eq!(posting(&st), vec![1], "within its 100 ms");
    agent.allocate(t0 + 100_000_000_000);
    assert_eq!(posting(&st), vec![2]);
    bs[1].nic.rec.now = t0 + 100_000_000_000;
    let mut up = Vec::new();
    bs[1].with(|s| s.deliver(Event::Wake(layer::WAKE_RESCHEDULE), &mut up));
    assert!(
        bs[1].nic.sends(bs[1].qps[0]).len() > before,
        "resumed on the agent's wake"
    );
    assert!(up.is_empty(), "the layer consumes its wake");
}
