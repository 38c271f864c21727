//! The QP hijacker: names other tenants' QP numbers in every place the verbs accept one. For
//! each of the victim's connections it
//! - connects QPs of its own to the victim's QP number (server end) and, over each, posts one
//!   SEND, one WRITE and one READ of `size` bytes with the victim's learned key and address
//!   (each on its own QP: a refused one puts its QP in Error). A READ of at least PeRF's
//!   `large_msg` is what PeRF converts into a request its holder serves, so this also names the
//!   victim's QP to a PeRF agent;
//! - where the victim's QP is on its own host, calls post_send, post_recv, query_qp, modify_qp
//!   (to Error) and destroy_qp on the victim's QP numbers (both ends'), each of which must be
//!   refused as "no such QP".
//!
//! On an ibverbs NIC the victim's QP is connected to its own peer only: the hijacker's packets
//! are not its peer's (its requests are NAKed or dropped, and its QPs time out) and nothing is
//! posted on the victim's QP.

use super::{AttackEnds, Tally, Victim, GIVE_UP};
use crate::{sges, SharedMeter, CONNECT};
use braid_verbs::rendezvous::Endpoint;
use braid_verbs::*;

/// `kind = "qp_hijacker"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpHijacker {
    pub size: u64,
    /// When to strike (picoseconds; at least two ticks after start, once the victims connected).
    pub start: u64,
    pub patience: u64,
    /// The QPs' retry count (a hijacked connection's requests time out after (retry + 1)
    /// transport timeouts).
    pub retry_cnt: u8,
}

/// The QPs' retry count: 7, the most ibverbs' 3-bit `retry_cnt` holds.
const RETRY_CNT: u8 = 7;

crate::spec::app_config! {
    /// `kind = "qp_hijacker"`'s keys.
    pub struct QpHijackerConfig {
        /// The index of the `[[apps]]` entry whose published endpoints (QP numbers, keys,
        /// addresses) it uses.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub victim: Option<u32>,
    }
}

impl crate::spec::KindConfig for QpHijackerConfig {
    fn keys() -> &'static [&'static str] {
        &["victim"]
    }
    fn attacker() -> bool {
        true
    }
    fn common(&self) -> crate::AppCommon {
        self.common_keys()
    }
    fn factory(
        &self,
        _kind: crate::AppKind,
    ) -> Result<Box<dyn crate::AppFactory>, crate::KeyError> {
        if self.victim.is_none() {
            return Err(crate::KeyError::new(
                "victim",
                "a qp_hijacker needs the index of the [[apps]] entry it attacks (e.g. victim = 0)",
            ));
        }
        let k = self.common_keys();
        Ok(Box::new(QpHijacker {
            size: k.size,
            start: k.start,
            patience: super::patience(&k),
            retry_cnt: RETRY_CNT,
        }))
    }
    fn victim(&self) -> Option<u32> {
        self.victim
    }
}

impl crate::AppFactory for QpHijacker {
    fn build(&self, e: crate::AppEnds) -> (Box<dyn App>, Box<dyn App>) {
        QpHijacker::build(self, e.into())
    }
}

impl QpHijacker {
    /// Nothing on the server side (an idle tenant), the hijacker on the client side.
    pub fn build(&self, e: AttackEnds) -> (Box<dyn App>, Box<dyn App>) {
        let h = Hijacker {
            cfg: *self,
            flow: e.flow,
            meter: e.meter,
            rdv: e.rdv,
            base: e.client_base,
            victim: e.victim,
            lkey: 0,
            cq: 0,
            tally: Tally::default(),
            done: false,
        };
        (Box::new(Idle), Box::new(h))
    }
}

struct Hijacker {
    cfg: QpHijacker,
    flow: u32,
    meter: SharedMeter,
    rdv: crate::Rendezvous,
    base: u64,
    victim: Option<Victim>,
    lkey: u32,
    cq: CqId,
    tally: Tally,
    done: bool,
}

impl Hijacker {
    fn verb<T>(&mut self, r: Result<T, VerbsError>) {
        self.tally.tries += 1;
        match r {
            Ok(_) => self.tally.succeeded += 1,
            Err(_) => self.tally.refused += 1,
        }
    }

    /// Local verbs on a QP number of the victim's on this host.
    fn local_verbs(&mut self, v: &mut dyn Verbs, qpn: QpNum) {
        let wr = SendWr::new(u64::MAX, SendOp::Send, sges(self.base, 8, self.lkey));
        let r = v.post_send(qpn, wr);
        self.verb(r);
        let r = v.post_recv(
            qpn,
            RecvWr {
                wr_id: u64::MAX,
                sg_list: sges(self.base, 8, self.lkey),
            },
        );
        self.verb(r);
        let r = v.query_qp(qpn);
        self.verb(r);
        let r = v.modify_qp(qpn, QpModify::Error);
        self.verb(r);
        let r = v.destroy_qp(qpn);
        self.verb(r);
    }

    /// Three QPs connected to the victim's `ep`: a SEND, a WRITE and a READ with its key.
    fn remote(&mut self, v: &mut dyn Verbs, ep: &Endpoint) {
        let len = self.cfg.size.max(1);
        for (k, op) in [SendOp::Send, SendOp::Write, SendOp::Read]
            .into_iter()
            .enumerate()
        {
            let init = QpInit {
                retry_cnt: self.cfg.retry_cnt,
                ..QpInit::rc(self.cq)
            };
            let Ok(qp) = v.create_qp(&init) else {
                self.verb(Err::<(), _>(VerbsError::QueueFull));
                continue;
            };
            if k == 0 {
                self.meter
                    .borrow_mut()
                    .sending_qp(self.flow, v.local_host(), qp);
            }
            self.tally.tries += 1;
            if v.connect_qp(qp, ep.remote()).is_err() {
                self.tally.refused += 1;
                continue;
            }
            let mut wr = SendWr::new(k as u64, op, sges(self.base, len, self.lkey));
            wr.remote_addr = ep.addr;
            wr.rkey = ep.rkey;
            if v.post_send(qp, wr).is_err() {
                self.tally.refused += 1;
            }
        }
    }

    fn report(&mut self, v: &mut dyn Verbs) {
        let now = v.now();
        self.tally
            .report_once(&mut self.done, &self.meter, self.flow, now);
    }
}

impl App for Hijacker {
    fn start(&mut self, v: &mut dyn Verbs) {
        let len = self.cfg.size.max(1);
        let Some((cq, mr)) = super::own_buffer(v, self.base, len) else {
            return;
        };
        (self.cq, self.lkey) = (cq, mr.lkey);
        // After every application connected (theirs at their start time, one tick later).
        v.set_timer((v.now() + 2).max(self.cfg.start), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(CONNECT) => {
                self.meter.borrow_mut().started(self.flow, v.now());
                let me = v.local_host();
                if let Some(vi) = self.victim {
                    for i in 0..vi.qps {
                        let (server, client) = vi.endpoints(&self.rdv, i);
                        for ep in [server, client].into_iter().flatten() {
                            if ep.host == me {
                                self.local_verbs(v, ep.qpn);
                            }
                        }
                        if let Some(s) = server {
                            self.remote(v, &s);
                        }
                    }
                }
                v.set_timer(v.now() + self.cfg.patience, GIVE_UP);
                self.report(v);
            }
            Event::Timer(GIVE_UP) => {
                self.tally.give_up();
                self.report(v);
            }
            Event::Completion(cq) => {
                self.tally.count_completions(v, cq);
                self.report(v);
            }
            _ => {}
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }
}
