//! One verbs conformance suite for every backend: each case is an [`App`] written against
//! [`Verbs`] only, so the simulated RNIC (a `braid-sim` test), the fake NIC and a real NIC
//! (`braid-rdma`'s `braid-conformance` on Soft-RoCE) run the very same code. A case sets up two
//! QPs on one host connected to each other (loopback), runs a script of steps, and records
//! whether it passed and what it observed ([`Outcome::observed`]): backends are compared on
//! those lines, so a difference shows even where both pass.
//!
//! Cases: QP state machine, completion order, signaled/unsignaled, immediate data, inline, UD,
//! remote access error, RNR retry exceeded, retry exceeded on a dead peer, flushes after
//! Error, an unarmed CQ not notifying, byte placement (scatter/gather WRITE and READ), and
//! protection (ibverbs' rules for protection domains and rkeys): an rkey of another PD than the
//! responder QP's refused for WRITE and READ, an access outside the region refused, an rkey
//! without the access flag refused, an lkey of another PD refused locally, and a PD still in
//! use not deallocated; `max_rd_atomic` (0 refused, a READ burst through one READ resource);
//! the queues (a send and a receive sharing a wr_id told apart when flushed, a full send queue
//! taking a post list's head and refusing the rest at the right index, a SEND recovering from
//! receiver-not-ready by retrying, a receive too small for its SEND, a READ with a bad rkey).

use crate::*;
use errors::*;
use protection::*;
use queues::*;
use rd_atomic::*;
use std::cell::RefCell;
use std::rc::Rc;

mod errors;
mod protection;
mod queues;
mod rd_atomic;

/// What a case found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// None while running; Some(Ok) passed; Some(Err(why)) failed.
    pub result: Option<Result<(), String>>,
    /// What the backend did, one fact a line (compared across backends).
    pub observed: Vec<String>,
}

pub type SharedOutcome = Rc<RefCell<Outcome>>;

/// A case: its name, how long it may take (picoseconds of the backend's clock) and its app.
pub struct Case {
    pub name: &'static str,
    pub limit_ps: u64,
    pub app: fn(SharedOutcome) -> Box<dyn App>,
    /// It checks a limit the device enforces (the send queue's depth): run it on the bare
    /// device only, not through a mechanism that holds WRs in a software queue of its own
    /// (Justitia's pacer accepts a list longer than the send queue).
    pub bare_only: bool,
}

const BASE: u64 = 0x1000_0000;
const MR_LEN: u64 = 1 << 20;
/// Offset of B's half of the region.
const B_OFF: u64 = 512 << 10;
/// Where the region of B's own protection domain lies (protection cases).
const BASE_B: u64 = BASE + 4 * MR_LEN;
const MR_B_LEN: u64 = 64 << 10;
const MS: u64 = 1_000_000_000;
const DEADLINE: u64 = 1;
const WAKE: u64 = 2;

/// The state a script works on.
pub struct Ctx {
    pub qp_type: QpType,
    pub cq_a: CqId,
    pub cq_b: CqId,
    pub qa: QpNum,
    pub qb: QpNum,
    pub mr: MemoryRegion,
    /// With [`Setup::b_pd`]: B's protection domain and a region in it (at [`BASE_B`]).
    pub pd_b: PdId,
    pub mr_b: Option<MemoryRegion>,
    pub host: u32,
    /// Completions seen, in order: (cq, completion).
    pub wcs: Vec<(CqId, WorkCompletion)>,
    /// Completion notifications seen per CQ (a, b).
    pub events: [u32; 2],
    out: SharedOutcome,
}

