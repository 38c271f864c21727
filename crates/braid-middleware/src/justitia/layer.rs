//! Justitia's per-tenant layer (the patched libmlx5's `post_send`): classifies its tenant, splits
//! a bandwidth tenant's WRs into chunks posted one per token, gives a throughput tenant a batch
//! of WRs per token, and passes a latency tenant's WRs through.
//!
//! Chunks go on the application's own QP, in order: the last chunk carries the application's
//! `wr_id` and signaling, so its completion means the whole message is done. Every chunk's
//! `wr_id` is tagged (top 16 bits [`TAG`], an application `wr_id` with those bits is not
//! supported); on polling, the layer drops the tagged completions but the last chunk's of a
//! signaled WR, which it hands up with the application's `wr_id`, and an error anywhere in a WR
//! is reported once, as ibverbs reports errors of unsignaled WRs too.

use super::agent::HostState;
use super::{Class, JustitiaConfig, WAKE_AGENT, WAKE_GRANT, WAKE_SELF};
use braid_verbs::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

/// The top 16 bits of a chunk's `wr_id`.
pub const TAG: u64 = 0x4A57 << 48;
const TAG_MASK: u64 = 0xFFFF << 48;

fn tagged(slot: usize, last: bool) -> u64 {
    TAG | ((slot as u64) << 1) | last as u64
}

struct QpInfo {
    send_cq: CqId,
    remote: Option<u32>,
    /// Unsignaled WRs posted since the last signaled one.
    since_signal: u32,
    sig_all: bool,
    /// A completion reported an error: the QP flushes what follows, held WRs go at once.
    errored: bool,
    splittable: bool,
    /// Its traffic class (None: the NIC's default).
    priority: Option<u8>,
}

/// An application WR waiting for tokens, possibly partly posted.
struct Held {
    seq: u64,
    qp: QpNum,
    wr: SendWr,
    /// Bytes already posted (split WRs).
    off: u64,
    /// Its slot once split.
    app: Option<usize>,
}

/// What the layer remembers of a split (or re-signaled) application WR.
struct AppWr {
    wr_id: u64,
    signaled: bool,
    len: u64,
    error: Option<WcStatus>,
}

/// One tenant's Justitia layer.
pub struct JustitiaLayer {
    st: Rc<RefCell<HostState>>,
    declared: Class,
    large: u64,
    signal_every: u32,
    batch: i64,
    tenant: TenantId,
    class: Option<Class>,
    qps: HashMap<QpNum, QpInfo>,
    queue: VecDeque<Held>,
    seq: u64,
    /// Registered with the agent for a token.
    waiting: bool,
    wait_since: u64,
    /// Tokens the agent granted (their bytes), not used yet.
    grants: VecDeque<u64>,
    /// Throughput tenants: WRs left of the batches granted.
    debit: i64,
    /// The last post failed with a full send queue: retry after the next poll.
    blocked: bool,
    apps: Vec<Option<AppWr>>,
    free: Vec<usize>,
    live: usize,
    synthetic: BTreeMap<CqId, Vec<WorkCompletion>>,
    chunks: u64,
    split_wrs: u64,
    waits: u64,
    wait_ps: u64,
    hidden: u64,
}

impl JustitiaLayer {
    pub fn new(st: Rc<RefCell<HostState>>, cfg: &JustitiaConfig, tenant: TenantId) -> Self {
        JustitiaLayer {
            st,
            declared: cfg.class,
            large: cfg.large_message.0,
            signal_every: cfg.signal_every,
            batch: cfg.batch_ops as i64,
            tenant,
            class: None,
            qps: HashMap::new(),
            queue: VecDeque::new(),
            seq: 0,
            waiting: false,
            wait_since: 0,
            grants: VecDeque::new(),
            debit: 0,
            blocked: false,
            apps: Vec::new(),
            free: Vec::new(),
            live: 0,
            synthetic: BTreeMap::new(),
            chunks: 0,
            split_wrs: 0,
            waits: 0,
            wait_ps: 0,
            hidden: 0,
        }
    }

