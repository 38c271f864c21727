//! The host as the unit at which middleware is built.
//!
//! Every host has tenants (its applications, each with its own verbs stack) and one agent slot,
//! tenant [`AGENT`], whose stack holds the host-scoped halves of mechanisms (PeRF's daemon,
//! Justitia's pacer, the DRUM agent). A [`MiddlewareFactory`] (a mechanism's config) builds the
//! per-tenant layer; through [`HostCtx`] it finds or creates the state the host's tenants share
//! and adds the agent layer once. Agent and layers talk through that shared state and
//! [`crate::Verbs::wake`]: smoltcp's split of one interface per host and one socket per tenant.

use crate::rendezvous::SharedBoard;
use crate::{Caps, Middleware};
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// A tenant of a host: 0 is the host's agent slot, applications are numbered from 1.
pub type TenantId = u32;

/// The host agent slot's tenant id.
pub const AGENT: TenantId = 0;

/// Why a mechanism could not be built for a tenant (bad parameters, a missing NIC capability).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    /// The parameter at fault, relative to the mechanism's config (empty: the whole entry).
    pub key: String,
    pub message: String,
}

impl BuildError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        BuildError {
            key: key.into(),
            message: message.into(),
        }
    }
    /// The NIC lacks a capability the mechanism needs.
    pub fn missing_cap(what: &str, mechanism: &str) -> Self {
        BuildError::new(
            "",
            format!("{mechanism} needs {what}, which this NIC does not offer (its caps() lack it)"),
        )
    }
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for BuildError {}

/// What a factory sees of the host it builds for.
pub struct HostCtx {
    host: u32,
    caps: Caps,
    shared: HashMap<TypeId, Rc<dyn Any>>,
    agents: Vec<Box<dyn Middleware>>,
    board: Option<SharedBoard>,
    /// What the backend offers mechanisms beyond the verbs, by type.
    services: HashMap<TypeId, Rc<dyn Any>>,
    /// The services some mechanism asked for (the backend prepares only those).
    asked: HashSet<TypeId>,
    seed: u64,
    shares: Option<ShareSlot>,
}

/// The parts of the host agent slot's memory it shares with tenants: what an agent maps into a
/// tenant's process (a POSIX shared-memory segment, or ibverbs' shared MRs and memory windows
/// bound for one consumer). A tenant's region over agent memory is a mapping of the agent's
/// bytes only inside a share for that tenant; anywhere else the same addresses are the
/// tenant's own, private memory, so no tenant reaches another tenant's part by address.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AgentShares {
    list: Vec<(TenantId, u64, u64)>,
}

impl AgentShares {
    /// Shares `[addr, addr + len)` of the agent's memory with `tenant`.
    pub fn grant(&mut self, tenant: TenantId, addr: u64, len: u64) {
        self.list.push((tenant, addr, len));
    }

    /// Withdraws a share granted with the same arguments (regions already registered over it
    /// keep their mapping until deregistered, as an mmap outlives its shm_unlink).
    pub fn revoke(&mut self, tenant: TenantId, addr: u64, len: u64) {
        if let Some(i) = self.list.iter().position(|&s| s == (tenant, addr, len)) {
            self.list.swap_remove(i);
        }
    }

    /// Whether `[addr, addr + len)` lies inside one share for `tenant`.
    pub fn covers(&self, tenant: TenantId, addr: u64, len: u64) -> bool {
        self.list.iter().any(|&(t, a, l)| {
            t == tenant && addr >= a && addr.checked_add(len).is_some_and(|e| e <= a + l)
        })
    }
}

/// The host's [`AgentShares`], held by the backend's memory and handed to mechanisms through
/// [`HostCtx::agent_shares`].
pub type ShareSlot = Rc<RefCell<AgentShares>>;

impl HostCtx {
    pub fn new(host: u32, caps: Caps) -> Self {
        HostCtx {
            host,
            caps,
            shared: HashMap::new(),
            agents: Vec::new(),
            board: None,
            services: HashMap::new(),
            asked: HashSet::new(),
            seed: 0,
            shares: None,
        }
    }

    /// Gives the host its agent-memory shares (a backend whose agent memory tenants can map).
    pub fn with_shares(mut self, slot: ShareSlot) -> Self {
        self.shares = Some(slot);
        self
    }

    /// Where a host agent shares parts of its memory with tenants ([`AgentShares`]), if the
    /// backend models agent memory apart from the tenants'. Only mechanisms get it (through
    /// their factory), never an application.
    pub fn agent_shares(&self) -> Option<ShareSlot> {
        self.shares.clone()
    }

