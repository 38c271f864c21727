//! A forger against Justitia's pacer link (issue 26's leftover: the agents' links did not
//! authenticate the sender). B_App (write_bw, 1 MiB) runs alone from host 0 to host 1 under
//! Justitia: no latency tenant anywhere, so the pacer leaves it the line rate. A tenant of host 1
//! (the pacer link's peer host, so the NIC's source-address check lets its packets through: the
//! BTH names no source QP) connects a QP of its own to host 0's pacer QP and sends INFO
//! messages claiming 65535 latency tenants on host 1. With every QP's initial PSN known
//! (`nic.initial_psn = 0`, the ReDMArk setting) its SENDs walk up to the PSN the pacer QP
//! expects and are executed. Acted on, the claim makes host 0's pacer control B_App (chunks,
//! a capacity with a floor of line / 65536); bound to its peer (`PeerLink::from_peer`), the
//! link drops them and counts them in `link_errors`.
//!
//! Fails with the check removed (`from_peer` returning true): B_App's goodput falls.

mod common;
use braid_verbs::{App, CqId, Event, QpInit, QpNum, RemoteQp, SendOp, SendWr, Verbs};
use common::*;
use serde_json::{json, Value};
use std::cell::Cell;
use std::rc::Rc;

/// What the forger claims: 0 bandwidth tenants, 65535 latency tenants (INFO's immediate).
const FORGED_INFO: u32 = 0xFFFF;
const STRIKE: u64 = 1_000_000_000; // 1 ms
const T_STRIKE: u64 = 1;

/// Sends `n` forged INFO messages to `target` (host address, QP number) at `STRIKE`.
struct Forger {
    target: Rc<Cell<Option<(u32, QpNum)>>>,
    n: u64,
    cq: CqId,
    qp: QpNum,
}

impl App for Forger {
    fn start(&mut self, v: &mut dyn Verbs) {
        self.cq = v.create_cq(4096).unwrap();
        self.qp = v
            .create_qp(&QpInit {
                max_send_wr: 1024,
                ..QpInit::rc(self.cq)
            })
            .unwrap();
        v.set_timer(STRIKE, T_STRIKE);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, e: Event) {
        if e != Event::Timer(T_STRIKE) {
            return;
        }
        let (host, qpn) = self.target.get().expect("the test names the pacer QP");
        v.connect_qp(
            self.qp,
            RemoteQp {
                host,
                qpn,
                udp_sport: None,
            },
        )
        .unwrap();
        for i in 0..self.n {
            let wr = SendWr::new(i, SendOp::SendWithImm(FORGED_INFO), vec![]);
            v.post_send(self.qp, wr).unwrap();
        }
    }

    fn is_done(&self) -> bool {
        true
    }
}

fn scenario() -> Value {
    json!({
        "duration": "6ms",
        "nic": {"mtu": 4096, "tx_prefetch": "64KB", "max_qp_msg_rate": 0, "max_msg_rate": 0,
                "initial_psn": 0},
        "topology": {"kind": "edges", "nodes": ["h0", "h1", "sw"], "switches": ["sw"],
            "links": [{"a": "h0", "b": "sw", "rate": "100Gbps", "delay": "400ns"},
                      {"a": "h1", "b": "sw", "rate": "100Gbps", "delay": "400ns"}]},
        "middleware": {"default": ["justitia"]},
        "apps": [{"kind": "write_bw", "src": 0, "dst": 1, "size": "1MiB",
                  "duration": "4ms", "start": "200us", "tx_depth": 16}],
    })
}

/// B_App's goodput (Gbit/s) and host 0's pacer's `link_errors`, with or without the forger.
fn run_with(forger: bool) -> (f64, f64) {
    let mut sim = build(&scenario());
    let target = Rc::new(Cell::new(None));
    if forger {
        let f = Forger {
            target: target.clone(),
            n: 64,
            cq: 0,
            qp: 0,
        };
        sim.add_app(1, Box::new(f), vec![]).unwrap();
    }
    sim.advance(STRIKE - 100_000_000);
    // The pacer link's QP: host 0's agent (tenant 0) has no other.
    let agent_qps: Vec<QpNum> = sim.world().hosts[0]
        .owners
        .qp
        .iter()
        .enumerate()
        .filter(|(_, &t)| t == braid_verbs::AGENT)
        .map(|(q, _)| q as QpNum)
        .collect();
    assert_eq!(agent_qps.len(), 1, "one pacer link: {agent_qps:?}");
    target.set(Some((sim.host_address(0), agent_qps[0])));
    sim.run();
    let r = sim.results();
    let b = tenant_value(&r, "apps[0].client", "goodput_gbps");
    let labels = match r.tables["tenants"].get("label").unwrap() {
        braid_sim::Column::Str(v) => v.clone(),
        _ => unreachable!(),
    };
    let hosts = ints(&r.tables["tenants"], "host");
    let agent = (0..labels.len())
        .find(|&i| labels[i] == "agent" && hosts[i] == 0)
        .expect("host 0's agent row");
    let errors = numbers(&r.tables["tenants"], "justitia_link_errors")[agent];
    (b, errors)
}

#[test]
fn a_forged_pacer_message_from_the_peers_host_is_dropped_and_counted() {
    let (alone, clean) = run_with(false);
    let (attacked, errors) = run_with(true);
    assert_eq!(clean, 0.0);
    assert!(
        errors >= 1.0,
        "the forged INFO reached the pacer QP: {errors}"
    );
    assert!(
        attacked >= 0.97 * alone,
        "B_App {attacked:.2} Gbit/s under the forger against {alone:.2} alone"
    );
}