impl Ctx {
    pub fn note(&self, s: impl Into<String>) {
        self.out.borrow_mut().observed.push(s.into());
    }
    fn sge(&self, off: u64, len: u32) -> Vec<Sge> {
        vec![Sge {
            addr: BASE + off,
            length: len,
            lkey: self.mr.lkey,
        }]
    }
    /// A WR of `op` from A's `src` to B's `dst` offset.
    pub fn wr(&self, id: u64, op: SendOp, src: u64, dst: u64, len: u32) -> SendWr {
        let mut w = SendWr::new(id, op, self.sge(src, len));
        w.remote_addr = BASE + dst;
        w.rkey = self.mr.rkey;
        w
    }
    pub fn recv(&self, id: u64, off: u64, len: u32) -> RecvWr {
        RecvWr {
            wr_id: id,
            sg_list: self.sge(off, len),
        }
    }
    fn wcs_of(&self, cq: CqId) -> Vec<WorkCompletion> {
        self.wcs
            .iter()
            .filter(|(c, _)| *c == cq)
            .map(|(_, w)| *w)
            .collect()
    }
    pub fn a_wcs(&self) -> Vec<WorkCompletion> {
        self.wcs_of(self.cq_a)
    }
    pub fn b_wcs(&self) -> Vec<WorkCompletion> {
        self.wcs_of(self.cq_b)
    }
}

/// What a step waits for before the next one runs.
pub enum Wait {
    /// Nothing: run the next step now.
    Go,
    /// Until at least this many completions have been seen in all.
    Wcs(usize),
    /// Until this much time has passed (picoseconds).
    For(u64),
}

type Step = fn(&mut Ctx, &mut dyn Verbs) -> Result<Wait, String>;

/// How a case's QPs are made.
#[derive(Clone, Copy)]
struct Setup {
    qp_type: QpType,
    /// Arm both CQs at the start.
    arm: bool,
    /// Connect A and B to each other at the start.
    connect: bool,
    retry_cnt: u8,
    rnr_retry: u8,
    /// QP B in a protection domain of its own (alloc_pd), with a region of that PD; A and the
    /// main region stay in the default PD.
    b_pd: bool,
    /// Both QPs' `max_rd_atomic` and `max_dest_rd_atomic`.
    rd_atomic: u8,
    /// Both QPs' send queue depth (ibverbs `cap.max_send_wr`).
    max_send_wr: u32,
    /// A's receive queue completes on B's CQ (a QP with a send CQ and a receive CQ of its own).
    a_recv_on_cq_b: bool,
}

const RC: Setup = Setup {
    qp_type: QpType::Rc,
    arm: true,
    connect: true,
    retry_cnt: 7,
    rnr_retry: 7,
    b_pd: false,
    rd_atomic: MAX_RD_ATOMIC,
    max_send_wr: 64,
    a_recv_on_cq_b: false,
};

struct Script {
    setup: Setup,
    steps: &'static [Step],
    next: usize,
    ctx: Option<Ctx>,
    wait: Wait,
    until: u64,
    limit: u64,
    out: SharedOutcome,
    done: bool,
}

impl Script {
    fn finish(&mut self, r: Result<(), String>) {
        if !self.done {
            self.done = true;
            self.out.borrow_mut().result = Some(r);
        }
    }

