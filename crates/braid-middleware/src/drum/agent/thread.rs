//! The agent's software path as time (`path_delay`): its threads each do one thing at a time.
//!
//! The paper's agent is software on the host's cores (§IV): the IO monitor converts each WR
//! (`verb_convertor`: the connection id in and out of `wr_id` and the immediate data) and maps
//! its memory (`qp_map`); the scheduler fetches it from the pool and posts it to a shared QP;
//! the poller, busy-polling on a core of its own, takes each completion off the shared CQ and
//! hands it to its connection's CQ. Each costs time on a thread that serves every connection of
//! the host, so a WR waits behind the WRs of the connections ahead of it in the round robin:
//! DRUM's foreground latency in the paper's Fig. 10 grows with the background's connections
//! (8.8 / 14.5 / 24.0 µs at cc = 20 / 50 / 100, ~0.19 µs per connection).
//!
//! Two threads: the IO monitor and scheduler on one (the conversion is done as the scheduler
//! fetches a WR), the poller on its own. A thread that is busy takes no new work until it is
//! free; the agent's tick wakes it then. Costs per WR and per completion: `docs/drum-agent.md`.

/// One of the agent's threads: when it is free again, and how long it has been busy.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Thread {
    free_at: u64,
    busy_ps: u64,
}

impl Thread {
    /// Whether it can take work at `now` (picoseconds).
    pub fn free(&self, now: u64) -> bool {
        now >= self.free_at
    }

    /// When it is free again.
    pub fn free_at(&self) -> u64 {
        self.free_at
    }

    /// Does `cost_ps` of work starting at `now` (or when it is next free).
    pub fn run(&mut self, now: u64, cost_ps: u64) {
        self.free_at = now.max(self.free_at) + cost_ps;
        self.busy_ps += cost_ps;
    }

    /// Picoseconds of work done so far.
    pub fn busy_ps(&self) -> u64 {
        self.busy_ps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_does_one_thing_at_a_time() {
        let mut t = Thread::default();
        assert!(t.free(0));
        t.run(100, 50);
        assert!(!t.free(149) && t.free(150));
        // Work given while busy starts when the thread is free.
        t.run(120, 10);
        assert_eq!((t.free_at(), t.busy_ps()), (160, 60));
    }
}
