//! `[middleware]` and the tenants' verbs stacks built from it: each mechanism's config (in
//! braid-middleware) is its factory; this is where the simulator hands them their hosts.

use crate::api::{ConfigError, ScenarioError};
use crate::build::{err, join};
use crate::world::{Ev, World};
use braid_engine::EventQueue;
use braid_middleware::drum::fabric_model::FabricSlot;
use braid_middleware::{MiddlewareEntry, MiddlewareSpec};
use braid_verbs::rendezvous::SharedBoard as Rendezvous;
use braid_verbs::{HostCtx, Middleware};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
/// `[middleware]`: the verbs stacks of the run's tenants.
pub struct MiddlewareConfig {
    /// The verbs stack every tenant gets, top to bottom: mechanism names (`"raw"`) or tables
    /// (`{ kind = "perf", sub_wr = "16KB" }`).
    pub default: Vec<MiddlewareEntry>,
    /// Per-host overrides, keyed by host index.
    pub per_host: std::collections::BTreeMap<String, Vec<MiddlewareEntry>>,
}

impl Default for MiddlewareConfig {
    fn default() -> Self {
        Self {
            default: vec![MiddlewareEntry(MiddlewareSpec::Raw(Default::default()))],
            per_host: Default::default(),
        }
    }
}

impl MiddlewareConfig {
    /// Range checks of `[middleware]` (keys relative to it); whether the hosts exist is checked
    /// against the built topology.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for h in self.per_host.keys() {
            if h.parse::<u32>().is_err() {
                return Err(ConfigError::new(
                    format!("per_host.{h}"),
                    "keys are host indices, e.g. \"3\"",
                ));
            }
        }
        Ok(())
    }

    /// The stack of a tenant of host `h` without one of its own, and its key path: the host's
    /// `per_host` entry, else `default`.
    pub fn stack_for(&self, h: u32) -> (&Vec<MiddlewareEntry>, String) {
        let key = h.to_string();
        match self.per_host.get(&key) {
            Some(m) => (m, format!("middleware.per_host.{key}")),
            None => (&self.default, "middleware.default".to_string()),
        }
    }
}

/// Builds tenants' verbs stacks from their middleware entries, host by host: each mechanism's
/// config is its factory, and one [`HostCtx`] per host lets the tenants of a host share their
/// mechanisms' host agent. [`StackBuilder::finish`] installs the agents in slot 0.
pub(crate) struct StackBuilder {
    hosts: BTreeMap<u32, HostCtx>,
    /// The run's rendezvous board, which host agents share with the applications.
    board: Rendezvous,
    /// The fabric's links for the agents that ask for them (DRUM's fabric model, offered to every
    /// host as a service; filled in `finish`).
    fabric: FabricSlot,
}

impl StackBuilder {
    pub fn new(board: Rendezvous) -> Self {
        StackBuilder {
            hosts: BTreeMap::new(),
            board,
            fabric: Default::default(),
        }
    }

    /// The stack of tenant `tenant` on host `h`; `path` names the entries in errors.
    pub fn build(
        &mut self,
        world: &World,
        h: u32,
        tenant: u32,
        entries: &[MiddlewareEntry],
        path: &str,
    ) -> Result<Vec<Box<dyn Middleware>>, ScenarioError> {
        let (board, fabric) = (&self.board, &self.fabric);
        let ctx = self.hosts.entry(h).or_insert_with(|| {
            HostCtx::new(h, world.hosts[h as usize].caps.clone())
                .with_shares(world.hosts[h as usize].nic.mem.shares.clone())
                .with_seed(world.seed)
                .with_board(board.clone())
                .with_service(fabric.clone())
        });
        entries
            .iter()
            .enumerate()
            .map(|(j, e)| {
                e.0.factory().build(ctx, tenant).map_err(|b| {
                    err(
                        join(&format!("{path}[{j}]"), &b.key),
                        format!("{} (on host {h})", b.message),
                    )
                })
            })
            .collect()
    }

    /// Puts each host's agent layers into its agent slot and starts it first.
    pub fn finish(self, world: &mut World, queue: &mut EventQueue<Ev>) {
        let wanting: Vec<u32> = self
            .hosts
            .iter()
            .filter(|(_, c)| c.service_wanted::<FabricSlot>())
            .map(|(&h, _)| world.hosts[h as usize].node)
            .collect();
        if !wanting.is_empty() {
            *self.fabric.borrow_mut() = Some(crate::world::fabric_links_for(world, &wanting));
        }
        for (h, mut ctx) in self.hosts {
            let agents = ctx.take_agents();
            if !agents.is_empty() {
                world.hosts[h as usize].apps[0].stack = agents;
                queue.schedule(0, Ev::AppStart { host: h, app: 0 });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_host_keys_must_be_host_indices() {
        let mut m = MiddlewareConfig::default();
        assert_eq!(m.validate(), Ok(()));
        m.per_host.insert("3".into(), vec![]);
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.stack_for(3).1, "middleware.per_host.3");
        assert_eq!(m.stack_for(2).1, "middleware.default");
        m.per_host.insert("tor0".into(), vec![]);
        let e = m.validate().unwrap_err();
        assert_eq!(e.under("middleware").path, "middleware.per_host.tor0");
    }
}
