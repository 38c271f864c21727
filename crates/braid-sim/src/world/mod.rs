//! The world: nodes, links, hosts (NIC + verbs stacks + applications) and switches, driven by
//! the engine's events.
//!
//! Events per packet are kept to a minimum: a packet hop is one `Arrive` event; an egress port
//! schedules a `PortWake` only when something is waiting behind the packet it is sending.
//!
//! This file holds the world's types (events, nodes, hosts, tenants, counters) and the [`World`]
//! itself; the behaviour is split into `routes` (construction and routing), `hop` (the packet hop
//! machinery and PFC), `hosts` (NIC effects, applications and notifications) and `events` (the
//! event handler and sampling).

use crate::measure::Measure;
use crate::net::config::SwitchConfig;
use crate::net::{Port, Switch};
use crate::nic::{Nic, NicParams, TimerKind};
use crate::packet::{PacketPool, PktId};
use braid_verbs::{App, Middleware};

pub mod config;
mod events;
mod fabric_links;
mod facing;
pub mod failover;
mod hop;
pub use fabric_links::{fabric_links, fabric_links_for};
mod flow_path;
mod hosts;
pub mod ideal;
pub(crate) mod path_capacity;
mod routes;
mod table;

#[derive(Debug, Clone, Copy)]
pub enum Ev {
    /// A packet finished arriving at `node` on `port`. At a switch, `out` is the egress port its
    /// route gives, computed once when the packet was put on the wire (`hop::egress_at`), so
    /// that neither the arrival's prefetch nor forwarding computes it again; [`NO_PORT`] at a
    /// host, for a PFC frame, or when the switch has no route.
    Arrive {
        node: u32,
        port: u16,
        pkt: PktId,
        out: u16,
    },
    /// An egress port may transmit.
    PortWake { node: u32, port: u16 },
    /// A packet finished the NIC receive pipeline.
    NicRx { host: u32, pkt: PktId },
    /// A transport timer.
    Timer {
        host: u32,
        kind: TimerKind,
        qp: u32,
        gen: u32,
    },
    /// A timer an application or middleware asked for (`app`: the tenant); its 64-bit token
    /// waits in the world's token slab at `slot` (so that an event is 16 bytes, not 24).
    AppTimer { host: u32, app: u32, slot: u32 },
    /// Another tenant's middleware woke this tenant (token in the slab, as for `AppTimer`).
    Wake { host: u32, app: u32, slot: u32 },
    /// Start an application.
    AppStart { host: u32, app: u32 },
    /// A link goes down or comes up; `detected`: the switches' failure detection (BFD) has
    /// noticed it (`switch.failover`) and they reroute.
    LinkState { link: u32, up: bool, detected: bool },
    /// Take measurement samples.
    Sample,
}

/// `Ev::Arrive::out` when there is no egress port to use.
pub const NO_PORT: u16 = u16::MAX;

/// `Ev::Arrive::out` when the switch's load balancer chooses the port on arrival.
pub const LB_AT_ARRIVAL: u16 = u16::MAX - 1;

/// `Port::peer_switch` of a port facing a host.
pub const NO_SWITCH: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Host(u32),
    Switch(u32),
}

pub struct Node {
    /// Its id (index in `World::nodes`); its ports are `World::node_ports(id)`.
    pub id: u32,
    pub name: String,
    pub role: Role,
}

/// What a packet's hop needs of a node, in one small record per node: where its ports start in
/// the world's one array of ports, and its role. A hop reads this (12 bytes; ~130 KB at 10^4
/// hosts) instead of the node's record and then the node's own vector of ports
/// (docs/performance.md, "Round 5").
#[derive(Debug, Clone, Copy)]
pub struct NodeHot {
    pub first_port: u32,
    pub role: Role,
}