    /// The class this tenant has now (None before its first post).
    pub fn class(&self) -> Option<Class> {
        self.class
    }

    fn wake_agent(&self, v: &mut dyn Verbs) {
        if self.st.borrow_mut().poke() {
            v.wake(AGENT, WAKE_AGENT);
        }
    }

    /// Classifies the tenant on a post (Justitia registers a flow at its first message).
    fn classify(&mut self, v: &mut dyn Verbs, wr: &SendWr) {
        let c = match (self.declared, self.class) {
            (Class::Auto, cur) => {
                if !wr.op.carries_data() {
                    return;
                }
                if wr.len() > self.large {
                    Class::Bandwidth
                } else {
                    cur.unwrap_or(Class::Latency)
                }
            }
            (d, _) => d,
        };
        if self.class == Some(c) {
            return;
        }
        self.class = Some(c);
        let mut s = self.st.borrow_mut();
        if c == Class::Latency {
            // The lowest QP number: the same QP in every run of a scenario and seed.
            if let Some((_, q)) = self.qps.iter().min_by_key(|(n, _)| **n) {
                s.set_latency_priority(q.priority);
            }
        }
        s.set_class(self.tenant, c);
        if c == Class::Bandwidth {
            for q in self.qps.values() {
                if let Some(h) = q.remote {
                    s.add_receiver(h);
                }
            }
        }
        drop(s);
        self.wake_agent(v);
    }

