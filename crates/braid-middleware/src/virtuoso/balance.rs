//! Path monitor and load balancer: capacity estimates, the split policies behind one trait, and
//! the per-path trunk size of the lossy mode.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The split policy, as a scenario names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Equation 1 of the paper: data_i = size × cap_i / Σ cap.
    Capacity,
    /// The same share for every path that is up.
    Equal,
    /// Chunks handed to whichever path has a free slot (a path gets the next chunk when one of
    /// its own completes): load follows completions, not estimates.
    Completion,
}

impl Policy {
    /// The policy's balancer.
    pub fn balancer(self) -> Box<dyn Balancer> {
        match self {
            Policy::Capacity => Box::new(CapacityProportional),
            Policy::Equal => Box::new(Equal),
            Policy::Completion => Box::new(CompletionDriven),
        }
    }
}

/// A load-balancing policy: how much of a message each path carries. A plug-in, as the paper
/// wants: the decomposer asks it and nothing else.
pub trait Balancer {
    fn name(&self) -> &'static str;
    /// Bytes per path for a message of `len` bytes. `cap[i]` is path i's capacity estimate in
    /// bit/s (None: not known yet); `up[i]` whether it can carry data. The shares sum to `len`
    /// and paths that are down get 0. Not called for dynamic policies.
    fn split(&self, len: u64, cap: &[Option<f64>], up: &[bool]) -> Vec<u64>;
    /// Dynamic: no split up front; the decomposer hands out chunks as paths free up.
    fn dynamic(&self) -> bool {
        false
    }
}

/// Splits `len` in proportion to `weights` (only where `up`), rounding so the parts sum to
/// `len`: the remainder goes to the largest weights first.
pub fn proportional(len: u64, weights: &[f64], up: &[bool]) -> Vec<u64> {
    let n = weights.len();
    let total: f64 = (0..n).filter(|&i| up[i]).map(|i| weights[i]).sum();
    let mut out = vec![0u64; n];
    if total <= 0.0 {
        return out;
    }
    let mut given = 0;
    for i in 0..n {
        if up[i] {
            out[i] = ((len as f64) * weights[i] / total).floor() as u64;
            given += out[i];
        }
    }
    let mut order: Vec<usize> = (0..n).filter(|&i| up[i]).collect();
    order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
    let mut k = 0;
    while given < len {
        out[order[k % order.len()]] += 1;
        given += 1;
        k += 1;
    }
    out
}

pub struct CapacityProportional;

impl Balancer for CapacityProportional {
    fn name(&self) -> &'static str {
        "capacity"
    }
    fn split(&self, len: u64, cap: &[Option<f64>], up: &[bool]) -> Vec<u64> {
        // A path not measured yet counts as the mean of the measured ones (1 if none is).
        let known: Vec<f64> = cap.iter().flatten().copied().filter(|c| *c > 0.0).collect();
        let mean = if known.is_empty() {
            1.0
        } else {
            known.iter().sum::<f64>() / known.len() as f64
        };
        let w: Vec<f64> = cap
            .iter()
            .map(|c| c.filter(|c| *c > 0.0).unwrap_or(mean))
            .collect();
        proportional(len, &w, up)
    }
}

pub struct Equal;

impl Balancer for Equal {
    fn name(&self) -> &'static str {
        "equal"
    }
    fn split(&self, len: u64, cap: &[Option<f64>], up: &[bool]) -> Vec<u64> {
        proportional(len, &vec![1.0; cap.len()], up)
    }
}

pub struct CompletionDriven;

impl Balancer for CompletionDriven {
    fn name(&self) -> &'static str {
        "completion"
    }
    fn split(&self, len: u64, cap: &[Option<f64>], up: &[bool]) -> Vec<u64> {
        Equal.split(len, cap, up)
    }
    fn dynamic(&self) -> bool {
        true
    }
}

/// One path's capacity estimate: set by a probe, then moved by completion-time samples.
#[derive(Debug, Clone, Copy, Default)]
pub struct Estimator {
    pub bps: Option<f64>,
    pub samples: u64,
}

