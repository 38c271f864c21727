//! PeRF's host agent: the artifact's `perf_main` daemon, in the host's agent slot (tenant 0).
//!
//! Every `sample_interval` it samples each tenant's deepest send queue and re-classifies it
//! ([`super::classify`]). Every `qp_limit_interval` it sets the host's active-QP limit
//! `min(QNum_capa, floor(link_fraction * link / (S * qp_msg_rate)))`, S the largest average
//! message size of the active non-delay tenants (at least 1; QNum_capa with no such tenant); when
//! a non-delay tenant is active beside another and the host's active QPs exceed the limit, each
//! non-delay tenant keeps one QP and the rest of the limit is dealt round-robin to the multi-QP
//! tenants (the dealing starts one tenant further every `allowance`); delay-sensitive tenants are
//! never limited. With more than `max_bw_tenants` active bandwidth tenants beside an active
//! delay/message tenant, one bandwidth tenant posts at a time, for `bw_rotation` times its weight.
//! Layers whose allowance changed are woken ([`super::layer::WAKE_RESCHEDULE`]).

use super::classify::Class;
use super::layer::WAKE_RESCHEDULE;
use super::read::{TIMER_BOARD, WAKE_AGENT_READ};
use super::state::{HostState, UNGATED};
use braid_verbs::*;
use std::cell::RefCell;
use std::rc::Rc;

const TIMER_SAMPLE: u64 = 1;
const TIMER_LIMIT: u64 = 2;

/// The agent layer (one per host).
pub struct PerfAgent {
    host: Rc<RefCell<HostState>>,
    /// Where the round-robin dealing of extra QPs starts, and when it last moved.
    deal_from: usize,
    deal_moved: u64,
    /// When the current bandwidth tenant's turn ended / ends.
    bw_turn_end: u64,
    samples: u64,
    limits: u64,
    /// Links to the other PeRF hosts' agents (large-READ conversion).
    links: super::read::Links,
}

impl PerfAgent {
    pub fn new(host: Rc<RefCell<HostState>>, board: Option<rendezvous::SharedBoard>) -> Self {
        PerfAgent {
            host,
            deal_from: 0,
            deal_moved: 0,
            bw_turn_end: 0,
            samples: 0,
            limits: 0,
            links: super::read::Links::new(board),
        }
    }

    /// Samples and re-classifies every tenant.
    pub fn sample(&mut self, now: u64) {
        self.samples += 1;
        let mut h = self.host.borrow_mut();
        let recent = h.recent();
        for p in h.tenants.values_mut() {
            let active = p.is_active(now, recent);
            if active {
                let s = p.sample();
                p.classifier.push(s);
            } else {
                p.classifier.clear();
            }
            let class = p.classifier.class(p.bw_send);
            if class != p.class {
                p.class = class;
                p.class_changes += 1;
            }
        }
    }

    /// The active-QP limit for the host's tenants now.
    pub fn qp_limit(h: &HostState, now: u64) -> u32 {
        let recent = h.recent();
        let s = h
            .tenants
            .values()
            .filter(|p| p.class != Class::DelaySensitive && p.is_active(now, recent))
            .map(|p| p.avg_size)
            .fold(0.0f64, f64::max);
        let capa = h.cfg.qp_capacity;
        if s <= 0.0 {
            return capa;
        }
        let fu = h.cfg.link_fraction * h.link_bps as f64 / (s * 8.0) / h.cfg.qp_msg_rate;
        (fu.floor() as u64).clamp(1, capa as u64) as u32
    }

