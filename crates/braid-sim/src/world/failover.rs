//! Fast failover: when a link goes down, the switches stop routing over it once the failure is
//! detected, instead of black-holing what their routes send there for the rest of the run.
//!
//! Detection is BFD's (RFC 5880): a session declares its neighbour down after `multiplier`
//! missed hellos; the default, 150 ms, is Cisco NX-OS's default BFD timers (50 ms transmit and
//! receive intervals, multiplier 3: Nexus 7000 NX-OS Interfaces Configuration Guide, Release
//! 5.x, Table 5-1). Until then packets routed onto the dead link are lost (`drops_link_down`).
//! On detection every switch's shortest-path routes are recomputed over the links detected up:
//! the switches at the failed link drop its port from their groups, and the others stop sending
//! towards a switch that can no longer reach the destination (routing reconvergence, taken as
//! instantaneous after detection). A link that comes back is used again after the same delay.
//! Static routes (`[[routes]]`) are the operator's and are installed again as configured.

use super::{port_at, Ev, World};
use braid_engine::{EventQueue, Time};
use braid_topo::units::Duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `switch.failover`: reroute around failed links after `detect` (absent: links that go down
/// black-hole their traffic, as switches without BFD do).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FailoverConfig {
    /// Time from a link's failure (or repair) to the switches rerouting.
    pub detect: Duration,
}

impl Default for FailoverConfig {
    fn default() -> Self {
        FailoverConfig {
            detect: Duration(150 * braid_engine::time::MS),
        }
    }
}

impl World {
    /// A link went down or came up (`Ev::LinkState`, not yet detected).
    pub(super) fn link_changed(&mut self, now: Time, link: u32, up: bool, q: &mut EventQueue<Ev>) {
        let (a, pa, b, pb) = self.links[link as usize];
        self.ports[port_at(&self.hot, a, pa)].up = up;
        self.ports[port_at(&self.hot, b, pb)].up = up;
        self.measure.link_change(now, link, up);
        if let Some(f) = &self.sw.failover {
            q.schedule(
                now + f.detect.0,
                Ev::LinkState {
                    link,
                    up,
                    detected: true,
                },
            );
        }
    }

    /// The failure (or repair) of `link` is detected: reroute if the link is still in that state
    /// (a link back up before the detection time was never declared down).
    pub(super) fn link_detected(&mut self, link: u32, up: bool) {
        let (a, pa, ..) = self.links[link as usize];
        if self.ports[port_at(&self.hot, a, pa)].up != up {
            return;
        }
        // Already in that state (detected before).
        if self.link_detected_down[link as usize] != up {
            return;
        }
        self.link_detected_down[link as usize] = !up;
        self.reroute();
    }

    /// Recomputes the shortest-path routes over the links detected up and installs the static
    /// routes again.
    fn reroute(&mut self) {
        self.build_routes(&mut crate::progress::Progress::none())
            .expect("routes were built once from the same graph");
        for s in &mut self.switches {
            s.src_routes.clear();
        }
        if let Some((routes, names)) = self.static_routes.take() {
            self.install_routes(&routes, &names)
                .expect("static routes were installed once from the same scenario");
        }
        self.path_capacity.clear();
        self.counters.reroutes += 1;
    }
}