    fn setup(&mut self, v: &mut dyn Verbs) -> Result<(), String> {
        let s = self.setup;
        let e = |what: &str, e: VerbsError| format!("{what}: {e}");
        let cq_a = v.create_cq(256).map_err(|x| e("create_cq", x))?;
        let cq_b = v.create_cq(256).map_err(|x| e("create_cq", x))?;
        if s.arm {
            v.req_notify_cq(cq_a).map_err(|x| e("req_notify_cq", x))?;
            v.req_notify_cq(cq_b).map_err(|x| e("req_notify_cq", x))?;
        }
        let mr = v
            .reg_mr(BASE, MR_LEN, Access::ALL.tracked())
            .map_err(|x| e("reg_mr", x))?;
        let init = |cq| QpInit {
            max_send_wr: s.max_send_wr,
            max_recv_wr: 64,
            retry_cnt: s.retry_cnt,
            rnr_retry: s.rnr_retry,
            max_rd_atomic: s.rd_atomic,
            max_dest_rd_atomic: s.rd_atomic,
            ..QpInit::of_type(s.qp_type, cq)
        };
        let (pd_b, mr_b) = if s.b_pd {
            let pd = v.alloc_pd().map_err(|x| e("alloc_pd", x))?;
            let mr = v
                .reg_mr_in(pd, BASE_B, MR_B_LEN, Access::ALL.tracked())
                .map_err(|x| e("reg_mr_in", x))?;
            (pd, Some(mr))
        } else {
            (DEFAULT_PD, None)
        };
        let qa = v
            .create_qp(&QpInit {
                recv_cq: if s.a_recv_on_cq_b { cq_b } else { cq_a },
                ..init(cq_a)
            })
            .map_err(|x| e("create_qp", x))?;
        let qb = v
            .create_qp(&QpInit {
                pd: pd_b,
                ..init(cq_b)
            })
            .map_err(|x| e("create_qp", x))?;
        let host = v.local_host();
        if s.connect {
            let to = |qpn| RemoteQp {
                host,
                qpn,
                udp_sport: None,
            };
            v.connect_qp(qa, to(qb)).map_err(|x| e("connect_qp", x))?;
            v.connect_qp(qb, to(qa)).map_err(|x| e("connect_qp", x))?;
        }
        self.ctx = Some(Ctx {
            qp_type: s.qp_type,
            cq_a,
            cq_b,
            qa,
            qb,
            mr,
            pd_b,
            mr_b,
            host,
            wcs: Vec::new(),
            events: [0; 2],
            out: self.out.clone(),
        });
        Ok(())
    }

    /// Runs steps while their waits are met.
    fn advance(&mut self, v: &mut dyn Verbs) {
        while !self.done {
            let ctx = self.ctx.as_mut().expect("set up");
            let ready = match self.wait {
                Wait::Go => true,
                Wait::Wcs(n) => ctx.wcs.len() >= n,
                Wait::For(_) => v.now() >= self.until,
            };
            if !ready {
                return;
            }
            if self.next == self.steps.len() {
                self.finish(Ok(()));
                return;
            }
            let step = self.steps[self.next];
            self.next += 1;
            match step(ctx, v) {
                Ok(w) => {
                    if let Wait::For(d) = w {
                        self.until = v.now() + d;
                        v.set_timer(self.until, WAKE);
                    }
                    self.wait = w;
                }
                Err(why) => self.finish(Err(format!("step {}: {why}", self.next))),
            }
        }
    }
}

impl App for Script {
    fn start(&mut self, v: &mut dyn Verbs) {
        v.set_timer(v.now() + self.limit, DEADLINE);
        match self.setup(v) {
            Ok(()) => self.advance(v),
            Err(e) => self.finish(Err(format!("setup: {e}"))),
        }
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if self.done {
            return;
        }
        match ev {
            Event::Completion(cq) => {
                let ctx = self.ctx.as_mut().expect("set up");
                let i = if cq == ctx.cq_a { 0 } else { 1 };
                ctx.events[i] += 1;
                let mut out = Vec::new();
                if let Err(e) = poll_and_rearm(v, cq, &mut out) {
                    self.finish(Err(format!("poll_and_rearm: {e}")));
                    return;
                }
                ctx.wcs.extend(out.into_iter().map(|w| (cq, w)));
            }
            Event::Timer(DEADLINE) => {
                let what = match self.wait {
                    Wait::Wcs(n) => format!(
                        "timed out waiting for {n} completions (saw {})",
                        self.ctx.as_ref().map_or(0, |c| c.wcs.len())
                    ),
                    _ => "timed out".into(),
                };
                self.finish(Err(format!("step {}: {what}", self.next)));
                return;
            }
            _ => {}
        }
        self.advance(v);
    }
    fn is_done(&self) -> bool {
        self.done
    }
}

fn script(setup: Setup, steps: &'static [Step], limit: u64, out: SharedOutcome) -> Box<dyn App> {
    Box::new(Script {
        setup,
        steps,
        next: 0,
        ctx: None,
        wait: Wait::Go,
        until: 0,
        limit,
        out,
        done: false,
    })
}

