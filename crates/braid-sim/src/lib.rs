//! braid-sim: a packet-level RoCEv2 datacenter simulator.
//!
//! Layers (each knows only those below it): the engine (braid-engine); the network description
//! (braid-topo); the network model (`net`: ports, links, switches; `world`: routing and events);
//! the RNIC (`nic`, `qp_cache`, `memory`) with its transport (RoCEv2 RC, go-back-N, `dcqcn`);
//! the verbs seam (braid-verbs) through which applications (`apps`) and middleware drive an RNIC
//! (`hostverbs`); scenarios, measurement and results on top.

pub mod api;
mod app_build;
mod build;
/// The applications live in `braid-apps` (verbs only, portable to real NICs).
pub use braid_apps as apps;
pub mod arbiter;
pub mod capacity;
pub mod cc;
pub mod config;
pub mod dcqcn;
pub mod hostverbs;
pub mod lazy_flows;
pub mod measure;
pub mod memory;
pub mod net;
pub mod nic;
pub mod packet;
pub mod progress;
pub mod qp_cache;
pub mod results;
pub mod scenario;
pub mod simulation;
pub mod stacks;
pub mod tables;
pub mod tenants;
pub mod trace;
pub mod transport;
pub mod transport_report;
pub mod world;

pub use api::{Column, ColumnType, Results, ScenarioError, Table, Tables};
pub use scenario::Scenario;
pub use simulation::{scenario_json_schema, Simulation};