    /// Sets the limit, the tenants' allowances and the bandwidth tenants' turns; returns the
    /// tenants whose allowance changed.
    pub fn allocate(&mut self, now: u64) -> Vec<TenantId> {
        self.limits += 1;
        let mut h = self.host.borrow_mut();
        let recent = h.recent();
        let limit = Self::qp_limit(&h, now);
        h.qp_limit = limit;
        let active: Vec<TenantId> = h
            .tenants
            .iter()
            .filter(|(_, p)| p.is_active(now, recent))
            .map(|(&t, _)| t)
            .collect();
        let host_qps: u32 = h.tenants.values().map(|p| p.active_qps(now, recent)).sum();
        let non_delay = active
            .iter()
            .any(|t| h.tenants[t].class != Class::DelaySensitive);
        let gating = non_delay && active.len() > 1 && host_qps > limit;
        h.gating = gating;
        let before: Vec<(TenantId, u32, bool)> = h
            .tenants
            .iter()
            .map(|(&t, p)| (t, p.allowed_qps, p.bw_paused))
            .collect();
        let mut allowed: Vec<(TenantId, u32)> = Vec::new();
        for (&t, p) in h.tenants.iter() {
            let gated = gating && p.class != Class::DelaySensitive && active.contains(&t);
            allowed.push((t, if gated { 1 } else { UNGATED }));
        }
        if gating {
            // The rest of the limit, one QP at a time, to the multi-QP tenants.
            let mut extra = limit.saturating_sub(active.len() as u32);
            let multi: Vec<usize> = allowed
                .iter()
                .enumerate()
                .filter(|(_, (t, a))| *a != UNGATED && h.tenants[t].active_qps(now, recent) > 1)
                .map(|(i, _)| i)
                .collect();
            if now >= self.deal_moved + h.cfg.allowance.0 {
                self.deal_moved = now;
                self.deal_from = self.deal_from.wrapping_add(1);
            }
            let mut k = 0usize;
            while extra > 0 && !multi.is_empty() && k < 64 * multi.len() {
                let i = multi[(self.deal_from + k) % multi.len()];
                let t = allowed[i].0;
                if allowed[i].1 < h.tenants[&t].active_qps(now, recent) {
                    allowed[i].1 += 1;
                    extra -= 1;
                }
                k += 1;
            }
        }
        for (t, a) in &allowed {
            h.tenants.get_mut(t).expect("listed").allowed_qps = *a;
        }
        // Many bandwidth tenants beside a small one: one at a time.
        let bws: Vec<TenantId> = active
            .iter()
            .copied()
            .filter(|t| h.tenants[t].class == Class::BandwidthIntensive)
            .collect();
        let small = active.iter().any(|t| h.tenants[t].class.is_small());
        if bws.len() > h.cfg.max_bw_tenants as usize && small {
            let turn = match h.bw_turn {
                Some(t) if bws.contains(&t) && now < self.bw_turn_end => t,
                prev => {
                    let next = prev
                        .and_then(|p| bws.iter().position(|&t| t > p))
                        .map_or(bws[0], |i| bws[i]);
                    let w = h.tenants[&next].weight;
                    self.bw_turn_end = now + (h.cfg.bw_rotation.0 as f64 * w) as u64;
                    next
                }
            };
            h.bw_turn = Some(turn);
            for &t in &bws {
                h.tenants.get_mut(&t).expect("listed").bw_paused = t != turn;
            }
        } else {
            h.bw_turn = None;
            for p in h.tenants.values_mut() {
                p.bw_paused = false;
            }
        }
        before
            .into_iter()
            .filter(|&(t, a, p)| {
                let x = &h.tenants[&t];
                x.allowed_qps != a || x.bw_paused != p
            })
            .map(|(t, _, _)| t)
            .collect()
    }
}

impl Middleware for PerfAgent {
    fn name(&self) -> &'static str {
        "perf_agent"
    }

    fn start(&mut self, below: &mut dyn Verbs) {
        let (si, li) = {
            let h = self.host.borrow();
            (h.cfg.sample_interval.0, h.cfg.qp_limit_interval.0)
        };
        let now = below.now();
        below.set_timer(now + si, TIMER_SAMPLE);
        below.set_timer(now + li, TIMER_LIMIT);
        self.links.start(below);
        let mut h = self.host.borrow_mut();
        self.links.service(below, &mut h.read);
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let h = self.host.borrow();
        let count = |c: Class| h.tenants.values().filter(|p| p.class == c).count() as f64;
        vec![
            ("qp_limit", h.qp_limit as f64),
            ("gating", h.gating as u8 as f64),
            ("samples", self.samples as f64),
            ("limits", self.limits as f64),
            ("delay_tenants", count(Class::DelaySensitive)),
            ("message_tenants", count(Class::MessageIntensive)),
            ("bandwidth_tenants", count(Class::BandwidthIntensive)),
            ("read_links", self.links.ready_links() as f64),
            ("reads_converted", h.read.converted as f64),
            ("reads_served", h.read.served as f64),
            ("reads_refused", h.read.refused as f64),
            ("read_link_errors", self.links.errors as f64),
        ]
    }

    fn on_event(&mut self, below: &mut dyn Verbs, event: Event, up: &mut Vec<Event>) {
        let now = below.now();
        match event {
            Event::Timer(TIMER_SAMPLE) => {
                self.sample(now);
                let si = self.host.borrow().cfg.sample_interval.0;
                below.set_timer(now + si, TIMER_SAMPLE);
            }
            Event::Timer(TIMER_LIMIT) => {
                for t in self.allocate(now) {
                    below.wake(t, WAKE_RESCHEDULE);
                }
                let li = self.host.borrow().cfg.qp_limit_interval.0;
                below.set_timer(now + li, TIMER_LIMIT);
            }
            Event::Wake(WAKE_AGENT_READ) => {
                let mut h = self.host.borrow_mut();
                self.links.service(below, &mut h.read);
            }
            Event::Timer(TIMER_BOARD) => {
                let mut h = self.host.borrow_mut();
                self.links.on_timer(below, &mut h.read);
            }
            Event::Completion(cq) if self.links.owns_cq(cq) => {
                let h = &mut *self.host.borrow_mut();
                let tenants = &h.tenants;
                let owner = |q: QpNum| tenants.iter().find(|(_, p)| p.owns(q)).map(|(&t, _)| t);
                self.links.on_completions(below, &mut h.read, &owner);
                self.links.service(below, &mut h.read);
            }
            e => up.push(e),
        }
    }
}
