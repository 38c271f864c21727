//! The transport seam: a transport defined outside the simulator (here, RC that sprays its
//! packets over four UDP source ports, the way a multipath transport picks virtual paths) runs
//! with no change to switches or the engine, and ACKs echo what it needs.

mod common;
use braid_engine::Time;
use braid_sim::transport::rc::RcTransport;
use braid_sim::transport::*;
use common::*;
use serde_json::json;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

#[derive(Debug)]
struct Spray {
    inner: RcTransport,
    base: u16,
    echoed: Rc<RefCell<BTreeSet<u16>>>,
}

impl Transport for Spray {
    fn set_sport(&mut self, s: u16) {
        self.inner.set_sport(s)
    }
    fn plan(&mut self, now: Time, next_new: u32, have_new: bool) -> Plan {
        match self.inner.plan(now, next_new, have_new) {
            // One of four source ports per PSN: ECMP maps each to a path.
            Plan::Send { psn, .. } => Plan::Send {
                psn,
                sport: self.base + (psn % 4) as u16,
            },
            other => other,
        }
    }
    fn response_gate(&self) -> Time {
        self.inner.response_gate()
    }
    fn on_sent(
        &mut self,
        now: Time,
        psn: u32,
        npsn: u32,
        wire: u32,
        reliable: bool,
        fx: &mut TxFx,
    ) {
        self.inner.on_sent(now, psn, npsn, wire, reliable, fx)
    }
    fn on_response_sent(&mut self, now: Time, wire: u32) {
        self.inner.on_response_sent(now, wire)
    }
    fn on_feedback(&mut self, now: Time, fb: Feedback, fx: &mut TxFx) {
        if let Feedback::Ack {
            echo_sport, sack, ..
        } = fb
        {
            assert!(
                sack.is_some(),
                "per-packet ACKs carry the PSN they acknowledge"
            );
            self.echoed.borrow_mut().insert(echo_sport);
        }
        self.inner.on_feedback(now, fb, fx)
    }
    fn on_timer(
        &mut self,
        now: Time,
        kind: TimerKind,
        gen: u32,
        first_missing: u32,
        fx: &mut TxFx,
    ) {
        self.inner.on_timer(now, kind, gen, first_missing, fx)
    }
    fn acked(&self) -> u32 {
        self.inner.acked()
    }
    fn resend_from(&mut self, now: Time, psn: u32, fx: &mut TxFx) {
        self.inner.resend_from(now, psn, fx)
    }
    fn on_data(&mut self, now: Time, d: DataInfo, out: &mut Vec<Reply>) -> RxClass {
        self.inner.on_data(now, d, out)
    }
    fn on_accepted(&mut self, now: Time, d: DataInfo, out: &mut Vec<Reply>) {
        self.inner.on_accepted(now, d, out)
    }
    fn on_read_request(&mut self, now: Time, psn: u32, npsn: u32, out: &mut Vec<Reply>) -> RxClass {
        self.inner.on_read_request(now, psn, npsn, out)
    }
    fn expected(&self) -> u32 {
        self.inner.expected()
    }
}

#[test]
fn a_custom_transport_spreads_one_connection_over_all_paths() {
    // Two ToRs, four equal spines, one 2 MB flow, no congestion control: equal path delays keep
    // the sprayed packets in order, so go-back-N's receiver is happy.
    let s = json!({
        "duration": "10ms",
        "topology": {"kind": "two-tor", "hosts_per_tor": 1, "paths": 4,
                     "host_link": link("100Gbps", "1us"), "fabric_link": link("100Gbps", "1us")},
        "transport": {"kind": "none"},
        "nic": {"data_check": true},
        "traffic": flows(&[(0, 1, "2MB")]),
    });
    let mut sim = build(&s);
    let echoed = Rc::new(RefCell::new(BTreeSet::new()));
    let e2 = echoed.clone();
    sim.set_transport_factory(
        None,
        Rc::new(move |ctx: &TransportCtx| -> Box<dyn Transport> {
            Box::new(Spray {
                inner: RcTransport::new(ctx.rc.clone()),
                base: 50000,
                echoed: e2.clone(),
            })
        }),
    );
    sim.run();
    sim.verify_delivery().unwrap();
    let w = sim.world();
    // Every spine carried a quarter of the data packets towards tor1.
    let tor1 = w.nodes.iter().position(|n| n.name == "tor1").unwrap() as u32;
    let mut per_spine: Vec<(String, u64)> = vec![];
    for n in w.nodes.iter().filter(|n| n.name.starts_with("spine")) {
        let p = w
            .node_ports(n.id)
            .iter()
            .find(|p| p.peer_node == tor1)
            .unwrap();
        per_spine.push((n.name.clone(), p.tx_pkts));
    }
    let used: Vec<_> = per_spine.iter().filter(|(_, c)| *c > 0).collect();
    assert!(
        used.len() >= 3,
        "spraying over 4 source ports should use several spines: {per_spine:?}"
    );
    assert_eq!(
        per_spine.iter().map(|x| x.1).sum::<u64>(),
        2000,
        "2 MB = 2000 packets, none lost"
    );
    // The ACKs echoed all four source ports back to the sender.
    assert_eq!(*echoed.borrow(), (50000..50004).collect::<BTreeSet<u16>>());
}
