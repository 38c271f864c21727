//! The agent's receive buffers on the shared QPs, and where they live in the global buffer.
//!
//! The global buffer's lower half holds the tenants' slices; its upper half the receive buffers
//! ("bounce" buffers: a SEND's payload lands there and is copied to the tenant's receive), and
//! its last [`SCRATCH`] bytes the agent's scratch area (inline data). Each receive buffer posted
//! on a shared QP has a slot of its own (`bounce_size` bytes), so that payloads that arrive
//! before the poller copies them do not overwrite each other; the slot's index travels in the
//! receive's `wr_id`. Shared QP number `p` (in creation order) uses slots
//! `(p mod per) * recvs_per_pipe ..`, `per` being how many pipes' worth of slots the area holds
//! (beyond that, pipes share slots: harmless while memory contents are not tracked, and a
//! limit stated in docs/drum-agent.md when they are).
//!
//! The slots keep bytes only once a tenant of the host registered a tracked region (the agent
//! then registers each pipe's slots, and its scratch area, as tracked regions of its own): a
//! simulator allocates the bytes of tracked memory, so runs that check no data pay nothing.

use super::state::SCRATCH;
use braid_verbs::*;

/// Receive buffers on pipes carry this bit in their wr_id, and their slot in the low 32 bits.
pub(crate) const RECV_BIT: u64 = 1 << 63;

/// Where the agent's buffers are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    lkey: u32,
    base: u64,
    slots: u64,
    bounce: u64,
    recvs: u64,
    /// The scratch area's address.
    pub scratch: u64,
}

impl Layout {
    pub fn new(g: &MemoryRegion, bounce: u64, recvs: u32) -> Self {
        let base = g.addr + g.len / 2;
        let scratch = g.addr + g.len - SCRATCH;
        Layout {
            lkey: g.lkey,
            base,
            slots: ((scratch - base) / bounce).max(1),
            bounce,
            recvs: recvs as u64,
            scratch,
        }
    }

    fn per(&self) -> u64 {
        self.slots / self.recvs
    }

    /// Address of slot `k` of pipe `pipe`.
    pub fn slot(&self, pipe: u32, k: u32) -> u64 {
        let per = self.per();
        let i = if per >= 1 {
            (pipe as u64 % per) * self.recvs + k as u64
        } else {
            k as u64 % self.slots
        };
        self.base + i * self.bounce
    }

    /// The slots of pipe `pipe`: (address, length), contiguous.
    pub fn pipe_range(&self, pipe: u32) -> (u64, u64) {
        if self.per() >= 1 {
            (self.slot(pipe, 0), self.recvs * self.bounce)
        } else {
            (self.base, self.slots * self.bounce)
        }
    }

    /// The receive WR for slot `k` of pipe `pipe`.
    pub fn recv(&self, pipe: u32, k: u32) -> RecvWr {
        RecvWr {
            wr_id: RECV_BIT | k as u64,
            sg_list: vec![Sge {
                addr: self.slot(pipe, k),
                length: self.bounce as u32,
                lkey: self.lkey,
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_distinct_inside_the_upper_half_and_below_the_scratch_area() {
        let g = MemoryRegion {
            addr: 1 << 40,
            len: 64 << 20,
            lkey: 1,
            rkey: 2,
        };
        let l = Layout::new(&g, 64 << 10, 16);
        let mut seen = std::collections::BTreeSet::new();
        // (32 MiB - 64 KiB) / 64 KiB = 511 slots: 31 pipes of 16 without sharing.
        for p in 0..31 {
            for k in 0..16 {
                let a = l.slot(p, k);
                assert!(a >= g.addr + g.len / 2 && a + (64 << 10) <= l.scratch);
                assert!(seen.insert(a), "pipe {p} slot {k}");
            }
            let (a, n) = l.pipe_range(p);
            assert_eq!((a, n), (l.slot(p, 0), 16 * (64 << 10)));
        }
        assert_eq!(
            l.slot(31, 3),
            l.slot(0, 3),
            "beyond that, pipes share slots"
        );
        assert_eq!(l.recv(5, 7).wr_id, RECV_BIT | 7);
        assert_eq!(l.scratch, g.addr + g.len - SCRATCH);
    }
}
