//! Traces a run can keep besides its tables: the congestion controllers' state over time
//! (`measure.cc`, [`cc`]) and packet captures in the pcap format (`measure.pcap`, [`pcap`],
//! frames built by [`frame`]).
//!
//! Both only read the simulation: a run gives the same results with and without them. The hot
//! path pays one check of an `Option` per packet hop when nothing is traced.

pub mod cc;
pub mod frame;
pub mod pcap;
pub mod ports;

use crate::api::ScenarioError;
use crate::measure::SharedLog;
use crate::scenario::Scenario;
use crate::world::World;
use braid_engine::Time;

/// Once the run's flows exist: checks the flow ids `measure.cc` and `measure.pcap` name, and
/// installs the congestion-control sampler.
pub(crate) fn finish(
    sc: &Scenario,
    world: &mut World,
    log: &SharedLog,
) -> Result<(), ScenarioError> {
    let n_flows = log.borrow().flows.len();
    if let Some(t) = world.measure.pcap.as_mut() {
        t.set_flows(n_flows, log.clone())?;
    }
    let sampler = sc.measure.cc.build(
        sc.measure.interval.0,
        n_flows,
        world.hosts.len(),
        log.clone(),
    )?;
    world.measure.cc = sampler.map(Box::new);
    Ok(())
}

impl World {
    /// Samples the congestion controllers at `now` (on `measure.cc`'s grid).
    pub(crate) fn sample_cc(&mut self, now: Time) {
        if let Some(mut s) = self.measure.cc.take() {
            if now.is_multiple_of(s.interval) {
                s.sample(now, self);
            }
            self.measure.cc = Some(s);
        }
    }
}