/// A tenant: an application with its own verbs stack (slot 0 of every host is the host agent's,
/// with an idle application and the host-scoped middleware layers).
pub struct AppSlot {
    pub app: Box<dyn App>,
    pub stack: Vec<Box<dyn Middleware>>,
    /// What results call this tenant (e.g. "apps[0].client", "traffic[1].sender").
    pub label: String,
    pub cpu: crate::hostverbs::TenantCpu,
    /// The flow record this tenant's measurements go to (perftest applications).
    pub flow: Option<u32>,
    /// The NIC parameters its QPs are created with when its tenant runs a transport of its own
    /// (`[[apps]].transport`, `[[traffic]].transport`, `transport.per_host`); None = the world's.
    pub params: Option<std::rc::Rc<NicParams>>,
    /// QP numbers reserved for it when it starts (a lazy flow sender: `lazy_flows.rs`).
    pub plan: Option<std::rc::Rc<braid_apps::QpPlan>>,
}

pub struct Host {
    pub node: u32,
    pub nic: Nic,
    /// Its tenants; index 0 is the host agent slot.
    pub apps: Vec<AppSlot>,
    /// Which tenant owns each QP, CQ and memory region (completion events go to the CQ's).
    pub owners: crate::hostverbs::Owners,
    pub caps: braid_verbs::Caps,
}