    fn alloc(&mut self, qp: QpNum, wr: &SendWr) -> usize {
        let a = AppWr {
            wr_id: wr.wr_id,
            signaled: wr.signaled || self.qps.get(&qp).is_some_and(|q| q.sig_all),
            len: wr.len(),
            error: None,
        };
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                self.apps[i] = Some(a);
                i
            }
            None => {
                self.apps.push(Some(a));
                self.apps.len() - 1
            }
        }
    }

    fn release(&mut self, i: usize) {
        if self.apps[i].take().is_some() {
            self.live -= 1;
            self.free.push(i);
        }
    }

    /// The bytes of credit the next unit of `h` takes: a chunk of a split WR, a whole WR, or a
    /// token's worth for a throughput tenant's batch.
    fn need(&self, h: &Held) -> u64 {
        let chunk = self.st.borrow().chunk();
        match self.class {
            Some(Class::Throughput) => chunk,
            _ => {
                let rest = h.wr.len() - h.off;
                let splittable = matches!(
                    h.wr.op,
                    SendOp::Write | SendOp::WriteWithImm(_) | SendOp::Read
                ) && !h.wr.inline;
                if splittable || h.app.is_some() {
                    rest.min(chunk).max(1)
                } else {
                    rest.max(1)
                }
            }
        }
    }

    /// Whether the head of the queue may go without a token.
    fn free_to_go(&self, h: &Held) -> bool {
        !h.wr.op.carries_data()
            || self.qps.get(&h.qp).is_some_and(|q| q.errored)
            || (self.class == Some(Class::Throughput) && self.debit > 0)
    }

    /// Posts what the queue may post now. `sync`: the sequence number of the WR the
    /// application is posting in this call, whose first failure is returned to it.
    fn pump(&mut self, v: &mut dyn Verbs, sync: Option<u64>) -> Result<(), VerbsError> {
        let mut result = Ok(());
        while let Some(front) = self.queue.front() {
            if self.blocked {
                break;
            }
            let mut token = None;
            if !self.free_to_go(front) {
                let now = v.now();
                let need = self.need(front);
                let have = match self.grants.pop_front() {
                    Some(g) => Some(g),
                    None => {
                        (!self.waiting && self.st.borrow_mut().try_take(now, need)).then_some(need)
                    }
                };
                let Some(g) = have else {
                    if !self.waiting {
                        self.waiting = true;
                        self.wait_since = now;
                        self.waits += 1;
                        let wake = self.st.borrow_mut().request(self.tenant, need);
                        if wake {
                            v.wake(AGENT, WAKE_AGENT);
                        }
                    }
                    break;
                };
                if self.class == Some(Class::Throughput) {
                    self.debit += self.batch;
                    continue;
                }
                token = Some(g);
            }
            match self.post_unit(v) {
                Ok(()) => {}
                Err(VerbsError::QueueFull) => {
                    // The send queue is full of unsignaled work: retry once the app has polled,
                    // with the token this attempt took.
                    self.blocked = true;
                    if let Some(g) = token {
                        self.grants.push_front(g);
                    }
                    break;
                }
                Err(e) => {
                    let h = self.queue.pop_front().expect("a front to post");
                    if sync == Some(h.seq) && h.off == 0 {
                        // The application's own post failed before anything of it went.
                        if let Some(i) = h.app {
                            self.release(i);
                            self.split_wrs -= 1;
                        }
                        result = Err(e);
                    } else {
                        self.fail(v, h);
                    }
                }
            }
        }
        if self.queue.is_empty() && !self.grants.is_empty() {
            let unused = self.grants.drain(..).sum();
            self.st.borrow_mut().give_back(unused);
        }
        result
    }

    /// A held WR could not be posted later on: its completion is made up (Flushed, or the
    /// error one of its chunks already reported) and handed to the app at its next poll.
    fn fail(&mut self, v: &mut dyn Verbs, h: Held) {
        let Some(q) = self.qps.get(&h.qp) else {
            return;
        };
        let error = h
            .app
            .and_then(|i| self.apps[i].as_ref())
            .and_then(|a| a.error);
        let wc = WorkCompletion {
            wr_id: h.wr.wr_id,
            status: error.unwrap_or(WcStatus::Flushed),
            opcode: match h.wr.op {
                SendOp::Read => WcOpcode::Read,
                SendOp::Send | SendOp::SendWithImm(_) => WcOpcode::Send,
                _ => WcOpcode::Write,
            },
            byte_len: 0,
            imm: None,
            qp_num: h.qp,
            src_host: 0,
            src_qp: 0,
        };
        // Chunks of it may still complete; the slot is left to them (and never reused).
        self.synthetic.entry(q.send_cq).or_default().push(wc);
        v.wake(self.tenant, WAKE_SELF);
    }

    /// Posts one unit of the queue's head: a chunk of a split WR, or a whole WR.
    fn post_unit(&mut self, v: &mut dyn Verbs) -> Result<(), VerbsError> {
        let chunk = self.st.borrow().chunk();
        let every = self.signal_every;
        let bandwidth = self.class == Some(Class::Bandwidth);
        let h = self.queue.front().expect("a front to post");
        let q = self.qps.get(&h.qp);
        let splittable = bandwidth
            && q.is_some_and(|q| q.splittable && !q.errored)
            && !h.wr.inline
            && matches!(
                h.wr.op,
                SendOp::Write | SendOp::WriteWithImm(_) | SendOp::Read
            );
        let total = h.wr.len();
        if h.app.is_none() && (!splittable || total <= chunk) {
            // The whole WR, as the application posted it (re-signaled if a long unsignaled run
            // would otherwise fill the send queue).
            let (qp, mut wr) = (h.qp, h.wr.clone());
            let sig = wr.signaled || q.is_some_and(|q| q.sig_all);
            let force = !sig && q.is_some_and(|q| q.since_signal + 1 >= every);
            let slot = force.then(|| self.alloc(qp, &wr));
            if let Some(i) = slot {
                wr.wr_id = tagged(i, true);
                wr.signaled = true;
            }
            if let Err(e) = v.post_send(qp, wr) {
                if let Some(i) = slot {
                    self.release(i);
                }
                return Err(e);
            }
            if let Some(q) = self.qps.get_mut(&qp) {
                q.since_signal = if sig || force { 0 } else { q.since_signal + 1 };
            }
            self.queue.pop_front();
            if self.class == Some(Class::Throughput) {
                self.debit -= 1;
            }
            return Ok(());
        }
        let slot = match h.app {
            Some(i) => i,
            None => {
                let (qp, wr) = (h.qp, h.wr.clone());
                let i = self.alloc(qp, &wr);
                self.split_wrs += 1;
                self.queue.front_mut().expect("front").app = Some(i);
                i
            }
        };
        let h = self.queue.front().expect("front");
        let len = (total - h.off).min(chunk);
        let last = h.off + len == total;
        let sig_all = self.qps.get(&h.qp).is_some_and(|q| q.sig_all);
        let since = self.qps.get(&h.qp).map_or(0, |q| q.since_signal);
        let signaled = last || since + 1 >= every;
        let op = match h.wr.op {
            SendOp::WriteWithImm(_) if !last => SendOp::Write,
            op => op,
        };
        let mut wr = SendWr::new(
            tagged(slot, last),
            op,
            slice_sges(&h.wr.sg_list, h.off, len),
        );
        wr.signaled = signaled;
        wr.remote_addr = h.wr.remote_addr + h.off;
        wr.rkey = h.wr.rkey;
        wr.fence = h.wr.fence && h.off == 0;
        let qp = h.qp;
        v.charge(Work::WrBuilt(1));
        v.post_send(qp, wr)?;
        self.chunks += 1;
        if let Some(q) = self.qps.get_mut(&qp) {
            q.since_signal = if signaled || sig_all {
                0
            } else {
                q.since_signal + 1
            };
        }
        let h = self.queue.front_mut().expect("front");
        h.off += len;
        if last {
            self.queue.pop_front();
        }
        Ok(())
    }

    /// Handles a polled completion; returns what the application should see of it.
    fn filter(&mut self, mut wc: WorkCompletion) -> Option<WorkCompletion> {
        if wc.status != WcStatus::Success {
            if let Some(q) = self.qps.get_mut(&wc.qp_num) {
                q.errored = true;
            }
        }
        if wc.wr_id & TAG_MASK != TAG || self.live == 0 {
            return Some(wc);
        }
        let i = ((wc.wr_id & !TAG_MASK) >> 1) as usize;
        let last = wc.wr_id & 1 == 1;
        let a = self.apps.get_mut(i).and_then(|a| a.as_mut())?;
        if wc.status != WcStatus::Success && a.error.is_none() {
            a.error = Some(wc.status);
        }
        if !last {
            self.hidden += 1;
            return None;
        }
        let show = a.signaled || a.error.is_some();
        wc.wr_id = a.wr_id;
        wc.status = a.error.unwrap_or(wc.status);
        if wc.byte_len > 0 {
            wc.byte_len = a.len;
        }
        self.release(i);
        if !show {
            self.hidden += 1;
        }
        show.then_some(wc)
    }
}

