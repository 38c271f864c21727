//! The reference flow's sliding window of samples and its exact percentile.

use std::collections::{BTreeMap, VecDeque};

/// A sliding window of reference samples with an exact percentile.
#[derive(Debug, Default)]
pub(crate) struct Window {
    order: VecDeque<u64>,
    sorted: BTreeMap<u64, u32>,
    cap: usize,
}

impl Window {
    pub(crate) fn new(cap: usize) -> Self {
        Window {
            cap,
            ..Default::default()
        }
    }
    pub(crate) fn push(&mut self, x: u64) {
        if self.order.len() == self.cap {
            if let Some(old) = self.order.pop_front() {
                if let Some(c) = self.sorted.get_mut(&old) {
                    *c -= 1;
                    if *c == 0 {
                        self.sorted.remove(&old);
                    }
                }
            }
        }
        self.order.push_back(x);
        *self.sorted.entry(x).or_default() += 1;
    }
    /// The nearest-rank `q` quantile (the ceil(q·n)-th smallest sample).
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        let n = self.order.len();
        if n == 0 {
            return 0;
        }
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        // Walk down from the largest: the answer is the (n - rank + 1)-th largest.
        let mut above = n - rank + 1;
        for (&v, &c) in self.sorted.iter().rev() {
            if c as usize >= above {
                return v;
            }
            above -= c as usize;
        }
        0
    }
}