fn check(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

fn err(e: VerbsError) -> String {
    e.to_string()
}

fn show(w: &WorkCompletion) -> String {
    format!(
        "wr {} {:?} {:?} len {}{}",
        w.wr_id,
        w.status,
        w.opcode,
        w.byte_len,
        w.imm.map(|i| format!(" imm {i:#x}")).unwrap_or_default()
    )
}

// ------------------------------------------------------------------------------------ cases

fn state_machine(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[|c, v| {
        let st = |v: &mut dyn Verbs, q| v.query_qp(q).map(|a| a.state).map_err(err);
        let s0 = st(v, c.qa)?;
        c.note(format!("after create: {s0:?}"));
        check(s0 == QpState::Init, || {
            format!("a new QP is {s0:?}, not Init")
        })?;
        let to = |qpn| RemoteQp {
            host: c.host,
            qpn,
            udp_sport: None,
        };
        v.connect_qp(c.qa, to(c.qb)).map_err(err)?;
        v.connect_qp(c.qb, to(c.qa)).map_err(err)?;
        let s1 = st(v, c.qa)?;
        c.note(format!("after connect: {s1:?}"));
        check(s1 == QpState::Rts, || {
            format!("a connected QP is {s1:?}, not Rts")
        })?;
        let again = v.connect_qp(c.qa, to(c.qb));
        c.note(format!(
            "connect when Rts: {}",
            if again.is_ok() { "accepted" } else { "refused" }
        ));
        check(again.is_err(), || {
            "connect_qp on an Rts QP was accepted".into()
        })?;
        let r = v.query_qp(c.qa).map_err(err)?.remote.map(|r| r.qpn);
        check(r == Some(c.qb), || {
            format!("query_qp remote {r:?}, not {}", c.qb)
        })?;
        v.modify_qp(c.qa, QpModify::Error).map_err(err)?;
        let s2 = st(v, c.qa)?;
        c.note(format!("after modify Error: {s2:?}"));
        check(s2 == QpState::Error, || {
            format!("{s2:?} after modify Error")
        })?;
        v.modify_qp(c.qa, QpModify::Reset).map_err(err)?;
        let s3 = st(v, c.qa)?;
        c.note(format!("after modify Reset: {s3:?}"));
        check(s3 == QpState::Reset, || {
            format!("{s3:?} after modify Reset")
        })?;
        v.connect_qp(c.qa, to(c.qb)).map_err(err)?;
        let s4 = st(v, c.qa)?;
        c.note(format!("after reconnect: {s4:?}"));
        check(s4 == QpState::Rts, || format!("{s4:?} after reconnecting"))?;
        Ok(Wait::Go)
    }];
    script(
        Setup {
            connect: false,
            ..RC
        },
        STEPS,
        100 * MS,
        out,
    )
}

fn completion_order(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            for i in 0..8u64 {
                let op = if i % 2 == 0 {
                    SendOp::Write
                } else {
                    SendOp::Read
                };
                v.post_send(c.qa, c.wr(i, op, i * 4096, B_OFF + i * 4096, 3000))
                    .map_err(err)?;
            }
            Ok(Wait::Wcs(8))
        },
        |c, _| {
            let w = c.a_wcs();
            for x in &w {
                c.note(show(x));
            }
            let ids: Vec<u64> = w.iter().map(|w| w.wr_id).collect();
            check(ids == (0..8).collect::<Vec<_>>(), || {
                format!("completion order {ids:?}")
            })?;
            check(w.iter().all(|w| w.status == WcStatus::Success), || {
                "a WR failed".into()
            })?;
            let ops_ok = w.iter().all(|w| {
                w.opcode
                    == if w.wr_id % 2 == 0 {
                        WcOpcode::Write
                    } else {
                        WcOpcode::Read
                    }
            });
            check(ops_ok, || "wrong opcodes".into())?;
            Ok(Wait::Go)
        },
    ];
    script(RC, STEPS, 2000 * MS, out)
}