impl Estimator {
    /// A probe of `bytes` that took `ps`: replaces the estimate.
    pub fn probe(&mut self, bytes: u64, ps: u64) {
        if ps > 0 {
            self.bps = Some(bytes as f64 * 8.0 * 1e12 / ps as f64);
            self.samples += 1;
        }
    }
    /// A completion-time sample: `bytes` delivered in `ps` of the path's busy time.
    pub fn sample(&mut self, bytes: u64, ps: u64, weight: f64) {
        if ps == 0 {
            return;
        }
        let s = bytes as f64 * 8.0 * 1e12 / ps as f64;
        self.bps = Some(match self.bps {
            Some(b) => b + weight * (s - b),
            None => s,
        });
        self.samples += 1;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrunkPhase {
    /// Doubling after every success (slow start).
    Binary,
    /// Adding `step` after every success, after a back-off.
    Linear,
    /// Converged: a linear step failed; the size below it is kept.
    Hold,
}

/// The per-path WR size of the lossy mode (the paper's §3.5 congestion avoidance).
#[derive(Debug, Clone, Copy)]
pub struct Trunk {
    pub size: u64,
    pub phase: TrunkPhase,
    pub step: u64,
    pub min: u64,
    pub max: u64,
    /// RetryExceeded completions seen.
    pub failures: u64,
    /// The largest size that completed.
    pub best: u64,
}

impl Trunk {
    pub fn new(init: u64, step: u64, max: u64) -> Self {
        Trunk {
            size: init,
            phase: TrunkPhase::Binary,
            step,
            min: step.min(init).max(1),
            max,
            failures: 0,
            best: 0,
        }
    }
    /// A WR of `len` bytes completed. Only full-size WRs grow the trunk (a short tail says
    /// nothing about the limit).
    pub fn success(&mut self, len: u64) {
        self.best = self.best.max(len);
        if len < self.size {
            return;
        }
        self.size = match self.phase {
            TrunkPhase::Binary => self.size.saturating_mul(2),
            TrunkPhase::Linear => self.size + self.step,
            TrunkPhase::Hold => self.size,
        }
        .min(self.max);
    }
    /// A WR of `len` bytes failed with RetryExceeded: back to the previous size, then linear.
    pub fn failure(&mut self, len: u64) {
        self.failures += 1;
        let at = len.max(1);
        let (size, phase) = match self.phase {
            // The size before the last doubling.
            TrunkPhase::Binary => (at / 2, TrunkPhase::Linear),
            // The size before the last step: the limit found; keep it.
            TrunkPhase::Linear => (at.saturating_sub(self.step), TrunkPhase::Hold),
            // The fabric got worse: search again, linearly, from half.
            TrunkPhase::Hold => (at / 2, TrunkPhase::Linear),
        };
        self.size = size.clamp(self.min, self.max);
        self.phase = phase;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equation_one_splits_in_proportion_to_capacity() {
        let cap = [Some(10e9), Some(20e9), Some(40e9)];
        let s = CapacityProportional.split(7_000_000, &cap, &[true; 3]);
        assert_eq!(s, vec![1_000_000, 2_000_000, 4_000_000]);
        // A path that is down gets nothing; the rest still sums to the size.
        let s = CapacityProportional.split(1001, &cap, &[true, false, true]);
        assert_eq!(s[1], 0);
        assert_eq!(s.iter().sum::<u64>(), 1001);
        assert!(s[2] > 3 * s[0], "{s:?}");
        // Unknown capacities count as the mean of the known ones.
        let s = CapacityProportional.split(900, &[Some(1e9), None, Some(2e9)], &[true; 3]);
        assert_eq!(s, vec![200, 300, 400]);
        let s = Equal.split(10, &cap, &[true; 3]);
        assert_eq!(s.iter().sum::<u64>(), 10);
        assert!(s.iter().all(|x| *x == 3 || *x == 4));
    }

    #[test]
    fn trunk_doubles_backs_off_then_grows_linearly_and_holds() {
        let mut t = Trunk::new(64, 16, 1 << 20);
        t.success(64);
        t.success(128);
        assert_eq!(t.size, 256);
        t.success(10); // a short tail does not grow it
        assert_eq!(t.size, 256);
        t.failure(256);
        assert_eq!((t.size, t.phase), (128, TrunkPhase::Linear));
        t.success(128);
        t.success(144);
        assert_eq!(t.size, 160);
        t.failure(160);
        assert_eq!((t.size, t.phase), (144, TrunkPhase::Hold));
        t.success(144);
        assert_eq!(t.size, 144);
        assert_eq!(t.failures, 2);
    }

    #[test]
    fn estimates_follow_probes_and_samples() {
        let mut e = Estimator::default();
        e.probe(1_000_000, 1_000_000_000); // 1 MB in 1 ms: 8 Gbps
        assert!((e.bps.unwrap() - 8e9).abs() < 1.0);
        e.sample(1_000_000, 2_000_000_000, 0.5); // 4 Gbps, half weight
        assert!((e.bps.unwrap() - 6e9).abs() < 1.0);
    }
}