impl Middleware for JustitiaLayer {
    fn name(&self) -> &'static str {
        "justitia"
    }

    fn start(&mut self, below: &mut dyn Verbs) {
        self.tenant = below.tenant();
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let class = match self.class {
            None => -1.0,
            Some(Class::Bandwidth) => 0.0,
            Some(Class::Latency) => 1.0,
            Some(Class::Throughput) => 2.0,
            Some(Class::Auto) => -1.0,
        };
        vec![
            ("class", class),
            ("chunks", self.chunks as f64),
            ("split_wrs", self.split_wrs as f64),
            ("tokens_waited", self.waits as f64),
            ("token_wait_us", self.wait_ps as f64 / 1e6),
            ("hidden_completions", self.hidden as f64),
            ("held", self.queue.len() as f64),
        ]
    }

    fn create_qp(&mut self, below: &mut dyn Verbs, init: &QpInit) -> Result<QpNum, VerbsError> {
        let qp = below.create_qp(init)?;
        self.qps.insert(
            qp,
            QpInfo {
                send_cq: init.send_cq,
                remote: None,
                since_signal: 0,
                sig_all: init.sq_sig_all,
                errored: false,
                splittable: matches!(init.qp_type, QpType::Rc | QpType::Uc) && !init.managed_send,
                priority: init.priority,
            },
        );
        if self.declared == Class::Latency {
            self.st.borrow_mut().set_latency_priority(init.priority);
        }
        Ok(qp)
    }

    fn connect_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        remote: RemoteQp,
    ) -> Result<(), VerbsError> {
        below.connect_qp(qp, remote)?;
        if let Some(q) = self.qps.get_mut(&qp) {
            q.remote = Some(remote.host);
            q.errored = false;
        }
        let new = {
            let mut s = self.st.borrow_mut();
            if self.class == Some(Class::Bandwidth) {
                s.add_receiver(remote.host);
            }
            s.want_peer(remote.host)
        };
        if new {
            self.wake_agent(below);
        }
        Ok(())
    }

    fn modify_qp(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        m: QpModify,
    ) -> Result<(), VerbsError> {
        below.modify_qp(qp, m)?;
        match m {
            QpModify::Error => {
                if let Some(q) = self.qps.get_mut(&qp) {
                    q.errored = true;
                }
                self.pump(below, None)?;
            }
            // Reset empties the queues without completions, as ibverbs does.
            QpModify::Reset => self.queue.retain(|h| h.qp != qp),
            QpModify::UdpSport(_) => {}
        }
        Ok(())
    }

    fn destroy_qp(&mut self, below: &mut dyn Verbs, qp: QpNum) -> Result<(), VerbsError> {
        below.destroy_qp(qp)?;
        self.queue.retain(|h| h.qp != qp);
        self.qps.remove(&qp);
        Ok(())
    }

    fn post_send(
        &mut self,
        below: &mut dyn Verbs,
        qp: QpNum,
        wr: SendWr,
    ) -> Result<(), VerbsError> {
        self.classify(below, &wr);
        let paced = matches!(self.class, Some(Class::Bandwidth | Class::Throughput))
            && self.qps.contains_key(&qp);
        if !paced {
            return below.post_send(qp, wr);
        }
        if self.class == Some(Class::Throughput) && self.queue.is_empty() && self.debit > 0 {
            self.debit -= 1;
            return below.post_send(qp, wr);
        }
        self.seq += 1;
        let seq = self.seq;
        self.queue.push_back(Held {
            seq,
            qp,
            wr,
            off: 0,
            app: None,
        });
        self.pump(below, Some(seq))
    }

    fn poll_cq(
        &mut self,
        below: &mut dyn Verbs,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        let start = out.len();
        if let Some(s) = self.synthetic.get_mut(&cq) {
            let n = s.len().min(max);
            out.extend(s.drain(..n));
            if s.is_empty() {
                self.synthetic.remove(&cq);
            }
        }
        let mut polled = Vec::new();
        loop {
            let want = max - (out.len() - start);
            if want == 0 {
                break;
            }
            polled.clear();
            let n = below.poll_cq(cq, want, &mut polled);
            let mut hid = false;
            for wc in polled.drain(..) {
                match self.filter(wc) {
                    Some(w) => out.push(w),
                    None => hid = true,
                }
            }
            // Poll again only to fill what hidden completions took (a short answer otherwise
            // means the CQ is empty, and an extra poll would cost the tenant's CPU).
            if n < want && !hid {
                break;
            }
            if n == 0 {
                break;
            }
        }
        let errored = self
            .queue
            .front()
            .is_some_and(|h| self.qps.get(&h.qp).is_some_and(|q| q.errored));
        if (self.blocked || errored) && !self.queue.is_empty() {
            self.blocked = false;
            let _ = self.pump(below, None);
        }
        out.len() - start
    }

    fn on_event(&mut self, below: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        match event {
            Event::Wake(WAKE_GRANT) => {
                let now = below.now();
                if self.waiting {
                    self.waiting = false;
                    self.wait_ps += now.saturating_sub(self.wait_since);
                }
                let granted = self.st.borrow_mut().take_granted(self.tenant);
                self.grants.extend(granted);
                let _ = self.pump(below, None);
            }
            Event::Wake(WAKE_SELF) => {
                up.extend(self.synthetic.keys().map(|&cq| Event::Completion(cq)));
            }
            e => up.push(e),
        }
    }
}
