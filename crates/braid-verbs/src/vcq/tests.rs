//! `VirtualCq` against ibverbs' CQ rules: alone, and as the application's CQ of a relay layer
//! over the fake NIC, where the application must see what it sees on the NIC's own CQ.

use super::*;
use crate::testing::fake_nic::{FakeNet, Stop};
use crate::*;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

fn wc(id: u64) -> WorkCompletion {
    WorkCompletion {
        wr_id: id,
        status: WcStatus::Success,
        opcode: WcOpcode::Send,
        byte_len: 0,
        imm: None,
        qp_num: 1,
        src_host: 0,
        src_qp: 0,
    }
}

fn ids(out: &[WorkCompletion]) -> Vec<u64> {
    out.iter().map(|w| w.wr_id).collect()
}

#[test]
fn an_unarmed_cq_queues_without_news() {
    let mut q = VirtualCq::new();
    assert!(!q.push(wc(1)));
    assert!(!q.event_due());
    assert!(!q.take_event(false));
    q.arm();
    assert!(
        !q.take_event(false),
        "queued before the arming: no notification"
    );
    let mut out = Vec::new();
    assert_eq!(q.poll(8, &mut out), 1);
    assert_eq!(ids(&out), vec![1]);
}

#[test]
fn an_armed_cq_announces_once_until_armed_again() {
    let mut q = VirtualCq::new();
    q.arm();
    assert!(q.push(wc(1)), "first news of an armed CQ asks for a wake");
    assert!(!q.push(wc(2)), "the second rides on the same wake");
    assert!(q.event_due());
    assert!(q.take_event(false));
    assert!(!q.is_armed());
    assert!(!q.take_event(false), "one notification per arming");
    assert!(!q.push(wc(3)));
    assert!(!q.take_event(true), "disarmed: not even news announces");
    assert_eq!(q.len(), 3);
}

#[test]
fn arming_for_new_forgets_older_news_and_arm_keeps_it() {
    let mut q = VirtualCq::new();
    q.push(wc(1));
    q.mark_fresh();
    let mut strict = q.clone();
    q.arm();
    assert!(q.take_event(false), "arm keeps news marked in a verb call");
    strict.arm_for_new();
    assert!(
        !strict.take_event(false),
        "arm_for_new: only what comes after"
    );
    strict.push(wc(2));
    assert!(strict.take_event(false));
}

#[test]
fn polling_empty_or_retaining_nothing_consumes_the_news() {
    let mut q = VirtualCq::new();
    q.arm();
    q.push(wc(1));
    q.push(wc(2));
    let mut out = Vec::new();
    assert_eq!(q.poll(1, &mut out), 1);
    assert!(q.event_due(), "one left: still news");
    assert_eq!(q.poll(8, &mut out), 1);
    assert_eq!(ids(&out), vec![1, 2]);
    assert!(!q.event_due(), "polled empty");
    q.push(wc(3));
    q.retain(|w| w.wr_id != 3);
    assert!(!q.event_due() && q.is_empty());
    assert!(!q.take_event(true), "nothing to announce");
    assert!(q.is_armed(), "the arming survives");
}

#[test]
fn disarm_drops_the_pending_notification() {
    let mut q = VirtualCq::new();
    q.arm();
    q.push(wc(1));
    q.disarm();
    assert!(!q.event_due());
    assert!(!q.take_event(true));
}

/// A layer that hands the application its own virtual CQs in place of the NIC's: each
/// completion from below goes through a `VirtualCq`, the CQ below stays armed (poll, arm,
/// poll again) and the application's arming is kept by the virtual CQ alone.
#[derive(Default)]
struct Relay {
    cqs: BTreeMap<CqId, VirtualCq>,
}

impl Middleware for Relay {
    fn name(&self) -> &'static str {
        "relay"
    }

    fn create_cq(&mut self, below: &mut dyn Verbs, depth: u32) -> Result<CqId, VerbsError> {
        let cq = below.create_cq(depth)?;
        below.req_notify_cq(cq)?;
        self.cqs.insert(cq, VirtualCq::new());
        Ok(cq)
    }

    fn req_notify_cq(&mut self, _below: &mut dyn Verbs, cq: CqId) -> Result<(), VerbsError> {
        self.cqs
            .get_mut(&cq)
            .ok_or(VerbsError::NoSuchCq(cq))?
            .arm_for_new();
        Ok(())
    }

    fn poll_cq(
        &mut self,
        _below: &mut dyn Verbs,
        cq: CqId,
        max: usize,
        out: &mut Vec<WorkCompletion>,
    ) -> usize {
        self.cqs.get_mut(&cq).map_or(0, |q| q.poll(max, out))
    }

    fn on_event(&mut self, below: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        match event {
            Event::Completion(cq) if self.cqs.contains_key(&cq) => {
                let mut raw = Vec::new();
                poll_and_rearm(below, cq, &mut raw).expect("the CQ exists");
                let q = self.cqs.get_mut(&cq).expect("checked");
                let news = !raw.is_empty();
                q.extend(raw);
                if q.take_event(news) {
                    up.push(event);
                }
            }
            e => up.push(e),
        }
    }
}