fn unsignaled(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            for i in 0..6u64 {
                let mut w = c.wr(i, SendOp::Write, 0, B_OFF, 512);
                w.signaled = i == 2 || i == 5;
                v.post_send(c.qa, w).map_err(err)?;
            }
            Ok(Wait::Wcs(2))
        },
        |_, _| Ok(Wait::For(20 * MS)),
        |c, v| {
            let w = c.a_wcs();
            for x in &w {
                c.note(show(x));
            }
            let ids: Vec<u64> = w.iter().map(|w| w.wr_id).collect();
            check(ids == vec![2, 5], || {
                format!("completions {ids:?}, want [2, 5]")
            })?;
            let o = v.query_qp(c.qa).map_err(err)?.send_outstanding;
            c.note(format!("send_outstanding after the last completion: {o}"));
            check(o == 0, || format!("{o} sends still outstanding"))?;
            Ok(Wait::Go)
        },
    ];
    script(RC, STEPS, 2000 * MS, out)
}

fn immediate(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            v.write_local(BASE, &[7u8; 64]).map_err(err)?;
            v.post_recv(c.qb, c.recv(100, B_OFF + 8192, 256))
                .map_err(err)?;
            v.post_recv(c.qb, c.recv(101, B_OFF + 8192, 256))
                .map_err(err)?;
            v.post_send(c.qa, c.wr(1, SendOp::SendWithImm(0xdead_beef), 0, 0, 32))
                .map_err(err)?;
            v.post_send(
                c.qa,
                c.wr(2, SendOp::WriteWithImm(0x1234_5678), 0, B_OFF, 64),
            )
            .map_err(err)?;
            Ok(Wait::Wcs(4))
        },
        |c, v| {
            let b = c.b_wcs();
            for x in &b {
                c.note(format!("receiver: {}", show(x)));
            }
            check(b.len() == 2, || format!("{} receive completions", b.len()))?;
            check(
                b[0].wr_id == 100
                    && b[0].opcode == WcOpcode::RecvWithImm
                    && b[0].imm == Some(0xdead_beef)
                    && b[0].byte_len == 32,
                || format!("send with imm: {}", show(&b[0])),
            )?;
            check(
                b[1].wr_id == 101
                    && b[1].opcode == WcOpcode::RecvWithImm
                    && b[1].imm == Some(0x1234_5678),
                || format!("write with imm: {}", show(&b[1])),
            )?;
            check(b[0].src_qp == c.qa, || {
                format!("src_qp {} not {}", b[0].src_qp, c.qa)
            })?;
            let got = v.read_local(BASE + B_OFF, 64).map_err(err)?;
            check(got == vec![7u8; 64], || {
                "write-with-imm bytes not placed".into()
            })?;
            Ok(Wait::Go)
        },
    ];
    script(RC, STEPS, 2000 * MS, out)
}

fn inline(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            v.write_local(BASE, b"inline payload!!").map_err(err)?;
            v.post_recv(c.qb, c.recv(9, B_OFF, 64)).map_err(err)?;
            let mut w = c.wr(1, SendOp::Send, 0, 0, 16);
            w.inline = true;
            w.sg_list[0].lkey = 0; // inline data needs no key
            v.post_send(c.qa, w).map_err(err)?;
            // The buffer may be reused as soon as the post returns.
            v.write_local(BASE, b"XXXXXXXXXXXXXXXX").map_err(err)?;
            Ok(Wait::Wcs(2))
        },
        |c, v| {
            for x in &c.wcs {
                c.note(show(&x.1));
            }
            let got = v.read_local(BASE + B_OFF, 16).map_err(err)?;
            c.note(format!("received {:?}", String::from_utf8_lossy(&got)));
            check(&got[..] == b"inline payload!!", || {
                "inline bytes wrong".into()
            })?;
            Ok(Wait::Go)
        },
    ];
    script(RC, STEPS, 2000 * MS, out)
}

