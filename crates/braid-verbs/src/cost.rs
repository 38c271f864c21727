//! Host CPU cost: what verbs calls and middleware work cost the tenant's thread.
//!
//! A backend charges every verbs call it serves ([`Work::Post`], [`Work::Poll`], ...) and a
//! middleware charges its own bookkeeping with [`crate::Verbs::charge`]. The simulator turns the
//! work into time under a [`CpuCost`] model: the tenant's thread is busy for that long, so what it
//! posts reaches the NIC later and its `now()` advances. A real backend measures instead.
//!
//! The defaults come from UCX's cost model of ConnectX NICs through verbs (sources in
//! `docs/middleware.md`): a post is 75 ns to build the WQE plus 40 ns for the doorbell, a
//! completion 20 ns to process, a copy ~12 GB/s.

/// A unit of host CPU work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// One ibv_post_send / ibv_post_recv call (one doorbell).
    Post,
    /// One ibv_post_send of a list of `n` WRs: the provider writes `n` WQEs and rings the
    /// doorbell once. Costs one post plus `n - 1` WQEs at `wr_build_ns` (UCX's `wqe_post`, the
    /// per-WQE part of `post_ns`; the rest of `post_ns` is the doorbell).
    PostList(u32),
    /// One ibv_poll_cq call that returned `n` completions.
    Poll(u32),
    /// A work request built by middleware (split, rewritten, injected).
    WrBuilt(u32),
    /// Bytes copied by the CPU.
    Copy(u64),
    /// Any other verbs call (create, modify, query, arm, register).
    Control,
    /// Work measured directly, in nanoseconds.
    Ns(u64),
}

/// The cost model, in nanoseconds (floats: sub-nanosecond per-byte costs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuCost {
    pub post_ns: f64,
    pub poll_ns: f64,
    pub poll_cqe_ns: f64,
    pub wr_build_ns: f64,
    /// Bytes per nanosecond a copy moves (10.0 = 10 GB/s).
    pub copy_bytes_per_ns: f64,
    pub control_ns: f64,
}

impl Default for CpuCost {
    fn default() -> Self {
        CpuCost {
            post_ns: 115.0,
            poll_ns: 40.0,
            poll_cqe_ns: 20.0,
            wr_build_ns: 75.0,
            copy_bytes_per_ns: 12.0,
            control_ns: 1000.0,
        }
    }
}

impl CpuCost {
    /// A model in which nothing costs anything (runs without CPU accounting).
    pub const FREE: CpuCost = CpuCost {
        post_ns: 0.0,
        poll_ns: 0.0,
        poll_cqe_ns: 0.0,
        wr_build_ns: 0.0,
        copy_bytes_per_ns: f64::INFINITY,
        control_ns: 0.0,
    };

    /// The cost of `w` in picoseconds.
    pub fn ps(&self, w: Work) -> u64 {
        let ns = match w {
            Work::Post => self.post_ns,
            Work::PostList(n) => self.post_ns + self.wr_build_ns * n.saturating_sub(1) as f64,
            Work::Poll(n) => self.poll_ns + self.poll_cqe_ns * n as f64,
            Work::WrBuilt(n) => self.wr_build_ns * n as f64,
            Work::Copy(b) => b as f64 / self.copy_bytes_per_ns,
            Work::Control => self.control_ns,
            Work::Ns(n) => n as f64,
        };
        (ns * 1000.0).round() as u64
    }

    pub fn is_free(&self) -> bool {
        *self == Self::FREE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_convert_to_picoseconds() {
        let c = CpuCost::default();
        assert_eq!(c.ps(Work::Post), 115_000);
        assert_eq!(c.ps(Work::Poll(4)), 120_000);
        // A list of 17 WRs: 17 WQEs (75 ns) and one doorbell (40 ns), against 17 x 115 ns.
        assert_eq!(c.ps(Work::PostList(17)), 1_315_000);
        assert_eq!(c.ps(Work::PostList(1)), c.ps(Work::Post));
        assert_eq!(c.ps(Work::Copy(12_000)), 1_000_000);
        assert_eq!(CpuCost::FREE.ps(Work::Copy(1 << 30)), 0);
        assert_eq!(CpuCost::FREE.ps(Work::Post), 0);
    }
}
