//! The rkey thief: one-sided READs and WRITEs over its own connections (to an accomplice it runs
//! on the victim's host) that name keys and addresses it does not own. Attempt `i` uses QP `i`
//! (a refused access puts the QP in Error, so each attempt gets a fresh one), cycling through:
//! the victim's learned rkey and address (READ, WRITE), guessed rkeys next to the accomplice's
//! own at guessed application buffers (READ, WRITE), and the accomplice's own key past the end
//! of its region (READ, WRITE). Every access is a probe of [`PROBE`] bytes (or `size`, if
//! smaller): small enough to fit inside any victim's region, so that only the key's owner can
//! refuse it. On an ibverbs NIC every one of them completes
//! RemoteAccessError (the key's region is not in the responder QP's protection domain, or the
//! range is out of bounds), and the victim's bytes and QPs are untouched.

use super::{AttackEnds, Tally, Victim, GIVE_UP};
use crate::{sges, SharedMeter, CONNECT};
use braid_verbs::rendezvous::{connect_all, Endpoint, Side};
use braid_verbs::*;

/// `kind = "rkey_thief"`: `attempts` one-WR attempts of `size` bytes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RkeyThief {
    pub attempts: u32,
    pub size: u64,
    /// When to strike (picoseconds; at least one tick after start).
    pub start: u64,
    /// When to give up on attempts that never complete (picoseconds after connecting).
    pub patience: u64,
}

crate::spec::app_config! {
    /// `kind = "rkey_thief"`'s keys: `qps` attempts of `size` bytes each.
    pub struct RkeyThiefConfig {
        /// The index of the `[[apps]]` entry whose published endpoints (QP numbers, keys,
        /// addresses) it uses.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub victim: Option<u32>,
    }
}

impl crate::spec::KindConfig for RkeyThiefConfig {
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
        let k = self.common_keys();
        Ok(Box::new(RkeyThief {
            attempts: k.qps,
            size: k.size,
            start: k.start,
            patience: super::patience(&k),
        }))
    }
    fn victim(&self) -> Option<u32> {
        self.victim
    }
}

impl crate::AppFactory for RkeyThief {
    fn build(&self, e: crate::AppEnds) -> (Box<dyn App>, Box<dyn App>) {
        RkeyThief::build(self, e.into())
    }
}

/// Bytes per access.
pub const PROBE: u64 = 16;

/// The byte a thief's WRITE carries (so that a landed WRITE is visible in tracked memory).
pub const THIEF_BYTE: u8 = 0xEE;

impl RkeyThief {
    /// The accomplice (on the victim's host: its QPs are where the thief's accesses arrive)
    /// and the thief.
    pub fn build(&self, e: AttackEnds) -> (Box<dyn App>, Box<dyn App>) {
        let n = self.attempts.max(1);
        let accomplice = Accomplice {
            n,
            size: self.size.max(1),
            conn0: e.conn0,
            rdv: e.rdv.clone(),
            base: e.server_base,
            start: self.start,
            qps: Vec::new(),
        };
        let thief = Thief {
            cfg: *self,
            flow: e.flow,
            conn0: e.conn0,
            meter: e.meter,
            rdv: e.rdv,
            base: e.client_base,
            victim: e.victim,
            cq: 0,
            lkey: 0,
            qps: Vec::new(),
            tally: Tally::default(),
            done: false,
        };
        (Box::new(accomplice), Box::new(thief))
    }
}

/// Passive: one QP per attempt and one region, published as the server side.
struct Accomplice {
    n: u32,
    size: u64,
    conn0: u32,
    rdv: crate::Rendezvous,
    base: u64,
    start: u64,
    qps: Vec<QpNum>,
}

