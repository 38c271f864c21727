//! braid-engine: the discrete-event core.
//!
//! Simulated time is an integer number of picoseconds ([`Time`]). Events are opaque payloads of a
//! type chosen by the user of the engine; the engine orders them by time and, for equal times, by
//! the order in which they were scheduled, so a run is a pure function of its inputs.
//! Randomness comes from [`RngStream`]s derived from one master seed and a stream name, owned by
//! the component that draws from them, so adding a component never perturbs another's draws.
//!
//! The engine knows nothing about networks.

pub mod queue;
pub mod rng;
pub mod time;

pub use queue::EventQueue;
pub use rng::{derive_seed, RngStream};
pub use time::Time;

/// Something that consumes events and may schedule more.
pub trait Handler<E> {
    fn handle(&mut self, now: Time, event: E, queue: &mut EventQueue<E>);

    /// `next` is handled right after the event about to be, and `after` (if known) after it:
    /// start loading what they will touch (see [`prefetch`]). A hint only, with no effect on
    /// results; the default does nothing.
    #[inline]
    fn prefetch(&self, _next: &E, _after: Option<&E>) {}
}

/// Asks the CPU to start loading the cache line holding `*r`, so that a later access does not
/// wait for memory. A hint with no effect on results (and none on targets without one).
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch instruction only hints the cache; it reads nothing architecturally and
    // cannot fault, and `r` is a valid reference anyway. SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            r as *const T as *const i8,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// Why [`run_until`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// The next event lies beyond the slice end; the run can be continued.
    SliceEnd,
    /// No events remain.
    Drained,
}

/// Advances the simulation over one slice: handles every event with time `<= until`, in order.
/// Front ends call this repeatedly with growing `until` to show progress and to stop early.
pub fn run_until<E: Copy, H: Handler<E>>(
    queue: &mut EventQueue<E>,
    handler: &mut H,
    until: Time,
) -> RunStatus {
    while let Some(t) = queue.due(until) {
        let ev = queue.take_due();
        if let Some(next) = queue.peek_next() {
            handler.prefetch(next, queue.peek_after());
        }
        handler.handle(t, ev, queue);
    }
    if queue.is_empty() {
        RunStatus::Drained
    } else {
        RunStatus::SliceEnd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter {
        seen: Vec<(Time, u32)>,
    }
    impl Handler<u32> for Counter {
        fn handle(&mut self, now: Time, ev: u32, q: &mut EventQueue<u32>) {
            self.seen.push((now, ev));
            if ev < 5 {
                q.schedule(now + 10, ev + 1);
            }
        }
    }

    #[test]
    fn slices_resume_where_they_stopped() {
        let mut q = EventQueue::new();
        q.schedule(0, 0);
        let mut h = Counter { seen: vec![] };
        assert_eq!(run_until(&mut q, &mut h, 25), RunStatus::SliceEnd);
        assert_eq!(h.seen.len(), 3);
        assert_eq!(run_until(&mut q, &mut h, 1_000), RunStatus::Drained);
        assert_eq!(
            h.seen,
            (0..=5).map(|i| (i as u64 * 10, i)).collect::<Vec<_>>()
        );
    }
}
