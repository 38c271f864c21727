//! The attackers over the fake NIC, which enforces ownership as ibverbs' protection domains do
//! (one PD per tenant): every attempt is refused, the victim's bytes and QPs are untouched.

use super::*;
use crate::{Meter, SharedMeter, CONNECT};
use braid_verbs::rendezvous::{board, connect_all, Endpoint, Side};
use braid_verbs::testing::FakeNet;
use braid_verbs::*;
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Default)]
struct Log {
    tally: Option<Tally>,
    finished: bool,
}
impl Meter for Log {
    fn sending_qp(&mut self, _: u32, _: u32, _: QpNum) {}
    fn receiving_qp(&mut self, _: u32, _: u32, _: QpNum) {}
    fn landing_at(&mut self, _: u32, _: u32, _: u64) {}
    fn started(&mut self, _: u32, _: u64) {}
    fn progress(&mut self, _: u32, _: u64) {}
    fn latency(&mut self, _: u32, _: u64) {}
    fn finished(&mut self, _: u32, _: u64) {
        self.finished = true;
    }
    fn attack(&mut self, _: u32, t: Tally) {
        self.tally = Some(t);
    }
}

const VICTIM_BASE: u64 = 1 << 40;
const VICTIM_LEN: u64 = 64 << 10;

/// One end of the victim's connection: a tracked region holding a pattern (the server's is what
/// the thief aims at), a QP published on the board as connection 0.
struct VictimEnd {
    side: Side,
    rdv: crate::Rendezvous,
    qp: Rc<RefCell<Option<QpNum>>>,
}

fn pattern() -> Vec<u8> {
    (0..VICTIM_LEN).map(|i| (i % 251) as u8 + 1).collect()
}

impl App for VictimEnd {
    fn start(&mut self, v: &mut dyn Verbs) {
        let cq = v.create_cq(64).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        let mr = v
            .reg_mr(VICTIM_BASE, VICTIM_LEN, Access::ALL.tracked())
            .unwrap();
        v.write_local(mr.addr, &pattern()).unwrap();
        self.rdv.borrow_mut().publish(
            0,
            self.side,
            Endpoint {
                host: v.local_host(),
                qpn: qp,
                addr: mr.addr,
                rkey: mr.rkey,
            },
        );
        *self.qp.borrow_mut() = Some(qp);
        v.set_timer(v.now(), CONNECT);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if ev == Event::Timer(CONNECT) {
            let qp = self.qp.borrow().unwrap();
            connect_all(v, &self.rdv, 0, self.side, &[qp]).unwrap();
        }
    }
    fn is_done(&self) -> bool {
        true
    }
}

/// (host, tenant, QP once created) of one of the victim's ends.
type VictimSide = (u32, TenantId, Rc<RefCell<Option<QpNum>>>);

struct Run {
    net: FakeNet,
    log: Rc<RefCell<Log>>,
    /// The victim's server and client ends.
    victim: [VictimSide; 2],
}

/// The victim's server on host 2 and client on host 1 (connection 0), and the attacker's pair
/// built by `build` (server side on host 2, client side on `attacker_host`, connections 1..).
fn run(attacker_host: u32, build: impl FnOnce(AttackEnds) -> (Box<dyn App>, Box<dyn App>)) -> Run {
    let log = Rc::new(RefCell::new(Log::default()));
    let meter: SharedMeter = log.clone();
    let rdv = board();
    let mut net = FakeNet::new(2);
    let mut victim = Vec::new();
    for (host, side) in [(2, Side::Server), (1, Side::Client)] {
        let qp = Rc::new(RefCell::new(None));
        let t = net.add_tenant(
            host,
            Box::new(VictimEnd {
                side,
                rdv: rdv.clone(),
                qp: qp.clone(),
            }),
            vec![],
        );
        victim.push((host, t, qp));
    }
    let (server, client) = build(AttackEnds {
        flow: 0,
        conn0: 1,
        meter,
        rdv,
        server_base: 3 << 40,
        client_base: 4 << 40,
        victim: Some(Victim { conn0: 0, qps: 1 }),
    });
    net.add_tenant(2, server, vec![]);
    net.add_tenant(attacker_host, client, vec![]);
    net.run();
    let victim: [_; 2] = victim.try_into().ok().unwrap();
    Run { net, log, victim }
}

/// The victim's bytes are the pattern and its QPs are not in Error.
fn victim_untouched(r: &Run) {
    let (h, t, _) = &r.victim[0];
    assert!(
        r.net.nic(*h).read_mem(*t, VICTIM_BASE, VICTIM_LEN) == pattern(),
        "the victim's bytes changed"
    );
    for (h, _, qp) in &r.victim {
        let qp = qp.borrow().unwrap();
        assert_ne!(r.net.nic(*h).qp_attr(qp).unwrap().state, QpState::Error);
    }
}

#[test]
fn the_rkey_thief_gets_only_errors() {
    let thief = RkeyThief {
        attempts: 12,
        size: 4096,
        start: 0,
        patience: 1_000_000_000_000,
    };
    let r = run(1, |e| thief.build(e));
    let t = r.log.borrow().tally.expect("the thief reported");
    assert_eq!(
        t,
        Tally {
            tries: 12,
            refused: 12,
            succeeded: 0
        }
    );
    victim_untouched(&r);
}

#[test]
fn the_qp_hijacker_gets_only_errors() {
    let h = QpHijacker {
        size: 64 << 10,
        start: 0,
        patience: 1_000_000_000_000,
        retry_cnt: 1,
    };
    // On the victim client's host: it also names the client's QP number to local verbs.
    let r = run(1, |e| h.build(e));
    let t = r.log.borrow().tally.expect("the hijacker reported");
    // 5 local verbs on the client's QP + 3 connected QPs (SEND, WRITE, READ).
    assert_eq!(
        t,
        Tally {
            tries: 8,
            refused: 8,
            succeeded: 0
        }
    );
    victim_untouched(&r);
}

/// The fake NIC models no registration limit: every registration is granted (what the flood
/// measures there), and none reaches the victim.
#[test]
fn the_mr_flood_counts_what_the_nic_grants() {
    let f = MrFlood {
        regions: 1000,
        size: 4096,
    };
    let r = run(2, |e| f.build(e));
    let t = r.log.borrow().tally.expect("the flood reported");
    assert_eq!((t.tries, t.resolved()), (1000, 1000));
    assert_eq!(t.succeeded, 1000, "the fake NIC has no registration limit");
    victim_untouched(&r);
}