impl App for Accomplice {
    fn start(&mut self, v: &mut dyn Verbs) {
        let Ok(cq) = v.create_cq(1 << 12) else { return };
        let Ok(mr) = v.reg_mr(self.base, self.size, Access::ALL) else {
            return;
        };
        for i in 0..self.n {
            let Ok(qp) = v.create_qp(&QpInit::rc(cq)) else {
                return;
            };
            self.qps.push(qp);
            self.rdv.borrow_mut().publish(
                (self.conn0 + i) as u64,
                Side::Server,
                Endpoint {
                    host: v.local_host(),
                    qpn: qp,
                    addr: mr.addr,
                    rkey: mr.rkey,
                },
            );
        }
        v.set_timer(v.now().max(self.start), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if ev == Event::Timer(CONNECT) {
            let _ = connect_all(v, &self.rdv, self.conn0 as u64, Side::Server, &self.qps);
        }
    }

    fn is_done(&self) -> bool {
        true
    }
}

struct Thief {
    cfg: RkeyThief,
    flow: u32,
    conn0: u32,
    meter: SharedMeter,
    rdv: crate::Rendezvous,
    base: u64,
    victim: Option<Victim>,
    cq: CqId,
    lkey: u32,
    qps: Vec<QpNum>,
    tally: Tally,
    done: bool,
}

impl Thief {
    /// Attempt `i`'s target: (remote address, rkey, is a WRITE).
    fn target(&self, i: u32, own: &Endpoint) -> (u64, u32, bool) {
        let write = i % 2 == 1;
        let round = (i / 6) as u64;
        let stride = 1u64 << 40;
        match (i / 2) % 3 {
            // The victim's learned key and address (its connection `round` of its own).
            0 => match self
                .victim
                .and_then(|vi| vi.endpoints(&self.rdv, (round as u32) % vi.qps.max(1)).0)
            {
                Some(ep) => (ep.addr, ep.rkey, write),
                // No victim named: guess below.
                None => (own.addr + stride, own.rkey.wrapping_add(1), write),
            },
            // Guessed: keys handed out next to our own, at neighbouring application buffers.
            1 => {
                let k = round as u32 + 1;
                let key = if round.is_multiple_of(2) {
                    own.rkey.wrapping_sub(k)
                } else {
                    own.rkey.wrapping_add(k)
                };
                let addr = (own.addr & !(stride - 1)).wrapping_sub(stride * (round + 1));
                (addr, key, write)
            }
            // Our own key, out of bounds: one region-length past its end.
            _ => (
                own.addr + self.cfg.size.max(1) * (round + 1),
                own.rkey,
                write,
            ),
        }
    }

    fn report(&mut self, v: &mut dyn Verbs) {
        let now = v.now();
        self.tally
            .report_once(&mut self.done, &self.meter, self.flow, now);
    }
}

impl App for Thief {
    fn start(&mut self, v: &mut dyn Verbs) {
        let n = self.cfg.attempts.max(1);
        let size = self.cfg.size.max(1);
        let Some((cq, mr)) = super::own_buffer(v, self.base, size) else {
            return;
        };
        (self.cq, self.lkey) = (cq, mr.lkey);
        for i in 0..n {
            let Ok(qp) = v.create_qp(&QpInit::rc(cq)) else {
                return;
            };
            self.qps.push(qp);
            self.rdv.borrow_mut().publish(
                (self.conn0 + i) as u64,
                Side::Client,
                Endpoint {
                    host: v.local_host(),
                    qpn: qp,
                    addr: mr.addr,
                    rkey: mr.rkey,
                },
            );
            self.meter
                .borrow_mut()
                .sending_qp(self.flow, v.local_host(), qp);
        }
        // One tick after the accomplice connected.
        v.set_timer((v.now() + 1).max(self.cfg.start), CONNECT);
    }

    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(CONNECT) => {
                let Ok(peers) =
                    connect_all(v, &self.rdv, self.conn0 as u64, Side::Client, &self.qps)
                else {
                    return;
                };
                self.meter.borrow_mut().started(self.flow, v.now());
                for (i, &qp) in self.qps.clone().iter().enumerate() {
                    let (addr, rkey, write) = self.target(i as u32, &peers[i]);
                    let op = if write { SendOp::Write } else { SendOp::Read };
                    let mut wr = SendWr::new(
                        i as u64,
                        op,
                        sges(self.base, self.cfg.size.clamp(1, PROBE), self.lkey),
                    );
                    wr.remote_addr = addr;
                    wr.rkey = rkey;
                    self.tally.tries += 1;
                    if v.post_send(qp, wr).is_err() {
                        self.tally.refused += 1;
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
