//! The client and the server of one `[[apps]]` entry: its kind's config (in braid-apps, read
//! from the entry's keys) builds them; the simulator provides the places and the run's seeded
//! random streams.

use crate::config::AppSpec;
use braid_engine::RngStream;
use std::rc::Rc;

/// Where an application's two ends live and what they share.
pub struct Ends {
    /// Index of the `[[apps]]` entry (names its random streams).
    pub index: usize,
    pub seed: u64,
    pub flow: u32,
    /// Its first connection id on the board.
    pub conn0: u32,
    pub meter: crate::apps::SharedMeter,
    pub rdv: crate::apps::Rendezvous,
    pub server_base: u64,
    pub client_base: u64,
    /// An attacker's victim: the connections of the app its `victim` names.
    pub victim: Option<braid_apps::attack::Victim>,
}

/// The run's named streams (`RngStream`: the run's seed, a name, indices), as the apps draw.
struct SimDraws {
    seed: u64,
}

struct SimDraw(RngStream);

impl braid_apps::Draw for SimDraw {
    fn uniform(&mut self) -> f64 {
        self.0.uniform()
    }
    fn bernoulli(&mut self, p: f64) -> bool {
        self.0.bernoulli(p)
    }
}

impl braid_apps::Draws for SimDraws {
    fn stream(&self, name: &str, indices: &[u64]) -> Box<dyn braid_apps::Draw> {
        Box::new(SimDraw(RngStream::new(self.seed, name, indices)))
    }
}

/// The server (on `dst`) and the client (on `src`) of `a`, or the key its kind refuses
/// (`Scenario::validate` has refused it already for a scenario read from a file).
pub fn build(a: &AppSpec, e: Ends) -> Result<braid_apps::AppPair, braid_apps::KeyError> {
    let config = a.kind.config(&a.keys())?;
    Ok(config.build(braid_apps::AppEnds {
        index: e.index,
        flow: e.flow,
        conn0: e.conn0,
        meter: e.meter,
        rdv: e.rdv,
        server_base: e.server_base,
        client_base: e.client_base,
        victim: e.victim,
        draws: Rc::new(SimDraws { seed: e.seed }),
    }))
}
