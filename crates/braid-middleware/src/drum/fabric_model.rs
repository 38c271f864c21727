//! DRUM's model of the fabric: the links the backend knows, out of band, as a network controller
//! would tell the hosts' agents. A backend that can describe its fabric offers a [`FabricSlot`]
//! as a service of the host context ([`braid_verbs::host::HostCtx::with_service`]); DRUM asks for
//! it only with a decider that uses links, and the backend fills it once the run is built.

use braid_verbs::host::HostCtx;
use std::cell::RefCell;
use std::rc::Rc;

/// One directed fabric link as the backend knows it: its capacity and the (source, destination)
/// host pairs, by host address, whose traffic crosses it on every route they may take.
#[derive(Debug, Clone, PartialEq)]
pub struct FabricLink {
    /// A name for reports (e.g. "leaf0->spine0").
    pub name: String,
    /// Capacity, payload bytes per second (what the backend can carry of a WR's bytes).
    pub cap: f64,
    pub pairs: Vec<(u32, u32)>,
    /// The pairs whose traffic crosses it on some of their routes (ECMP: a superset of `pairs`).
    pub may: Vec<(u32, u32)>,
    /// The host (address) that keeps the link's row in a distributed solve: the lowest address
    /// among the hosts that asked for the fabric and may send across it (None: nobody may).
    pub owner: Option<u32>,
}

/// The backend's own route computation: which links one QP's packets cross.
pub trait FabricRoutes {
    /// Indices into [`FabricLinks::links`] of the links that packets from host address `src`
    /// with UDP source port `sport` to host address `dst` cross (the backend's ECMP replayed).
    fn links_of(&self, src: u32, sport: u16, dst: u32) -> Vec<usize>;
}

/// The fabric's links, out of band (what a network controller would tell the hosts' agents).
#[derive(Clone, Default)]
pub struct FabricLinks {
    /// The hosts' addresses (each host's first), in host order.
    pub hosts: Vec<u32>,
    pub links: Vec<FabricLink>,
    /// Per-QP routes (ECMP-aware), when the backend can replay them.
    pub routes: Option<Rc<dyn FabricRoutes>>,
}

impl std::fmt::Debug for FabricLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FabricLinks")
            .field("hosts", &self.hosts)
            .field("links", &self.links)
            .field("routes", &self.routes.is_some())
            .finish()
    }
}

impl PartialEq for FabricLinks {
    fn eq(&self, o: &Self) -> bool {
        self.hosts == o.hosts
            && self.links == o.links
            && match (&self.routes, &o.routes) {
                (None, None) => true,
                (Some(a), Some(b)) => Rc::ptr_eq(a, b),
                _ => false,
            }
    }
}

/// Where the backend puts the fabric's links once the run is built; empty until then, and only
/// filled when some host asked for it ([`ask`], [`HostCtx::service_wanted`]).
pub type FabricSlot = Rc<RefCell<Option<FabricLinks>>>;

/// The run's fabric-link slot from the host context, marking it wanted (None: the backend
/// knows no fabric).
pub fn ask(host: &mut HostCtx) -> Option<FabricSlot> {
    host.service::<FabricSlot>()
}
