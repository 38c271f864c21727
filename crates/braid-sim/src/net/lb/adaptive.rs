//! Adaptive routing: each packet goes to the candidate port with the least queued bytes, as
//! switch adaptive routing does (NVIDIA Spectrum-X compares its egress queues per packet; the
//! exact hardware rule is not public). The comparison follows DRILL (Ghorbani et al., SIGCOMM
//! '17): `samples` random candidates plus the port remembered as least loaded for the group,
//! DRILL(d = 2, m = 1) being the paper's recommended setting; the memory is what keeps the
//! choice stable (with sampling alone the paper shows unequal service rates go unstable).
//! `samples = 0` compares every candidate. `hysteresis` is the margin by which another port's
//! queue must be shorter before the remembered port is left (0: strictly shorter, DRILL's rule).

use super::{LbKind, LbSite, LoadBalancer, Pick};
use braid_engine::RngStream;
use braid_topo::units::Bytes;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `switch.lb = { kind = "adaptive", samples = 2, memory = true, hysteresis = "0B" }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[schemars(inline)]
pub struct AdaptiveLb {
    /// Random candidates compared per packet (DRILL's d = 2); 0 = all of the group.
    pub samples: u32,
    /// Also compare the port chosen last for the group (DRILL's m = 1).
    pub memory: bool,
    /// Bytes by which another queue must be shorter than the remembered port's to move.
    pub hysteresis: Bytes,
}

impl Default for AdaptiveLb {
    fn default() -> Self {
        AdaptiveLb {
            samples: 2,
            memory: true,
            hysteresis: Bytes(0),
        }
    }
}

impl LbKind for AdaptiveLb {
    fn per_packet(&self) -> Option<&'static str> {
        Some("adaptive")
    }
    fn build(&self, site: &LbSite<'_>) -> Result<Option<Box<dyn LoadBalancer>>, String> {
        if self.hysteresis.0 > 0 && !self.memory {
            return Err(
                "switch.lb.hysteresis: needs memory = true (the margin is kept against the remembered port)"
                    .into(),
            );
        }
        Ok(Some(Box::new(Adaptive {
            cfg: self.clone(),
            rng: RngStream::new(site.seed, "lb-adaptive", &[site.switch as u64]),
            best: Vec::new(),
            sample: Vec::new(),
        })))
    }
}

struct Adaptive {
    cfg: AdaptiveLb,
    rng: RngStream,
    /// Per group id: the port last chosen (u16::MAX: none yet).
    best: Vec<u16>,
    sample: Vec<usize>,
}

impl LoadBalancer for Adaptive {
    fn pick(&mut self, at: &Pick<'_>) -> usize {
        let n = at.candidates.len();
        let depth = |i: usize| at.ports[at.candidates[i] as usize].bytes;
        // The sampled candidates (distinct; every one when `samples` is 0 or covers the group).
        self.sample.clear();
        let d = self.cfg.samples as usize;
        if d == 0 || d >= n {
            self.sample.extend(0..n);
        } else {
            // A partial Fisher-Yates shuffle of the indices: d distinct draws.
            let mut idx: Vec<usize> = (0..n).collect();
            for k in 0..d {
                let j = k + self.rng.below((n - k) as u64) as usize;
                idx.swap(k, j);
            }
            self.sample.extend_from_slice(&idx[..d]);
        }
        let mut choice = self.sample[0];
        for &i in &self.sample[1..] {
            if depth(i) < depth(choice) {
                choice = i;
            }
        }
        let g = at.gid as usize;
        if self.cfg.memory {
            if g >= self.best.len() {
                self.best.resize(g + 1, u16::MAX);
            }
            let kept = self.best[g];
            if let Some(m) = at.candidates.iter().position(|&p| p == kept) {
                // The remembered port stays unless the best sample beats it by the margin.
                if depth(choice) + self.cfg.hysteresis.0 >= depth(m) {
                    choice = m;
                }
            }
            self.best[g] = at.candidates[choice];
        }
        choice
    }
}