fn ud(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            let big = v.caps().mtu;
            c.note(format!("mtu {big}"));
            v.write_local(BASE, &[0x5a; 200]).map_err(err)?;
            v.post_recv(c.qb, c.recv(50, B_OFF, 4096)).map_err(err)?;
            let mut w = c.wr(1, SendOp::SendWithImm(77), 0, 0, 200);
            w.ud_dest = Some(RemoteQp {
                host: c.host,
                qpn: c.qb,
                udp_sport: None,
            });
            v.post_send(c.qa, w).map_err(err)?;
            // A READ on a UD QP is refused at post time.
            let r = v.post_send(c.qa, c.wr(2, SendOp::Read, 0, 0, 8));
            c.note(format!(
                "READ on UD: {}",
                if r.is_ok() { "accepted" } else { "refused" }
            ));
            check(r.is_err(), || "a READ on a UD QP was accepted".into())?;
            Ok(Wait::Wcs(2))
        },
        |c, v| {
            for x in &c.wcs {
                c.note(show(&x.1));
            }
            let b = c.b_wcs();
            check(b.len() == 1, || format!("{} receives", b.len()))?;
            let w = b[0];
            check(w.byte_len == 200 && w.imm == Some(77), || show(&w))?;
            check(w.src_qp == c.qa, || {
                format!("src_qp {} not {}", w.src_qp, c.qa)
            })?;
            check(w.src_host == c.host, || {
                format!("src_host {:#x} not {:#x}", w.src_host, c.host)
            })?;
            let got = v.read_local(BASE + B_OFF, 200).map_err(err)?;
            check(got == vec![0x5a; 200], || {
                "UD payload not at the start of the receive buffer".into()
            })?;
            Ok(Wait::Go)
        },
    ];
    script(
        Setup {
            qp_type: QpType::Ud,
            ..RC
        },
        STEPS,
        2000 * MS,
        out,
    )
}

fn unarmed_cq(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            v.post_send(c.qa, c.wr(1, SendOp::Write, 0, B_OFF, 64))
                .map_err(err)?;
            Ok(Wait::For(100 * MS))
        },
        |c, v| {
            c.note(format!("events while unarmed: {}", c.events[0]));
            check(c.events[0] == 0, || "an unarmed CQ notified".into())?;
            let mut got = Vec::new();
            let n = v.poll_cq(c.cq_a, 16, &mut got);
            check(n == 1 && got[0].wr_id == 1, || format!("polled {n}"))?;
            v.req_notify_cq(c.cq_a).map_err(err)?;
            v.post_send(c.qa, c.wr(2, SendOp::Write, 0, B_OFF, 64))
                .map_err(err)?;
            Ok(Wait::Wcs(1))
        },
        |_, _| Ok(Wait::For(20 * MS)),
        |c, _| {
            c.note(format!("events once armed: {}", c.events[0]));
            check(c.events[0] == 1, || {
                format!("{} events once armed", c.events[0])
            })?;
            Ok(Wait::Go)
        },
    ];
    script(Setup { arm: false, ..RC }, STEPS, 2000 * MS, out)
}

