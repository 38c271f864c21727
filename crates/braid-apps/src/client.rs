//! A client's connections and the life of its run, written once for every request/benchmark
//! client (perftest's, kv's, the request/reply engine's): open, connect when every application
//! has started, measure until the iterations or the duration are done, report the end once.

use crate::*;
use braid_verbs::rendezvous::{Endpoint, Side};

/// Where a client's connections live: `n` slots of `size` bytes from `base`, connection ids
/// from `conn0`, the QPs' priority and type, the flow they measure, the access of their MR, and
/// when the client connects (`start`, or now if later).
pub(crate) struct ClientSlots {
    pub n: usize,
    pub size: u64,
    pub base: u64,
    pub priority: Option<u8>,
    pub conn0: u32,
    pub flow: u32,
    pub qp_type: QpType,
    pub access: Access,
    pub start: u64,
}

/// A client's ends: its armed CQ, the lkey of the one MR over its slots, its RC QPs, and its
/// run (no connection failed yet).
pub(crate) struct ClientEnds {
    pub cq: CqId,
    pub lkey: u32,
    pub qps: Vec<QpNum>,
    pub run: ClientRun,
}

/// Opens a client's connections: one CQ (armed), one MR over the slots, one RC QP per slot, each
/// published on the board as connection `conn0 + i` with its slot's address; the first QP is
/// logged as the flow's sending QP. The CONNECT timer is set for `start`.
pub(crate) fn open_client(
    v: &mut dyn Verbs,
    c: ClientSlots,
    log: &SharedMeter,
    rdv: &Rendezvous,
) -> ClientEnds {
    let cq = v.create_cq(1 << 16).expect("create CQ");
    v.req_notify_cq(cq).expect("arm CQ");
    let mr = v
        .reg_mr(c.base, c.size.max(1) * c.n as u64, c.access)
        .expect("register memory");
    let mut qps = Vec::with_capacity(c.n);
    for i in 0..c.n {
        let qp = v
            .create_qp(&QpInit {
                priority: c.priority,
                qp_type: c.qp_type,
                ..QpInit::rc(cq)
            })
            .expect("create QP");
        qps.push(qp);
        if i == 0 {
            log.borrow_mut().sending_qp(c.flow, v.local_host(), qp);
        }
        rdv.borrow_mut().publish(
            (c.conn0 + i as u32) as u64,
            Side::Client,
            Endpoint {
                host: v.local_host(),
                qpn: qp,
                addr: c.base + i as u64 * c.size,
                rkey: mr.rkey,
            },
        );
    }
    v.set_timer(v.now().max(c.start), CONNECT);
    ClientEnds {
        cq,
        lkey: mr.lkey,
        run: ClientRun {
            failed: vec![false; c.n],
            ..ClientRun::default()
        },
        qps,
    }
}

/// What every client tracks of its run: which connections failed, when its `duration` ends,
/// whether it has reported its end.
#[derive(Default)]
pub(crate) struct ClientRun {
    /// By connection: a completion with an error stopped it.
    pub failed: Vec<bool>,
    /// The end of the measurement, if the client runs for a duration.
    pub deadline: Option<u64>,
    done: bool,
}

impl ClientRun {
    /// At the CONNECT timer: connects the client's QPs (connections `conn0 + i`) to their
    /// servers, starts the measurement of `flow` and, for a `duration`, sets a timer at its end
    /// (which checks for the end). Returns the servers' endpoints.
    #[allow(clippy::too_many_arguments)]
    pub fn connect(
        &mut self,
        v: &mut dyn Verbs,
        rdv: &Rendezvous,
        conn0: u32,
        qps: &[QpNum],
        log: &SharedMeter,
        flow: u32,
        duration: Option<u64>,
    ) -> Vec<Endpoint> {
        let now = v.now();
        let remote = lookup_all(v, rdv, conn0, qps);
        log.borrow_mut().started(flow, now);
        self.deadline = duration.map(|d| now + d);
        if let Some(d) = self.deadline {
            v.set_timer(d, CONNECT - 1);
        }
        remote
    }

    /// Whether connection `i` may post at `now`: not failed, and before the deadline.
    pub fn live(&self, i: usize, now: u64) -> bool {
        !self.failed[i] && self.deadline.is_none_or(|d| now < d)
    }

