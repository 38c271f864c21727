//! The event queue: a timing wheel with an overflow heap.
//!
//! Why a wheel: a packet simulator keeps tens of thousands of events pending, almost all within a
//! few microseconds of now. A binary heap pays ~log2(50k) mispredicted comparisons per pop; the
//! wheel files an event in O(1) into a ~1 ns bucket and sorts each small bucket once when time
//! reaches it. Events beyond the wheel's horizon wait in a heap and are pulled in when due.
//!
//! Order is total and deterministic: by time, then by scheduling order (a sequence number).

use crate::time::Time;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// log2 of the bucket width in picoseconds (1024 ps).
const GRAN_SHIFT: u32 = 10;
/// log2 of the number of buckets (65,536 buckets: a 67 µs horizon).
const WHEEL_BITS: u32 = 16;
const NB: u64 = 1 << WHEEL_BITS;
const MASK: u64 = NB - 1;

struct Entry<E> {
    time: Time,
    seq: u64,
    ev: E,
}

impl<E> Entry<E> {
    #[inline]
    fn key(&self) -> (Time, u64) {
        (self.time, self.seq)
    }
}

/// Far-future entries, ordered by (time, seq).
struct Far<E>(Entry<E>);
impl<E> PartialEq for Far<E> {
    fn eq(&self, o: &Self) -> bool {
        self.0.key() == o.0.key()
    }
}
impl<E> Eq for Far<E> {}
impl<E> PartialOrd for Far<E> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Far<E> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.key().cmp(&o.0.key())
    }
}

