//! Tenant classification (PeRF §3, artifact `perf.c:919-1062`): a tenant is a process.
//!
//! - **bandwidth-intensive** once it has posted a non-READ message of at least `large_msg`
//!   (sticky, as the artifact's `bw_send`);
//! - otherwise **delay-sensitive** while its deepest send queue, sampled every
//!   `sample_interval` over the last `window`, stays below `delay_depth` WRs and below
//!   `delay_bytes` outstanding;
//! - otherwise **message-intensive**.
//!
//! New tenants start delay-sensitive; an idle one returns to delay-sensitive (or stays
//! bandwidth-intensive) and forgets its samples.

use std::collections::VecDeque;

/// The three classes of the paper's Table "Application Type".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// D_App: small messages, sparse (one outstanding).
    DelaySensitive,
    /// M_App: small messages in batches.
    MessageIntensive,
    /// B_App: large messages.
    BandwidthIntensive,
}

impl Class {
    /// The value the `class` counter reports (0 = D, 1 = M, 2 = B).
    pub fn code(self) -> f64 {
        match self {
            Class::DelaySensitive => 0.0,
            Class::MessageIntensive => 1.0,
            Class::BandwidthIntensive => 2.0,
        }
    }
    /// Delay-sensitive or message-intensive: what the LMSE protects.
    pub fn is_small(self) -> bool {
        self != Class::BandwidthIntensive
    }
}

/// One sample: the tenant's deepest send queue (WRs) and the bytes outstanding on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sample {
    pub depth: u32,
    pub bytes: u64,
}

/// A tenant's sampling window and the thresholds it is judged by.
#[derive(Debug, Clone)]
pub struct Classifier {
    samples: VecDeque<Sample>,
    capacity: usize,
    delay_depth: u32,
    delay_bytes: u64,
}

impl Classifier {
    /// `capacity` samples (window / interval), judged against the thresholds.
    pub fn new(capacity: usize, delay_depth: u32, delay_bytes: u64) -> Self {
        Classifier {
            samples: VecDeque::with_capacity(capacity.min(4096)),
            capacity: capacity.max(1),
            delay_depth,
            delay_bytes,
        }
    }

    /// Adds a sample, dropping the oldest beyond the window.
    pub fn push(&mut self, s: Sample) {
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(s);
    }

    /// Forgets the samples (an idle tenant).
    pub fn clear(&mut self) {
        self.samples.clear();
    }

    /// The deepest queue and the most bytes over the window.
    pub fn peak(&self) -> Sample {
        self.samples.iter().fold(Sample::default(), |a, s| Sample {
            depth: a.depth.max(s.depth),
            bytes: a.bytes.max(s.bytes),
        })
    }

    /// The class of a tenant with these samples; `bw_send`: it has posted a large non-READ.
    pub fn class(&self, bw_send: bool) -> Class {
        if bw_send {
            return Class::BandwidthIntensive;
        }
        let p = self.peak();
        if p.depth < self.delay_depth && p.bytes < self.delay_bytes {
            Class::DelaySensitive
        } else {
            Class::MessageIntensive
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparse_tenant_is_delay_sensitive_a_batching_one_message_intensive() {
        let mut c = Classifier::new(200, 5, 1024);
        assert_eq!(c.class(false), Class::DelaySensitive, "new tenants start D");
        for _ in 0..50 {
            c.push(Sample {
                depth: 1,
                bytes: 16,
            });
        }
        assert_eq!(c.class(false), Class::DelaySensitive);
        c.push(Sample {
            depth: 5,
            bytes: 80,
        });
        assert_eq!(
            c.class(false),
            Class::MessageIntensive,
            "5 WRs deep is not < 5"
        );
        let mut c = Classifier::new(200, 5, 1024);
        c.push(Sample {
            depth: 2,
            bytes: 1024,
        });
        assert_eq!(
            c.class(false),
            Class::MessageIntensive,
            "1024 B outstanding is not < 1024"
        );
        assert_eq!(c.class(true), Class::BandwidthIntensive);
    }

    #[test]
    fn the_window_forgets_old_bursts() {
        let mut c = Classifier::new(4, 5, 1024);
        c.push(Sample {
            depth: 32,
            bytes: 512,
        });
        assert_eq!(c.class(false), Class::MessageIntensive);
        for _ in 0..3 {
            c.push(Sample {
                depth: 1,
                bytes: 16,
            });
        }
        assert_eq!(
            c.class(false),
            Class::MessageIntensive,
            "the burst is still in the window"
        );
        c.push(Sample {
            depth: 1,
            bytes: 16,
        });
        assert_eq!(
            c.class(false),
            Class::DelaySensitive,
            "4 samples later it is gone"
        );
    }
}