    /// Gives the host the run's seed (0 until a backend sets it).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The run's seed, for a mechanism whose choices are random draws (partition's UDP source
    /// ports, hence its ECMP paths): a run with another seed draws again, the same seed draws
    /// the same.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Offers mechanisms a service of the backend's, found by its type `T` (one per type; a
    /// second offer replaces the first). The seam knows no service: a mechanism defines the type
    /// it wants, a backend that can provide it inserts it.
    pub fn with_service<T: Clone + 'static>(mut self, service: T) -> Self {
        self.services.insert(TypeId::of::<T>(), Rc::new(service));
        self
    }

    /// The backend's service of type `T`, for a mechanism that wants it: asking marks it as
    /// wanted (a backend may prepare it only then, see [`HostCtx::service_wanted`]). None if the
    /// backend offers no such service.
    pub fn service<T: Clone + 'static>(&mut self) -> Option<T> {
        let key = TypeId::of::<T>();
        self.asked.insert(key);
        let s = self.services.get(&key)?;
        Some(s.downcast_ref::<T>().expect("keyed by type").clone())
    }

    /// Whether a mechanism on this host asked for the service of type `T`.
    pub fn service_wanted<T: 'static>(&self) -> bool {
        self.asked.contains(&TypeId::of::<T>())
    }

    /// The run's out-of-band board ([`crate::rendezvous`]), on which host agents exchange the
    /// endpoints of their own connections (Justitia's pacers, as rdma_cm or a TCP socket between
    /// daemons would). Keys with the top bit set are reserved for middleware.
    pub fn with_board(mut self, board: SharedBoard) -> Self {
        self.board = Some(board);
        self
    }

    /// The run's out-of-band board, if the backend offers one.
    pub fn board(&self) -> Option<&SharedBoard> {
        self.board.as_ref()
    }

    /// The host's index in the run.
    pub fn host(&self) -> u32 {
        self.host
    }

    /// The capabilities of the host's NIC.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// The host's one instance of `T`, created by `init` on first use. Returns it and whether
    /// this call created it (the moment to add the agent layer that drives it).
    pub fn shared<T: 'static>(&mut self, init: impl FnOnce() -> T) -> (Rc<RefCell<T>>, bool) {
        let key = TypeId::of::<T>();
        if let Some(s) = self.shared.get(&key) {
            let s = s.clone().downcast::<RefCell<T>>().expect("keyed by type");
            return (s, false);
        }
        let s = Rc::new(RefCell::new(init()));
        self.shared.insert(key, s.clone());
        (s, true)
    }

    /// Adds a layer to the host agent slot's stack (tenant [`AGENT`]). Agents are stacked in the
    /// order they are added, the first on top.
    pub fn add_agent(&mut self, layer: Box<dyn Middleware>) {
        self.agents.push(layer);
    }

    /// The agent layers added so far (the world builds the agent slot's stack from them).
    pub fn take_agents(&mut self) -> Vec<Box<dyn Middleware>> {
        std::mem::take(&mut self.agents)
    }
}

/// A mechanism's config is its factory (quinn-proto's congestion controllers): it builds the
/// layer each tenant gets and, through [`HostCtx`], the host's shared part.
pub trait MiddlewareFactory {
    /// The mechanism's name (what a scenario's `kind` says).
    fn name(&self) -> &'static str;
    fn build(
        &self,
        host: &mut HostCtx,
        tenant: TenantId,
    ) -> Result<Box<dyn Middleware>, BuildError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_state_is_one_per_host_and_type() {
        let mut h = HostCtx::new(3, Caps::default());
        let (a, first) = h.shared(|| 5u32);
        assert!(first);
        let (b, again) = h.shared(|| 9u32);
        assert!(!again);
        *a.borrow_mut() += 1;
        assert_eq!(*b.borrow(), 6);
        let (c, first_string) = h.shared(String::new);
        assert!(first_string);
        assert!(c.borrow().is_empty());
    }

    #[test]
    fn a_service_is_found_by_type_and_asking_marks_it_wanted() {
        #[derive(Clone, Debug, PartialEq)]
        struct Model(u32);
        #[derive(Clone)]
        struct Other;
        let mut h = HostCtx::new(3, Caps::default()).with_service(Model(7));
        assert!(!h.service_wanted::<Model>());
        assert_eq!(h.service::<Model>(), Some(Model(7)));
        assert!(h.service_wanted::<Model>());
        assert!(!h.service_wanted::<Other>());
        assert!(h.service::<Other>().is_none());
        assert!(h.service_wanted::<Other>());
    }

    #[test]
    fn the_run_seed_is_what_the_backend_gave() {
        assert_eq!(HostCtx::new(3, Caps::default()).seed(), 0);
        assert_eq!(HostCtx::new(3, Caps::default()).with_seed(42).seed(), 42);
    }
}