pub struct EventQueue<E> {
    buckets: Vec<Vec<Entry<E>>>,
    /// One bit per bucket: non-empty.
    occupied: Vec<u64>,
    /// One bit per word of `occupied`: that word is non-zero (so a scan skips 4096 buckets a bit).
    summary: Vec<u64>,
    /// Absolute index (time >> GRAN_SHIFT) of the bucket being drained.
    cur: u64,
    /// The current bucket's events, sorted ascending: the next one pops off the front, and an
    /// event scheduled into this bucket (almost always the largest key: latest time, newest
    /// sequence number) is appended at the back in O(1). (Sorted descending with inserts at the
    /// front, thousands of events scheduled for one instant cost O(n²): an all-to-all's flows
    /// starting together.)
    active: VecDeque<Entry<E>>,
    far: BinaryHeap<Reverse<Far<E>>>,
    /// Emptied bucket vectors, reused by the next buckets to fill: empty buckets hold no memory,
    /// so the wheel's footprint follows the pending events, not the busiest moment so far.
    spare: Vec<Vec<Entry<E>>>,
    now: Time,
    seq: u64,
    len: usize,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self {
            buckets: (0..NB).map(|_| Vec::new()).collect(),
            occupied: vec![0; (NB / 64) as usize],
            summary: vec![0; (NB / 64 / 64) as usize],
            cur: 0,
            active: VecDeque::new(),
            far: BinaryHeap::new(),
            spare: Vec::new(),
            now: 0,
            seq: 0,
            len: 0,
            popped: 0,
        }
    }

    /// Time of the last popped event.
    #[inline]
    pub fn now(&self) -> Time {
        self.now
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Events handled so far.
    #[inline]
    pub fn events_popped(&self) -> u64 {
        self.popped
    }

    /// Schedules `ev` at absolute time `t`. Scheduling in the past is a logic error; it is clamped
    /// to now in release builds so a run never goes backwards.
    #[inline]
    pub fn schedule(&mut self, t: Time, ev: E) {
        debug_assert!(
            t >= self.now,
            "event scheduled in the past: {t} < {}",
            self.now
        );
        let t = t.max(self.now);
        let seq = self.seq;
        self.seq += 1;
        self.len += 1;
        let e = Entry { time: t, seq, ev };
        let b = t >> GRAN_SHIFT;
        // The common case first: a bucket of the wheel ahead of the one being drained.
        if b != self.cur && b < self.cur + NB {
            let slot = (b & MASK) as usize;
            let bucket = &mut self.buckets[slot];
            if bucket.capacity() == 0 {
                if let Some(v) = self.spare.pop() {
                    *bucket = v;
                }
            }
            bucket.push(e);
            self.mark(slot);
        } else {
            self.schedule_rare(b, e);
        }
    }

    /// Into the bucket being drained, or beyond the wheel's horizon.
    #[inline(never)]
    fn schedule_rare(&mut self, b: u64, e: Entry<E>) {
        if b == self.cur {
            // Into the bucket being drained: keep it sorted. New events usually have the largest
            // key, so they belong at the back.
            if self.active.back().is_none_or(|x| x.key() < e.key()) {
                self.active.push_back(e);
            } else {
                let pos = self.active.partition_point(|x| x.key() < e.key());
                self.active.insert(pos, e);
            }
        } else {
            self.far.push(Reverse(Far(e)));
        }
    }

    /// Schedules `ev` after `delay` from now.
    #[inline]
    pub fn schedule_in(&mut self, delay: Time, ev: E) {
        self.schedule(self.now + delay, ev);
    }

    /// The next event, if it is already known without advancing the wheel (it is in the bucket
    /// being drained): for prefetching what it will touch.
    #[inline]
    pub fn peek_next(&self) -> Option<&E> {
        self.active.front().map(|e| &e.ev)
    }

    /// The event after [`peek_next`](Self::peek_next)'s, if it is in the same bucket.
    #[inline]
    pub fn peek_after(&self) -> Option<&E> {
        self.active.get(1).map(|e| &e.ev)
    }

    /// Time of the next event, if any.
    pub fn peek_time(&mut self) -> Option<Time> {
        if self.active.is_empty() && !self.advance() {
            return None;
        }
        self.active.front().map(|e| e.time)
    }

    pub fn pop(&mut self) -> Option<(Time, E)> {
        if self.active.is_empty() && !self.advance() {
            return None;
        }
        let e = self.active.pop_front()?;
        self.len -= 1;
        self.popped += 1;
        self.now = e.time;
        Some((e.time, e.ev))
    }

    /// Finds the next non-empty bucket (in the wheel or the far heap) and loads it into `active`.
    fn advance(&mut self) -> bool {
        if self.len == 0 {
            return false;
        }
        let wheel_next = self.next_occupied();
        let far_next = self.far.peek().map(|Reverse(Far(e))| e.time >> GRAN_SHIFT);
        let b = match (wheel_next, far_next) {
            (Some(w), Some(f)) => w.min(f),
            (Some(w), None) => w,
            (None, Some(f)) => f,
            (None, None) => return false,
        };
        self.cur = b;
        let slot = (b & MASK) as usize;
        // The drained (empty) active buffer goes back to the spares; the bucket's becomes active.
        let mut v: Vec<Entry<E>> = std::mem::take(&mut self.active).into();
        debug_assert!(v.is_empty());
        if wheel_next == Some(b) {
            std::mem::swap(&mut v, &mut self.buckets[slot]);
            let empty = std::mem::take(&mut self.buckets[slot]);
            if empty.capacity() > 0 {
                self.spare.push(empty);
            }
            self.occupied[slot >> 6] &= !(1 << (slot & 63));
            if self.occupied[slot >> 6] == 0 {
                self.summary[slot >> 12] &= !(1 << ((slot >> 6) & 63));
            }
        }
        while let Some(Reverse(Far(e))) = self.far.peek() {
            if e.time >> GRAN_SHIFT != b {
                break;
            }
            let Reverse(Far(e)) = self.far.pop().unwrap();
            v.push(e);
        }
        // Far entries whose bucket is now inside the horizon must move into the wheel, or a later
        // schedule() into the same slot would be filed before them.
        while let Some(Reverse(Far(e))) = self.far.peek() {
            let fb = e.time >> GRAN_SHIFT;
            if fb >= self.cur + NB {
                break;
            }
            let Reverse(Far(e)) = self.far.pop().unwrap();
            let s = (fb & MASK) as usize;
            if self.buckets[s].capacity() == 0 {
                if let Some(sp) = self.spare.pop() {
                    self.buckets[s] = sp;
                }
            }
            self.buckets[s].push(e);
            self.mark(s);
        }
        // Every entry of the bucket has the same time >> GRAN_SHIFT: (time, seq) orders as one
        // integer of the time's low bits above the sequence number, while that fits.
        if self.seq < 1 << (64 - GRAN_SHIFT) {
            v.sort_unstable_by_key(|e| {
                (e.time & ((1 << GRAN_SHIFT) - 1)) << (64 - GRAN_SHIFT) | e.seq
            });
        } else {
            v.sort_unstable_by_key(|e| e.key());
        }
        self.active = VecDeque::from(v);
        !self.active.is_empty()
    }

    #[inline]
    fn mark(&mut self, slot: usize) {
        self.occupied[slot >> 6] |= 1 << (slot & 63);
        self.summary[slot >> 12] |= 1 << ((slot >> 6) & 63);
    }

    /// First set bit at or after `from` in the occupancy bitmap (not wrapping), using the summary
    /// level to skip empty words.
    fn first_from(&self, from: usize) -> Option<usize> {
        if from >= NB as usize {
            return None;
        }
        let (w, b) = (from >> 6, from & 63);
        let bits = self.occupied[w] & (!0u64 << b);
        if bits != 0 {
            return Some((w << 6) + bits.trailing_zeros() as usize);
        }
        // Words after w, via the summary.
        let next_w = w + 1;
        let (mut sw, sb) = (next_w >> 6, next_w & 63);
        if sw >= self.summary.len() {
            return None;
        }
        let mut sbits = self.summary[sw] & (!0u64).checked_shl(sb as u32).unwrap_or(0);
        loop {
            if sbits != 0 {
                let word = (sw << 6) + sbits.trailing_zeros() as usize;
                let bits = self.occupied[word];
                debug_assert!(bits != 0);
                return Some((word << 6) + bits.trailing_zeros() as usize);
            }
            sw += 1;
            if sw >= self.summary.len() {
                return None;
            }
            sbits = self.summary[sw];
        }
    }

    /// Absolute index of the first occupied wheel bucket at or after `cur` (circularly).
    fn next_occupied(&self) -> Option<u64> {
        let start = (self.cur & MASK) as usize;
        self.first_from(start)
            .or_else(|| self.first_from(0).filter(|&s| s < start))
            .map(|s| self.abs_of(s))
    }

    #[inline]
    fn abs_of(&self, slot: usize) -> u64 {
        let base = self.cur & !MASK;
        let s = slot as u64;
        if s >= (self.cur & MASK) {
            base + s
        } else {
            base + NB + s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn equal_times_pop_in_scheduling_order() {
        let mut q = EventQueue::new();
        for i in 0..10 {
            q.schedule(500, i);
        }
        let got: Vec<i32> = std::iter::from_fn(|| q.pop().map(|x| x.1)).collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn many_events_scheduled_into_the_bucket_being_drained_stay_ordered_and_cheap() {
        // An all-to-all's flows all start at one instant: each start schedules into the bucket
        // being drained. 200,000 of them must not cost O(n²) (this took minutes when each
        // insert shifted the whole bucket).
        let mut q = EventQueue::new();
        q.schedule(100, 0u64);
        assert_eq!(q.pop(), Some((100, 0)));
        let n = 200_000u64;
        for i in 0..n {
            // Mostly "now", some a little later in the same bucket, in scrambled order.
            let t = if i % 7 == 0 {
                100 + (i * 37) % 900
            } else {
                100
            };
            q.schedule(t, i + 1);
        }
        let t0 = std::time::Instant::now();
        let mut last = (0, 0);
        let mut count = 0;
        while let Some((t, i)) = q.pop() {
            assert!((t, i) > last, "{:?} after {last:?}", (t, i));
            last = (t, i);
            count += 1;
        }
        assert_eq!(count, n);
        assert!(t0.elapsed().as_secs_f64() < 5.0);
    }

    #[test]
    fn far_events_interleave_correctly() {
        let mut q = EventQueue::new();
        q.schedule(10 * crate::time::S, 3u8);
        q.schedule(5, 1);
        q.schedule(crate::time::MS, 2);
        assert_eq!(q.pop(), Some((5, 1)));
        assert_eq!(q.pop(), Some((crate::time::MS, 2)));
        q.schedule(2 * crate::time::S, 9);
        assert_eq!(q.pop(), Some((2 * crate::time::S, 9)));
        assert_eq!(q.pop(), Some((10 * crate::time::S, 3)));
        assert_eq!(q.pop(), None);
    }

    proptest! {
        /// Against a reference ordered map: any interleaving of schedules (never in the past) and
        /// pops yields events in (time, scheduling order).
        #[test]
        fn matches_reference(ops in proptest::collection::vec((0u8..3, 0u64..200_000_000u64), 1..400)) {
            let mut q = EventQueue::new();
            let mut r: BTreeMap<(u64, u64), u64> = BTreeMap::new();
            let mut seq = 0u64;
            for (op, dt) in ops {
                if op < 2 {
                    // Mix of near (sub-ns to µs) and far (up to 200 µs) delays.
                    let d = if op == 0 { dt % 5_000 } else { dt };
                    let t = q.now() + d;
                    q.schedule(t, seq);
                    r.insert((t, seq), seq);
                    seq += 1;
                } else {
                    let want = r.iter().next().map(|(k, v)| (k.0, *v));
                    if let Some((k, _)) = want { r.remove(&(k, want.unwrap().1)); }
                    prop_assert_eq!(q.pop(), want);
                }
            }
            while let Some(got) = q.pop() {
                let (k, v) = r.iter().next().map(|(k, v)| (*k, *v)).unwrap();
                r.remove(&k);
                prop_assert_eq!(got, (k.0, v));
            }
            prop_assert!(r.is_empty());
        }
    }
}
