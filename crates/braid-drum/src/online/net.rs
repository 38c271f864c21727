//! A deterministic in-process network for [`HostSolver`]s: every message takes `delay_ns` plus
//! a seeded jitter in `[0, jitter_ns]` (so messages overtake each other: reordering) and is lost
//! with probability `loss`; timers fire at the solvers' deadlines. The same hosts, configuration
//! and seed give the same run, event for event.

use super::{HostSolver, LocalInstance, OnlineConfig};
use crate::problem::DrumError;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Clone, Debug)]
pub struct NetConfig {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    /// probability that a control message is lost
    pub loss: f64,
    pub seed: u64,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            delay_ns: 5_000,
            jitter_ns: 2_000,
            loss: 0.0,
            seed: 0,
        }
    }
}

/// What one run (to quiescence) cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunReport {
    /// the largest number of rounds any host ran in this run
    pub iterations: u64,
    pub messages: u64,
    pub bytes: u64,
    pub lost: u64,
    /// simulated time from the start of the run to quiescence, ns
    pub time_ns: u64,
    /// every host settled (none stopped at `max_rounds`)
    pub settled: bool,
    /// the run reached quiescence (no message in flight, every host idle)
    pub quiescent: bool,
}

/// A message in flight: (arrival, sequence, to, from, bytes).
type InFlight = Reverse<(u64, u64, u32, u32, Vec<u8>)>;

pub struct TestNet {
    pub hosts: Vec<HostSolver>,
    pub cfg: NetConfig,
    pub now: u64,
    rng: Xoshiro256PlusPlus,
    seq: u64,
    queue: BinaryHeap<InFlight>,
}

impl TestNet {
    /// Hosts 0..n with these instances.
    pub fn new(
        insts: Vec<LocalInstance>,
        online: OnlineConfig,
        cfg: NetConfig,
    ) -> Result<TestNet, DrumError> {
        let hosts = insts
            .into_iter()
            .enumerate()
            .map(|(i, inst)| HostSolver::new(i as u32, inst, online.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TestNet {
            hosts,
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            cfg,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
        })
    }

    fn flush(&mut self, rep: &mut RunReport) {
        for i in 0..self.hosts.len() {
            while let Some((to, b)) = self.hosts[i].poll_transmit() {
                rep.messages += 1;
                rep.bytes += b.len() as u64;
                if self.cfg.loss > 0.0 && self.rng.random::<f64>() < self.cfg.loss {
                    rep.lost += 1;
                    continue;
                }
                let j = if self.cfg.jitter_ns > 0 {
                    self.rng.random_range(0..=self.cfg.jitter_ns)
                } else {
                    0
                };
                self.seq += 1;
                let at = self.now + self.cfg.delay_ns + j;
                self.queue.push(Reverse((at, self.seq, to, i as u32, b)));
            }
        }
    }

    /// Run until nothing is in flight and no timer is due, or `max_events` events.
    pub fn run(&mut self, max_events: u64) -> RunReport {
        self.run_with(max_events, |_| {})
    }

    /// [`TestNet::run`], calling `watch` after every event (to trace the iterates).
    pub fn run_with(&mut self, max_events: u64, mut watch: impl FnMut(&TestNet)) -> RunReport {
        let mut rep = RunReport::default();
        let t0 = self.now;
        let it0: Vec<u64> = self.hosts.iter().map(|h| h.stats().rounds).collect();
        let mut events = 0;
        loop {
            self.flush(&mut rep);
            let timer = self
                .hosts
                .iter()
                .enumerate()
                .filter_map(|(i, h)| h.poll_timeout().map(|t| (t, i)))
                .min();
            let msg = self.queue.peek().map(|Reverse(m)| m.0);
            let next = match (timer, msg) {
                (None, None) => {
                    rep.quiescent = true;
                    break;
                }
                (Some((t, _)), Some(a)) => t.min(a),
                (Some((t, _)), None) => t,
                (None, Some(a)) => a,
            };
            events += 1;
            if events > max_events {
                break;
            }
            self.now = self.now.max(next);
            if msg == Some(next) {
                let Reverse((_, _, to, from, b)) = self.queue.pop().unwrap();
                if let Some(h) = self.hosts.get_mut(to as usize) {
                    // the solvers produce only well-formed messages
                    h.handle_message(self.now, from, &b)
                        .expect("well-formed message");
                }
            } else if let Some((_, i)) = timer {
                self.hosts[i].handle_timeout(self.now);
            }
            watch(self);
        }
        rep.time_ns = self.now - t0;
        rep.iterations = self
            .hosts
            .iter()
            .zip(&it0)
            .map(|(h, r0)| h.stats().rounds - r0)
            .max()
            .unwrap_or(0);
        rep.settled = self.hosts.iter().all(|h| !h.stats().gave_up);
        rep
    }

    /// Every host's WQE rates, host-major (`None` before every host has run a round).
    pub fn x(&self) -> Option<Vec<f64>> {
        let r: Vec<_> = self.hosts.iter().map(|h| h.rates()).collect();
        super::build::gather_x(&r)
    }
}