impl AppSlot {
    pub fn new(app: Box<dyn App>, stack: Vec<Box<dyn Middleware>>, label: String) -> Self {
        AppSlot {
            app,
            stack,
            label,
            cpu: Default::default(),
            flow: None,
            params: None,
            plan: None,
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub drops_buffer: u64,
    pub drops_loss: u64,
    /// `drops_loss` by packet class (`packet::LOSS_CLASSES` names them).
    pub drops_loss_by_class: [u64; crate::packet::LOSS_CLASSES.len()],
    pub drops_link_down: u64,
    /// Packets a switch had no route for, or that reached a host they were not addressed to.
    pub drops_no_route: u64,
    pub pfc_pauses: u64,
    pub pfc_resumes: u64,
    pub ecn_marks: u64,
    pub packets_forwarded: u64,
    /// Times the switches recomputed their routes after a detected link change (failover).
    pub reroutes: u64,
}

pub struct World {
    pub nodes: Vec<Node>,
    /// Every node's ports, node after node (a node's ports are contiguous, in port order);
    /// `hot[n].first_port` is where node `n`'s start, `hot[n + 1].first_port` where they end.
    pub(crate) ports: Vec<Port>,
    /// Per node (plus one sentinel at the end, role unused): see [`NodeHot`].
    pub(crate) hot: Vec<NodeHot>,
    pub hosts: Vec<Host>,
    pub switches: Vec<Switch>,
    /// Node id -> host index (u32::MAX for switches).
    pub host_index: Vec<u32>,
    pub groups: Vec<Vec<u16>>,
    /// Every switch's ECMP group per destination host, compressed by edge switch.
    pub routes: table::RouteTables,
    pub links: Vec<(u32, u16, u32, u16)>,
    pub pool: PacketPool,
    pub params: NicParams,
    pub sw: SwitchConfig,
    pub counters: Counters,
    pub measure: Measure,
    /// Completion notifications to deliver after the current event: (host, tenant, CQ).
    pending_notify: Vec<(u32, u32, u32)>,
    /// The host CPU cost model, and whether spent CPU time delays a tenant.
    pub cpu_cost: braid_verbs::CpuCost,
    pub cpu_delay: bool,
    pub seed: u64,
    /// Bit p set: priority p is lossless (PFC enabled and listed).
    lossless_mask: u8,
    /// Events handled, by kind (see [`Ev::KINDS`]).
    pub ev_counts: [u64; 9],
    /// Tokens of pending `AppTimer` / `Wake` events, and the free slots.
    tokens: Vec<u64>,
    free_tokens: Vec<u32>,
    /// Some switch runs a load balancer other than ECMP's hash (`Switch::lb`): its packets are
    /// routed when they arrive (`hop::forward`), not when they leave upstream.
    lb_any: bool,
    /// Per link: its failure has been detected (`switch.failover`); routing avoids it.
    link_detected_down: Vec<bool>,
    /// The capacity behind next hops, for balancers that weight by it (WCMP), and the buffer
    /// that passes one pick's to the balancer.
    path_capacity: path_capacity::PathCapacity,
    behind: Vec<f64>,
    /// The static routes and node names, kept to install them again after a reroute.
    static_routes: Option<(
        Vec<crate::world::config::StaticRoute>,
        std::collections::HashMap<String, u32>,
    )>,
}

/// Index in the world's port array of port `port` of node `node` (a free function, so that a
/// port can be borrowed mutably beside other fields of the world).
#[inline(always)]
pub(crate) fn port_at(hot: &[NodeHot], node: u32, port: u16) -> usize {
    let i = hot[node as usize].first_port as usize + port as usize;
    debug_assert!(i < hot[node as usize + 1].first_port as usize);
    i
}

impl World {
    /// Port `port` of node `node`.
    #[inline(always)]
    pub fn port(&self, node: u32, port: u16) -> &Port {
        let i = self.port_index(node, port);
        &self.ports[i]
    }

    #[inline(always)]
    pub fn port_mut(&mut self, node: u32, port: u16) -> &mut Port {
        let i = self.port_index(node, port);
        &mut self.ports[i]
    }

    #[inline(always)]
    pub(crate) fn port_index(&self, node: u32, port: u16) -> usize {
        port_at(&self.hot, node, port)
    }

    /// Node `node`'s ports, in port order.
    pub fn node_ports(&self, node: u32) -> &[Port] {
        let (a, b) = (self.hot[node as usize], self.hot[node as usize + 1]);
        &self.ports[a.first_port as usize..b.first_port as usize]
    }

    pub fn node_ports_mut(&mut self, node: u32) -> &mut [Port] {
        let (a, b) = (self.hot[node as usize], self.hot[node as usize + 1]);
        &mut self.ports[a.first_port as usize..b.first_port as usize]
    }

    /// Every node's ports, node after node.
    pub fn all_ports(&self) -> &[Port] {
        &self.ports
    }

    /// Node `node`'s role (from the hop's per-node record).
    #[inline(always)]
    pub fn role(&self, node: u32) -> Role {
        self.hot[node as usize].role
    }

    /// Keeps a token until its event is handled; returns its slot.
    fn keep_token(&mut self, token: u64) -> u32 {
        match self.free_tokens.pop() {
            Some(i) => {
                self.tokens[i as usize] = token;
                i
            }
            None => {
                self.tokens.push(token);
                (self.tokens.len() - 1) as u32
            }
        }
    }

    /// The token at `slot`, which is free again.
    fn take_token(&mut self, slot: u32) -> u64 {
        self.free_tokens.push(slot);
        self.tokens[slot as usize]
    }
}

impl Ev {
    pub const KINDS: [&'static str; 9] = [
        "arrive",
        "port_wake",
        "nic_rx",
        "timer",
        "app_timer",
        "app_start",
        "link_state",
        "sample",
        "wake",
    ];
    fn kind(&self) -> usize {
        match self {
            Ev::Arrive { .. } => 0,
            Ev::PortWake { .. } => 1,
            Ev::NicRx { .. } => 2,
            Ev::Timer { .. } => 3,
            Ev::AppTimer { .. } => 4,
            Ev::AppStart { .. } => 5,
            Ev::LinkState { .. } => 6,
            Ev::Sample => 7,
            Ev::Wake { .. } => 8,
        }
    }
}

// An event record is 16 bytes (a wheel entry 32 with its time and sequence number); a field that
// makes it larger costs every event's moves through the queue.
const _: () = assert!(std::mem::size_of::<Ev>() == 16);
