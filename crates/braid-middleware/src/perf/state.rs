//! What a host's PeRF agent and its tenants' layers share (the artifact's shared memory between
//! `perf_main` and the patched libmlx5 of each process).

use super::classify::{Class, Classifier};
use super::PerfConfig;
use braid_verbs::{Caps, QpNum, TenantId};
use std::collections::BTreeMap;

/// No limit on a tenant's active QPs.
pub const UNGATED: u32 = u32::MAX;

/// One QP of a tenant as its layer publishes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QpPub {
    pub qpn: QpNum,
    /// When the application last posted to it.
    pub last_post: Option<u64>,
    /// Application WRs posted and not known complete (in the NIC or in the software queue).
    pub outstanding: u32,
    /// Their bytes.
    pub bytes: u64,
    /// Application WRs still in the layer's software queue.
    pub queued: u32,
}

/// One tenant as its layer publishes it and its agent judges it.
#[derive(Debug, Clone)]
pub struct TenantPub {
    pub class: Class,
    pub classifier: Classifier,
    pub class_changes: u64,
    /// It has posted a non-READ message of at least `large_msg` (sticky).
    pub bw_send: bool,
    /// EWMA (alpha 0.5) of the sizes it posts, as the artifact's `avg_msg_size`.
    pub avg_size: f64,
    pub weight: f64,
    pub last_post: Option<u64>,
    /// Its QPs, by number (a map: a layer publishes one on every post and completion).
    qps: BTreeMap<QpNum, QpPub>,
    /// How many of them have work (outstanding or queued): kept with `qps` so that
    /// [`TenantPub::is_active`], asked on every post of every tenant, does not scan them.
    busy: u32,
    /// How many of its QPs may post (set by the agent; [`UNGATED`]: all).
    pub allowed_qps: u32,
    /// Held back while bandwidth tenants take turns.
    pub bw_paused: bool,
}

impl TenantPub {
    fn new(cfg: &PerfConfig, weight: f64) -> Self {
        let cap = (cfg.window.0 / cfg.sample_interval.0).max(1) as usize;
        TenantPub {
            class: Class::DelaySensitive,
            classifier: Classifier::new(cap, cfg.delay_depth, cfg.delay_bytes.0),
            class_changes: 0,
            bw_send: false,
            avg_size: 0.0,
            weight,
            last_post: None,
            qps: BTreeMap::new(),
            busy: 0,
            allowed_qps: UNGATED,
            bw_paused: false,
        }
    }

    /// Whether the tenant owns QP `qpn`.
    pub fn owns(&self, qpn: QpNum) -> bool {
        self.qps.contains_key(&qpn)
    }

    /// Registers a QP (no work yet).
    pub fn add_qp(&mut self, qpn: QpNum) {
        self.qps.entry(qpn).or_insert(QpPub {
            qpn,
            ..Default::default()
        });
    }

    /// Publishes a QP's state (created on first use); `posted_at`: the application just posted.
    pub fn publish_qp(
        &mut self,
        qpn: QpNum,
        posted_at: Option<u64>,
        outstanding: u32,
        bytes: u64,
        queued: u32,
    ) {
        let p = self.qps.entry(qpn).or_insert(QpPub {
            qpn,
            ..Default::default()
        });
        let was = Self::has_work(p);
        if posted_at.is_some() {
            p.last_post = posted_at;
        }
        p.outstanding = outstanding;
        p.bytes = bytes;
        p.queued = queued;
        let now = Self::has_work(p);
        if now && !was {
            self.busy += 1;
        } else if was && !now {
            self.busy -= 1;
        }
        if posted_at.is_some() {
            self.last_post = posted_at;
        }
    }

    /// Forgets a destroyed QP.
    pub fn remove_qp(&mut self, qpn: QpNum) {
        if let Some(p) = self.qps.remove(&qpn) {
            if Self::has_work(&p) {
                self.busy -= 1;
            }
        }
    }

    /// Its QPs, by number.
    pub fn qps(&self) -> impl Iterator<Item = &QpPub> {
        self.qps.values()
    }

    fn has_work(q: &QpPub) -> bool {
        q.outstanding > 0 || q.queued > 0
    }

    /// A QP is active if it has work or posted within `recent` before `now`.
    pub fn qp_active(q: &QpPub, now: u64, recent: u64) -> bool {
        Self::has_work(q) || q.last_post.is_some_and(|t| t + recent >= now)
    }

    /// (The agent asks every 10 ms: a scan is fine.)
    pub fn active_qps(&self, now: u64, recent: u64) -> u32 {
        self.qps
            .values()
            .filter(|q| Self::qp_active(q, now, recent))
            .count() as u32
    }

    pub fn is_active(&self, now: u64, recent: u64) -> bool {
        self.busy > 0 || self.last_post.is_some_and(|t| t + recent >= now)
    }

    /// The deepest send queue now (WRs, and the bytes outstanding on that queue).
    pub fn sample(&self) -> super::classify::Sample {
        let mut s = super::classify::Sample::default();
        for q in self.qps.values() {
            if (q.outstanding, q.bytes) > (s.depth, s.bytes) {
                s.depth = q.outstanding;
                s.bytes = q.bytes;
            }
        }
        s
    }
}

/// A host's PeRF state.
#[derive(Debug)]
pub struct HostState {
    /// The agent's parameters (from the host's first `perf` tenant).
    pub cfg: PerfConfig,
    /// The link the active-QP limit budgets for, bit/s.
    pub link_bps: u64,
    pub tenants: BTreeMap<TenantId, TenantPub>,
    /// The host's active-QP limit (min(QNum_capa, 0.7 * link / (S * rate per QP))).
    pub qp_limit: u32,
    /// Whether active QPs are being limited at all (a non-delay tenant beside another, and
    /// more active QPs than the limit).
    pub gating: bool,
    /// While bandwidth tenants take turns: whose turn it is.
    pub bw_turn: Option<TenantId>,
    /// The large-READ conversion's mailboxes (`read_convert`).
    pub read: super::read::ReadHub,
}

impl HostState {
    pub fn new(cfg: PerfConfig, caps: &Caps) -> Self {
        let link_bps = cfg.link_rate.map_or(caps.line_rate_bps, |r| r.0);
        HostState {
            qp_limit: cfg.qp_capacity,
            cfg,
            link_bps,
            tenants: BTreeMap::new(),
            gating: false,
            bw_turn: None,
            read: Default::default(),
        }
    }

    pub fn add_tenant(&mut self, t: TenantId, weight: f64) {
        let p = TenantPub::new(&self.cfg, weight);
        self.tenants.entry(t).or_insert(p);
    }

    /// How recent a post keeps a tenant or QP active: the agent's publication period.
    pub fn recent(&self) -> u64 {
        self.cfg.qp_limit_interval.0
    }

    /// Whether a delay-sensitive or message-intensive tenant other than `except` is active:
    /// the condition for splitting and 0_WAITs.
    pub fn small_active(&self, now: u64, except: TenantId) -> bool {
        let recent = self.recent();
        self.tenants
            .iter()
            .any(|(&t, p)| t != except && p.class.is_small() && p.is_active(now, recent))
    }

    /// The tenant's published state.
    pub fn tenant_mut(&mut self, t: TenantId) -> &mut TenantPub {
        let cfg = &self.cfg;
        self.tenants
            .entry(t)
            .or_insert_with(|| TenantPub::new(cfg, 1.0))
    }
}