    /// Once the client is `idle` (nothing outstanding, nothing more to post), reports the end, the
    /// first time only, and as finished only if no connection failed (a failed run never
    /// finishes: its flow shows as incomplete).
    pub fn end_if(&mut self, idle: bool, log: &SharedMeter, flow: u32, now: u64) {
        if idle && !self.done {
            self.done = true;
            if !self.failed.iter().any(|&f| f) {
                log.borrow_mut().finished(flow, now);
            }
        }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// What every request/benchmark client (perftest's, kv's, the request/reply engine's) holds and
/// does alike: its spec and place (flow, connection ids, slots' base), its ends once opened, the
/// servers' endpoints once connected, how many it posted per connection against its `target`,
/// and its run. Each client adds its own bookkeeping beside it.
pub(crate) struct Client {
    pub spec: crate::PerfSpec,
    pub flow: u32,
    pub conn0: u32,
    pub log: SharedMeter,
    pub rdv: Rendezvous,
    pub base: u64,
    pub cq: CqId,
    pub lkey: u32,
    pub qps: Vec<QpNum>,
    pub remote: Vec<Endpoint>,
    pub posted: Vec<u64>,
    /// Messages per connection (`spec.messages_per_qp()`).
    pub target: u64,
    pub run: ClientRun,
}

impl Client {
    pub fn new(
        spec: crate::PerfSpec,
        flow: u32,
        conn0: u32,
        log: SharedMeter,
        rdv: Rendezvous,
        base: u64,
    ) -> Self {
        let target = spec.messages_per_qp();
        Client {
            spec,
            flow,
            conn0,
            log,
            rdv,
            base,
            cq: 0,
            lkey: 0,
            qps: vec![],
            remote: vec![],
            posted: vec![],
            target,
            run: ClientRun::default(),
        }
    }

    /// At `start`: opens `spec.qps` connections of `size`-byte slots ([`open_client`]);
    /// returns how many.
    pub fn open(
        &mut self,
        v: &mut dyn Verbs,
        size: u64,
        priority: Option<u8>,
        qp_type: QpType,
        access: Access,
    ) -> usize {
        let n = self.spec.qps as usize;
        let ends = open_client(
            v,
            ClientSlots {
                n,
                size,
                base: self.base,
                priority,
                conn0: self.conn0,
                flow: self.flow,
                qp_type,
                access,
                start: self.spec.start,
            },
            &self.log,
            &self.rdv,
        );
        (self.cq, self.lkey, self.qps, self.run) = (ends.cq, ends.lkey, ends.qps, ends.run);
        self.posted = vec![0; n];
        n
    }

    /// At the CONNECT timer: connects to the servers ([`ClientRun::connect`]).
    pub fn connect(&mut self, v: &mut dyn Verbs) {
        self.remote = self.run.connect(
            v,
            &self.rdv,
            self.conn0,
            &self.qps,
            &self.log,
            self.flow,
            self.spec.duration,
        );
    }

    /// Whether connection `i` may post another message at `now`.
    pub fn may_post(&self, i: usize, now: u64) -> bool {
        self.run.live(i, now) && self.posted[i] < self.target
    }

    /// Reports the end once the client is `idle` ([`ClientRun::end_if`]).
    pub fn end_if(&mut self, idle: bool, now: u64) {
        self.run.end_if(idle, &self.log, self.flow, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::Log;
    use crate::{PerfKind, PerfServer, PerfSpec};
    use braid_verbs::testing::FakeNet;
    use std::cell::RefCell;
    use std::rc::Rc;

    fn meter() -> (Rc<RefCell<Log>>, SharedMeter) {
        let log = Rc::new(RefCell::new(Log::default()));
        let m: SharedMeter = log.clone();
        (log, m)
    }

    #[test]
    fn a_run_ends_once_and_finishes_only_if_no_connection_failed() {
        let (log, m) = meter();
        let mut run = ClientRun {
            failed: vec![false; 2],
            ..ClientRun::default()
        };
        run.end_if(false, &m, 0, 5);
        assert!(!run.is_done() && log.borrow().finished.is_none());
        run.end_if(true, &m, 0, 7);
        run.end_if(true, &m, 0, 9);
        assert!(run.is_done());
        assert_eq!(
            log.borrow().finished,
            Some(7),
            "the first idle moment, once"
        );

        let (log, m) = meter();
        let mut run = ClientRun {
            failed: vec![false, true],
            ..ClientRun::default()
        };
        run.end_if(true, &m, 0, 7);
        assert!(run.is_done());
        assert_eq!(log.borrow().finished, None, "a failed run never finishes");
    }

    #[test]
    fn a_connection_is_live_until_it_fails_or_the_deadline() {
        let run = ClientRun {
            failed: vec![false, true],
            deadline: Some(100),
            ..ClientRun::default()
        };
        assert!(run.live(0, 99));
        assert!(!run.live(0, 100));
        assert!(!run.live(1, 0));
        let open_ended = ClientRun {
            failed: vec![false],
            ..ClientRun::default()
        };
        assert!(open_ended.live(0, u64::MAX));
    }

    /// A client made of the shared pieces alone: what its timers fired and what it connected to.
    struct Probe {
        log: SharedMeter,
        rdv: Rendezvous,
        qps: Vec<QpNum>,
        run: ClientRun,
        seen: Rc<RefCell<Vec<(u64, u64)>>>,
        remote: Rc<RefCell<Vec<Endpoint>>>,
    }

    const START: u64 = 3_000_000;
    const DURATION: u64 = 5_000_000;

    impl App for Probe {
        fn start(&mut self, v: &mut dyn Verbs) {
            let ends = open_client(
                v,
                ClientSlots {
                    n: 2,
                    size: 4096,
                    base: 1 << 40,
                    priority: None,
                    conn0: 0,
                    flow: 0,
                    qp_type: QpType::Rc,
                    access: Access::ALL,
                    start: START,
                },
                &self.log,
                &self.rdv,
            );
            (self.qps, self.run) = (ends.qps, ends.run);
        }

        fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
            if let Event::Timer(t) = ev {
                self.seen.borrow_mut().push((v.now(), t));
                if t == CONNECT {
                    *self.remote.borrow_mut() =
                        self.run
                            .connect(v, &self.rdv, 0, &self.qps, &self.log, 0, Some(DURATION));
                } else {
                    self.run.end_if(true, &self.log, 0, v.now());
                }
            }
        }

        fn is_done(&self) -> bool {
            self.run.is_done()
        }
    }

    #[test]
    fn a_client_connects_at_its_start_to_its_servers_and_its_duration_ends_by_a_timer() {
        let (log, m) = meter();
        let rdv = braid_verbs::rendezvous::board();
        let spec = PerfSpec {
            kind: PerfKind::WriteBw,
            size: 4096,
            qps: 2,
            tx_depth: 1,
            iterations: Some(1),
            duration: None,
            start: 0,
            cq_mod: 1,
            post_list: 1,
            priority: None,
        };
        let mut net = FakeNet::new(2);
        let h = net.hosts();
        net.add_tenant(
            h[1],
            Box::new(PerfServer::new(spec, 0, 0, m.clone(), rdv.clone(), 1 << 41)),
            vec![],
        );
        let seen = Rc::new(RefCell::new(Vec::new()));
        let remote = Rc::new(RefCell::new(Vec::new()));
        net.add_tenant(
            h[0],
            Box::new(Probe {
                log: m,
                rdv: rdv.clone(),
                qps: vec![],
                run: ClientRun::default(),
                seen: seen.clone(),
                remote: remote.clone(),
            }),
            vec![],
        );
        net.run();
        let seen = seen.borrow();
        assert_eq!(seen.len(), 2, "{seen:?}");
        let (connected, token) = seen[0];
        assert_eq!((connected, token), (START, CONNECT));
        assert_eq!(seen[1], (START + DURATION, CONNECT - 1));
        assert_eq!(log.borrow().started, Some(START));
        assert_eq!(log.borrow().finished, Some(START + DURATION));
        // Each connection reached the server's side of the same connection id, at its slot.
        let remote = remote.borrow();
        assert_eq!(remote.len(), 2);
        for (i, r) in remote.iter().enumerate() {
            let server = rdv.borrow().lookup(i as u64, Side::Server).unwrap();
            assert_eq!(
                (r.host, r.qpn, r.addr),
                (server.host, server.qpn, server.addr)
            );
            let mine = rdv.borrow().lookup(i as u64, Side::Client).unwrap();
            assert_eq!(mine.addr, (1 << 40) + i as u64 * 4096);
        }
    }
}