const A: u32 = 1;
const B: u32 = 2;
const BUF: u64 = 0x10_000;

/// An application that only records the events it is given (what passed the relay).
struct Recorder(Rc<RefCell<Vec<Event>>>);

impl App for Recorder {
    fn start(&mut self, _: &mut dyn Verbs) {}
    fn on_event(&mut self, _: &mut dyn Verbs, e: Event) {
        self.0.borrow_mut().push(e);
    }
    fn is_done(&self) -> bool {
        true
    }
}

type Seen = Rc<RefCell<Vec<Event>>>;

/// Host A's tenant (a [`Recorder`]) behind a `Relay`, host B's plain; one connected RC pair.
fn relayed_pair() -> (
    FakeNet,
    TenantId,
    CqId,
    QpNum,
    MemoryRegion,
    MemoryRegion,
    Seen,
) {
    let mut net = FakeNet::new(2);
    let seen = Seen::default();
    let app = Box::new(Recorder(seen.clone()));
    let ta = net.add_tenant(A, app, vec![Box::new(Relay::default())]);
    let tb = net.add_tenant(B, Box::new(Idle), vec![]);
    let (cq, qa, ma) = net.call_as(A, ta, |v| {
        let cq = v.create_cq(64).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        (cq, qp, v.reg_mr(BUF, 4096, Access::ALL).unwrap())
    });
    let (qb, mb) = net.call_as(B, tb, |v| {
        let cq = v.create_cq(64).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        (qp, v.reg_mr(BUF, 4096, Access::ALL).unwrap())
    });
    let remote = |host, qpn| RemoteQp {
        host,
        qpn,
        udp_sport: None,
    };
    net.call_as(A, ta, |v| v.connect_qp(qa, remote(B, qb)))
        .unwrap();
    net.call_as(B, tb, |v| v.connect_qp(qb, remote(A, qa)))
        .unwrap();
    (net, ta, cq, qa, ma, mb, seen)
}

fn write(net: &mut FakeNet, t: TenantId, qp: QpNum, id: u64, ma: &MemoryRegion, mb: &MemoryRegion) {
    let mut wr = SendWr::new(
        id,
        SendOp::Write,
        vec![Sge {
            addr: ma.addr,
            length: 8,
            lkey: ma.lkey,
        }],
    );
    wr.remote_addr = mb.addr;
    wr.rkey = mb.rkey;
    net.call_as(A, t, |v| v.post_send(qp, wr)).unwrap();
}

fn notifications(seen: &Seen) -> usize {
    seen.borrow()
        .iter()
        .filter(|e| matches!(e, Event::Completion(_)))
        .count()
}

/// The fake NIC's own rule (`an_armed_cq_notifies_once_then_disarms`), seen through the relay.
#[test]
fn through_a_relay_the_application_sees_ibverbs_cq_rules() {
    let (mut net, t, cq, qp, ma, mb, seen) = relayed_pair();
    // Unarmed: the completion is queued, nothing is announced.
    write(&mut net, t, qp, 1, &ma, &mb);
    assert_eq!(net.run(), Stop::Idle);
    assert_eq!(notifications(&seen), 0);
    // Armed with one queued: still nothing until the next completion.
    net.call_as(A, t, |v| v.req_notify_cq(cq)).unwrap();
    net.run();
    assert_eq!(notifications(&seen), 0);
    // Two more while armed: one notification covers both, and it disarms.
    write(&mut net, t, qp, 2, &ma, &mb);
    write(&mut net, t, qp, 3, &ma, &mb);
    net.run();
    assert_eq!(notifications(&seen), 1);
    write(&mut net, t, qp, 4, &ma, &mb);
    net.run();
    assert_eq!(notifications(&seen), 1, "disarmed by the notification");
    let mut out = Vec::new();
    net.call_as(A, t, |v| v.poll_cq(cq, 16, &mut out));
    assert_eq!(ids(&out), vec![1, 2, 3, 4], "every completion, in order");
    // Armed after polling empty: the next completion notifies.
    net.call_as(A, t, |v| v.req_notify_cq(cq)).unwrap();
    write(&mut net, t, qp, 5, &ma, &mb);
    net.run();
    assert_eq!(notifications(&seen), 2);
}
