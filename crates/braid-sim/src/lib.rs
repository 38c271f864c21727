//! braid-sim: a packet-level RoCEv2 datacenter simulator.
//!
//! Layers (each knows only those below it): the engine (braid-engine); the network (links,
//! switches, routing); the RNIC (QPs, CQs, arbiter, QP cache) with its transports; the verbs seam
//! (braid-verbs) through which applications and middleware drive an RNIC; applications.

pub mod api;
pub mod simulation;

pub use api::{Column, Results, ScenarioError, Table};
pub use simulation::{scenario_json_schema, Simulation};