fn byte_placement(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            let pat: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
            v.write_local(BASE, &pat).map_err(err)?;
            // A WRITE gathered from three pieces, to an odd offset.
            let mut w = c.wr(1, SendOp::Write, 0, B_OFF + 123, 0);
            w.sg_list = vec![
                Sge {
                    addr: BASE,
                    length: 1000,
                    lkey: c.mr.lkey,
                },
                Sge {
                    addr: BASE + 5000,
                    length: 3000,
                    lkey: c.mr.lkey,
                },
                Sge {
                    addr: BASE + 1000,
                    length: 777,
                    lkey: c.mr.lkey,
                },
            ];
            v.post_send(c.qa, w).map_err(err)?;
            // A READ of what landed, scattered back into A's area at 20000.
            let mut r = c.wr(2, SendOp::Read, 0, B_OFF + 123, 0);
            r.sg_list = vec![
                Sge {
                    addr: BASE + 20_000,
                    length: 4000,
                    lkey: c.mr.lkey,
                },
                Sge {
                    addr: BASE + 30_000,
                    length: 777,
                    lkey: c.mr.lkey,
                },
            ];
            v.post_send(c.qa, r).map_err(err)?;
            Ok(Wait::Wcs(2))
        },
        |c, v| {
            for x in &c.wcs {
                c.note(show(&x.1));
            }
            let pat = v.read_local(BASE, 10_000).map_err(err)?;
            let mut want = Vec::new();
            want.extend_from_slice(&pat[..1000]);
            want.extend_from_slice(&pat[5000..8000]);
            want.extend_from_slice(&pat[1000..1777]);
            let landed = v.read_local(BASE + B_OFF + 123, 4777).map_err(err)?;
            check(landed == want, || "WRITE bytes misplaced".into())?;
            let around = v.read_local(BASE + B_OFF + 100, 23).map_err(err)?;
            let after = v.read_local(BASE + B_OFF + 123 + 4777, 100).map_err(err)?;
            check(around.iter().chain(&after).all(|&b| b == 0), || {
                "bytes outside the WRITE changed".into()
            })?;
            let mut back = v.read_local(BASE + 20_000, 4000).map_err(err)?;
            back.extend(v.read_local(BASE + 30_000, 777).map_err(err)?);
            check(back == want, || "READ bytes misplaced".into())?;
            c.note("4777 bytes placed and read back exactly");
            Ok(Wait::Go)
        },
    ];
    script(RC, STEPS, 2000 * MS, out)
}

/// Every case, in order.
pub fn cases() -> Vec<Case> {
    let c = |name, limit_ps, app| Case {
        name,
        limit_ps,
        app,
        bare_only: false,
    };
    vec![
        c("qp_state_machine", 100 * MS, state_machine),
        c("completion_order", 2000 * MS, completion_order),
        c("signaled_unsignaled", 2000 * MS, unsignaled),
        c("immediate_data", 2000 * MS, immediate),
        c("inline", 2000 * MS, inline),
        c("ud", 2000 * MS, ud),
        c("remote_access_error", 2000 * MS, remote_access_error),
        c("rnr_retry_exceeded", 2000 * MS, rnr),
        c("retry_exceeded_dead_peer", 5000 * MS, retry_exceeded),
        c("flush_after_error", 2000 * MS, flush_after_error),
        c("unarmed_cq", 2000 * MS, unarmed_cq),
        c("byte_placement", 2000 * MS, byte_placement),
        c("pd_foreign_rkey_write", 2000 * MS, pd_foreign_rkey_write),
        c("pd_foreign_rkey_read", 2000 * MS, pd_foreign_rkey_read),
        c("rkey_out_of_bounds", 2000 * MS, rkey_out_of_bounds),
        c("rkey_without_access", 2000 * MS, rkey_without_access),
        c("pd_foreign_lkey", 2000 * MS, pd_foreign_lkey),
        c("dealloc_busy_pd", 100 * MS, dealloc_busy_pd),
        c("max_rd_atomic", 2000 * MS, max_rd_atomic),
        c("shared_wr_id_flush", 2000 * MS, shared_wr_id_flush),
        Case {
            bare_only: true,
            ..c("sq_full_partial_list", 2000 * MS, sq_full_partial_list)
        },
        c("rnr_retry_recovers", 2000 * MS, rnr_retry_recovers),
        c("recv_too_small", 2000 * MS, recv_too_small),
        c("read_bad_rkey", 2000 * MS, read_bad_rkey),
    ]
}

/// One line per case: `name PASS|FAIL[: why]`, then its observations indented.
pub fn report(name: &str, o: &Outcome) -> String {
    let mut s = match &o.result {
        Some(Ok(())) => format!("{name} PASS\n"),
        Some(Err(e)) => format!("{name} FAIL: {e}\n"),
        None => format!("{name} FAIL: did not finish\n"),
    };
    for l in &o.observed {
        s.push_str("    ");
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests;
