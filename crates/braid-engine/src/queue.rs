//! The event queue: a timing wheel with an overflow heap.
//!
//! Why a wheel: a packet simulator keeps tens of thousands of events pending, almost all within a
//! few microseconds of now. A binary heap pays ~log2(50k) mispredicted comparisons per pop; the
//! wheel files an event in O(1) into a ~1 ns bucket and sorts each small bucket once when time
//! reaches it. Events beyond the wheel's horizon wait in a heap and are pulled in when due.
//!
//! Order is total and deterministic: by time, then by scheduling order. In the wheel the
//! scheduling order is a bucket's filing order (entries carry no sequence number); the far heap
//! keeps a sequence number, and its entries enter the wheel before anything later can.

use crate::time::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// log2 of the bucket width in picoseconds (1024 ps).
const GRAN_SHIFT: u32 = 10;
/// log2 of the number of buckets (16,384 buckets: a 16.8 µs horizon). With 24-byte bucket
/// headers (`Vec`s), at 65,536 (1.5 MB) the header of a bucket an event is filed into, ~1 µs
/// ahead, was out of cache on most schedules (a quarter of `try_transmit`'s samples on the HPCC
/// anchor sat on that load); 384 KB stayed in L2 (now 128 KB: see `Head`). Events beyond the
/// horizon are timers (µs to ms ahead), few enough for the far heap (anchor CPU 5.54 -> 5.30 s,
/// k = 24 and k = 34 unchanged).
const WHEEL_BITS: u32 = 14;
const NB: u64 = 1 << WHEEL_BITS;
const MASK: u64 = NB - 1;

/// An event in the wheel. It carries no sequence number: a bucket's events are appended in
/// scheduling order (see `advance` for why that holds for events moved in from the far heap
/// too), so among equal times its position in the bucket *is* the scheduling order, and a sort
/// of (time, position) keys gives the (time, sequence) order.
#[derive(Clone, Copy)]
struct Slot<E> {
    time: Time,
    ev: E,
}

/// Events per chunk: a bucket's events are filed into a chain of fixed chunks of this many.
/// 16, not 8: on the HPCC anchor 40% of the buckets hold 9-16 events, which with 8 took the
/// chained path (slice instructions -0.4%, k = 34 -0.8%); the lines of a chunk no event is
/// filed into are never touched, so a small bucket costs no more lines than with 8.
const CHUNK: usize = 16;

/// A bucket's storage: chunks come from one slab and are reused most recently freed first, so a
/// bucket's first event lands in lines a drain just read. Aligned so that its 16 slots (of 24
/// bytes) fill exactly six cache lines.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Chunk<E>([Slot<E>; CHUNK]);

/// A bucket's header: its event count and the chunk its next event goes into (the last of its
/// chain, linked backwards through `EventQueue::prev`). 8 bytes instead of a `Vec`'s 24: a
/// bucket an event is filed into, ~1 µs ahead, had its header out of cache on a sixth of
/// `try_transmit`'s samples on the HPCC anchor; the 16,384 headers are now 128 KB, 8 a line.
#[derive(Clone, Copy, Default)]
struct Head {
    len: u32,
    tail: u32,
}

/// Far-future entries, ordered by (time, seq).
struct Far<E> {
    time: Time,
    seq: u64,
    ev: E,
}
impl<E> Far<E> {
    #[inline]
    fn key(&self) -> (Time, u64) {
        (self.time, self.seq)
    }
}
impl<E> PartialEq for Far<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
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
        self.key().cmp(&o.key())
    }
}

/// How far ahead (in buckets) `EventQueue::preload` takes the next bucket: on the HPCC anchor
/// the next occupied bucket is almost always within a few.
const PRELOAD_MAX: u64 = 64;

/// Buckets up to this size are sorted by counting ranks; larger ones by the library's sort.
const RANK_MAX: usize = 32;

/// Appends `v` (a bucket's events in filing order) to `out` sorted by (time, filing order).
#[inline]
fn sort_into<E: Copy>(v: &[Slot<E>], out: &mut Vec<Slot<E>>, keys: &mut Vec<u64>) {
    if v.len() <= RANK_MAX {
        rank_into(v, out);
    } else {
        // A crowded bucket (tens to hundreds of events at 10^4 hosts): sort 8-byte keys of
        // (time offset, filing index) — unique, so an unstable sort of integers keeps equal
        // times in filing order — and gather the events by them, instead of a stable sort
        // moving 24-byte entries (9% of the run at k = 34 went to that sort).
        let lo = (1u64 << GRAN_SHIFT) - 1;
        keys.clear();
        keys.extend(v.iter().zip(0u64..).map(|(s, i)| (s.time & lo) << 32 | i));
        keys.sort_unstable();
        out.extend(keys.iter().map(|&k| v[(k & 0xffff_ffff) as usize]));
    }
}

/// Appends `v` (one bucket's events, in filing order) to `out` in (time, filing order) order,
/// for `v.len() <= RANK_MAX`. Each event's rank is the number of keys smaller than its own,
/// the key being its time's offset in the bucket above its index (so keys are distinct, and
/// equal times keep the filing order, i.e. the scheduling order). That is n² compares but no
/// data-dependent branch: a bucket's events arrive in nearly random order (on the HPCC anchor
/// an insertion sort moved ~1.8 entries per event over ~8 events), which it pays in
/// mispredicted loop exits (about one per event). The compares run over a fixed width (8, 16 or 32 keys, padded
/// with a key larger than any) so that the inner loop has no exit to predict either.
#[inline]
fn rank_into<E: Copy>(v: &[Slot<E>], out: &mut Vec<Slot<E>>) {
    match v.len() {
        0..=8 => rank_w::<E, 8>(v, out),
        9..=16 => rank_w::<E, 16>(v, out),
        _ => rank_w::<E, RANK_MAX>(v, out),
    }
}

#[inline(always)]
fn rank_w<E: Copy, const W: usize>(v: &[Slot<E>], out: &mut Vec<Slot<E>>) {
    debug_assert!(v.len() <= W && W <= 32);
    let lo = (1u64 << GRAN_SHIFT) - 1;
    // 10 bits of time offset above 5 bits of index: fits an i32, and i32::MAX (the padding)
    // is never smaller than a key.
    let mut keys = [i32::MAX; W];
    for ((k, s), i) in keys.iter_mut().zip(v).zip(0u64..) {
        *k = ((s.time & lo) << 5 | i) as i32;
    }
    let base = out.len();
    if let Some(&first) = v.first() {
        out.resize(base + v.len(), first);
    }
    let out = &mut out[base..];
    for (s, &k) in v.iter().zip(&keys) {
        let r: i32 = keys.iter().map(|&x| (x < k) as i32).sum();
        out[r as usize] = *s;
    }
}

pub struct EventQueue<E> {
    /// Fixed-size arrays, indexed by a masked slot number: no bounds checks.
    heads: Box<[Head; NB as usize]>,
    /// The slab the buckets' chunks come from.
    chunks: Vec<Chunk<E>>,
    /// Per chunk: the chunk before it in its bucket's chain (unused for a chain's first).
    prev: Vec<u32>,
    /// Chunks not in use, most recently freed last.
    free: Vec<u32>,
    /// A bucket's events in filing order when they span several chunks, or the far heap's
    /// entries for one bucket (reused; see `advance`).
    gather: Vec<Slot<E>>,
    /// One bit per bucket: non-empty.
    occupied: Box<[u64; (NB / 64) as usize]>,
    /// One bit per word of `occupied`: that word is non-zero (so a scan skips 4096 buckets a bit).
    summary: [u64; (NB / 64 / 64) as usize],
    /// Absolute index (time >> GRAN_SHIFT) of the bucket being drained.
    cur: u64,
    /// The bucket being drained, sorted by (time, scheduling order); the next event is at `head`
    /// (a cursor instead of a `VecDeque`: popping is a load and an increment).
    act: Vec<Slot<E>>,
    /// Next position in `act` to pop.
    head: usize,
    /// Sort keys of a crowded bucket (reused; see `load`).
    keys: Vec<u64>,
    far: BinaryHeap<Reverse<Far<E>>>,
    /// Bucket of the far heap's first entry (`u64::MAX` when empty): `advance` checks it against
    /// the horizon without touching the heap.
    far_bucket: u64,
    now: Time,
    /// Scheduling sequence: orders equal times in the far heap (the wheel orders by position).
    seq: u64,
    /// Events scheduled so far (pending = scheduled - popped: one counter per event each way).
    scheduled: u64,
    popped: u64,
    /// The event `schedule` hands to `schedule_slow`. Passed as an argument, the event was
    /// built in a stack slot whose address the call takes, so the inlined fast path too copied
    /// it from there as 16 bytes right after the caller's narrower stores of its fields: a
    /// store-forwarding stall on every schedule (a tenth of `try_transmit`'s samples on the
    /// HPCC anchor). Stored here on the slow path only, the event stays in registers and the
    /// fast path stores its fields straight into the bucket.
    staged: Option<Slot<E>>,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        Self {
            heads: vec![Head::default(); NB as usize]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!()),
            chunks: Vec::new(),
            prev: Vec::new(),
            free: Vec::new(),
            gather: Vec::new(),
            occupied: Box::new([0; (NB / 64) as usize]),
            summary: [0; (NB / 64 / 64) as usize],
            cur: 0,
            act: Vec::new(),
            keys: Vec::new(),
            head: 0,
            far: BinaryHeap::new(),
            far_bucket: u64::MAX,
            now: 0,
            seq: 0,
            scheduled: 0,
            popped: 0,
            staged: None,
        }
    }

    /// Time of the last popped event.
    #[inline]
    pub fn now(&self) -> Time {
        self.now
    }

    #[inline]
    pub fn len(&self) -> usize {
        (self.scheduled - self.popped) as usize
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.scheduled == self.popped
    }

    /// Events handled so far.
    #[inline]
    pub fn events_popped(&self) -> u64 {
        self.popped
    }

    /// Schedules `ev` at absolute time `t`. Scheduling in the past is a logic error; it is clamped
    /// to now in release builds so a run never goes backwards.
    ///
    /// Always inlined: the common case (a bucket ahead of the one being drained that already
    /// holds an event: ~7 in 8 on the HPCC anchor) is a dozen instructions, less than a call's
    /// register saves; everything else is out of line.
    #[inline(always)]
    pub fn schedule(&mut self, t: Time, ev: E) {
        debug_assert!(
            t >= self.now,
            "event scheduled in the past: {t} < {}",
            self.now
        );
        let t = t.max(self.now);
        self.scheduled += 1;
        let b = t >> GRAN_SHIFT;
        let h = &mut self.heads[(b & MASK) as usize];
        let i = h.len as usize % CHUNK;
        // cur < b < cur + NB (one unsigned compare), and room in the bucket's last chunk (which
        // also means it is not the bucket's first event).
        if b.wrapping_sub(self.cur).wrapping_sub(1) < NB - 1 && i != 0 {
            self.chunks[h.tail as usize].0[i] = Slot { time: t, ev };
            h.len += 1;
        } else {
            self.staged = Some(Slot { time: t, ev });
            self.schedule_slow(b);
        }
    }

    /// A bucket's first event (give it a chunk, mark it occupied) or one its last chunk has no
    /// room for (chain a new one), or one into the bucket being drained (or before it, if
    /// `peek_time` moved on to a later bucket than now's), or
    /// beyond the wheel's horizon.
    #[inline(never)]
    fn schedule_slow(&mut self, b: u64) {
        let Some(Slot { time: t, ev }) = self.staged.take() else {
            unreachable!()
        };
        if b.wrapping_sub(self.cur).wrapping_sub(1) < NB - 1 {
            self.file((b & MASK) as usize, Slot { time: t, ev });
        } else if b <= self.cur {
            // Into the events being drained: after every one at or before `t` (this one is the
            // latest scheduled). Popped ones are all at or before now <= t, so it lands at or
            // after `head`. Usually that is the back.
            let rest = &self.act[self.head..];
            let pos = if rest.last().is_none_or(|x| x.time <= t) {
                self.act.len()
            } else {
                self.head + rest.partition_point(|x| x.time <= t)
            };
            self.act.insert(pos, Slot { time: t, ev });
        } else {
            let seq = self.seq;
            self.seq += 1;
            self.far_bucket = self.far_bucket.min(b);
            self.far.push(Reverse(Far { time: t, seq, ev }));
        }
    }

    /// Schedules `ev` after `delay` from now.
    #[inline]
    pub fn schedule_in(&mut self, delay: Time, ev: E) {
        self.schedule(self.now + delay, ev);
    }

    /// The next event, if it is already known without advancing the wheel (it is in the bucket
    /// being drained, or the next one `preload` appended): for prefetching what it will touch.
    #[inline]
    pub fn peek_next(&self) -> Option<&E> {
        self.act.get(self.head).map(|s| &s.ev)
    }

    /// The event after [`peek_next`](Self::peek_next)'s, if it is known too.
    #[inline]
    pub fn peek_after(&self) -> Option<&E> {
        self.act.get(self.head + 1).map(|s| &s.ev)
    }

    /// Time of the next event, if any.
    #[inline]
    pub fn peek_time(&mut self) -> Option<Time> {
        if self.head == self.act.len() && !self.advance() {
            return None;
        }
        Some(self.act[self.head].time)
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        self.pop_until(Time::MAX)
    }

    /// The next event if it is at or before `until` (else None, and it stays queued).
    #[inline]
    pub fn pop_until(&mut self, until: Time) -> Option<(Time, E)> {
        let t = self.due(until)?;
        Some((t, self.take_due()))
    }

    /// The time of the next event if it is at or before `until` (else None, and it stays
    /// queued); [`take_due`](Self::take_due) then pops it. The same as `pop_until` in two steps,
    /// for the event loop: returned in an `Option`, a 16-byte event whose tag has spare values
    /// (a niche) is copied as its tag and its other 15 bytes in two overlapping 8-byte moves,
    /// and the overlap stalls store forwarding on every event (~25% of the loop's samples on
    /// the HPCC anchor); returned bare it is copied whole.
    #[inline]
    pub fn due(&mut self, until: Time) -> Option<Time> {
        if self.head == self.act.len() && !self.advance() {
            return None;
        }
        let t = self.act[self.head].time;
        (t <= until).then_some(t)
    }

    /// Pops the event [`due`](Self::due) just reported. Only valid right after `due` returned
    /// `Some` (nothing scheduled or popped in between).
    #[inline]
    pub fn take_due(&mut self) -> E {
        let s = self.act[self.head];
        self.head += 1;
        self.popped += 1;
        self.now = s.time;
        if self.head + 2 > self.act.len() {
            self.preload();
        }
        s.ev
    }

    /// Appends the next bucket's events to the ones being drained when fewer than two are left,
    /// so that `peek_next` and `peek_after` see across a bucket's end: the event loop prefetches
    /// what those two will touch, and the first two events of every bucket had no such hint
    /// (a fifth of the HPCC anchor's events: ~10 a bucket; their packets' first loads were its
    /// largest stall).
    ///
    /// Only a wheel bucket at most `PRELOAD_MAX` ahead: the bucket being drained becomes the
    /// next one, so an event scheduled before it is inserted into `act` (`schedule_slow`) rather
    /// than filed, and the gap bounds how many can be. The order of events is unchanged: `act`
    /// stays sorted by (time, scheduling order) across both buckets, whose times do not overlap.
    #[inline(never)]
    fn preload(&mut self) {
        let left = self.act.len() - self.head;
        if self.len() == left {
            return;
        }
        let Some(b) = self.next_occupied() else {
            return;
        };
        if b - self.cur > PRELOAD_MAX {
            return;
        }
        self.act.drain(..self.head);
        self.head = 0;
        self.take_bucket(b);
    }

    /// Finds the next non-empty bucket (in the wheel or the far heap) and makes it the one being
    /// drained. Called when the current one is drained.
    #[inline(never)]
    fn advance(&mut self) -> bool {
        if self.is_empty() {
            return false;
        }
        self.head = 0;
        self.act.clear();
        // Wheel entries are all within the horizon and far ones beyond it (far entries are moved
        // in as soon as they come within it, below), so the far heap is next only when the
        // wheel is empty.
        if let Some(b) = self.next_occupied() {
            self.take_bucket(b);
        } else {
            let b = self.far_bucket;
            debug_assert!(b != u64::MAX);
            self.cur = b;
            self.gather.clear();
            // In (time, seq) order: position order is scheduling order among equal times.
            while let Some(Reverse(e)) = self.far.peek() {
                if e.time >> GRAN_SHIFT != b {
                    break;
                }
                let Reverse(e) = self.far.pop().unwrap();
                self.gather.push(Slot {
                    time: e.time,
                    ev: e.ev,
                });
            }
            self.refresh_far_bucket();
            self.far_in_if_due();
            sort_into(&self.gather, &mut self.act, &mut self.keys);
        }
        !self.act.is_empty()
    }

    /// Makes wheel bucket `b` (occupied) the one being drained: its events, sorted, are appended
    /// to `act`.
    #[inline]
    fn take_bucket(&mut self, b: u64) {
        self.cur = b;
        let slot = (b & MASK) as usize;
        self.occupied[slot >> 6] &= !(1 << (slot & 63));
        if self.occupied[slot >> 6] == 0 {
            self.summary[slot >> 12] &= !(1 << ((slot >> 6) & 63));
        }
        let h = std::mem::take(&mut self.heads[slot]);
        self.far_in_if_due();
        self.load(h);
    }

    /// Far entries whose bucket is now inside the horizon move into the wheel now, before any
    /// schedule() can file a later event into that bucket: popped in (time, seq) order into an
    /// empty bucket, they keep position order = scheduling order among equal times.
    #[inline]
    fn far_in_if_due(&mut self) {
        if self.far_bucket < self.cur + NB {
            self.far_in();
        }
    }

    /// Makes the bucket with header `h` the sorted run being drained, and frees its chunks.
    #[inline]
    fn load(&mut self, h: Head) {
        let n = h.len as usize;
        if n <= CHUNK {
            // Most buckets: one chunk, ranked straight into `act`.
            rank_into(&self.chunks[h.tail as usize].0[..n], &mut self.act);
            self.free.push(h.tail);
            return;
        }
        // Several chunks: copied out in filing order (last chunk first, backwards), then sorted.
        let g = &mut self.gather;
        g.clear();
        g.resize(n, self.chunks[h.tail as usize].0[0]);
        let mut c = h.tail;
        let mut end = n;
        loop {
            let start = (end - 1) / CHUNK * CHUNK;
            g[start..end].copy_from_slice(&self.chunks[c as usize].0[..end - start]);
            self.free.push(c);
            if start == 0 {
                break;
            }
            c = self.prev[c as usize];
            end = start;
        }
        sort_into(g, &mut self.act, &mut self.keys);
    }

    /// Files `s` into the bucket at `slot` (within the horizon, not the one being drained): into
    /// its last chunk, or a new one if that is full or the bucket empty.
    #[inline]
    fn file(&mut self, slot: usize, s: Slot<E>) {
        let h = self.heads[slot];
        // A non-zero position in the last chunk implies a non-empty bucket.
        let i = h.len as usize % CHUNK;
        if i != 0 {
            self.chunks[h.tail as usize].0[i] = s;
        } else {
            let c = match self.free.pop() {
                Some(c) => {
                    self.chunks[c as usize].0[0] = s;
                    c
                }
                None => {
                    // Filled with copies of `s`: the slab never holds uninitialised slots.
                    self.chunks.push(Chunk([s; CHUNK]));
                    self.prev.push(0);
                    (self.chunks.len() - 1) as u32
                }
            };
            self.prev[c as usize] = h.tail;
            self.heads[slot].tail = c;
            if h.len == 0 {
                self.mark(slot);
            }
        }
        self.heads[slot].len += 1;
    }

    #[inline(never)]
    fn far_in(&mut self) {
        while let Some(Reverse(e)) = self.far.peek() {
            let fb = e.time >> GRAN_SHIFT;
            if fb >= self.cur + NB {
                break;
            }
            let Reverse(e) = self.far.pop().unwrap();
            self.file(
                (fb & MASK) as usize,
                Slot {
                    time: e.time,
                    ev: e.ev,
                },
            );
        }
        self.refresh_far_bucket();
    }

    /// `far_bucket` from the far heap's first entry, after entries left it.
    #[inline]
    fn refresh_far_bucket(&mut self) {
        self.far_bucket = self
            .far
            .peek()
            .map_or(u64::MAX, |Reverse(e)| e.time >> GRAN_SHIFT);
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

    proptest! {
        /// Ranking orders a bucket by (time, filing order), appended after what `out` holds.
        #[test]
        fn ranks_sort_by_time_then_filing_order(
            offs in proptest::collection::vec(0u64..1024, 0..=RANK_MAX),
            few_times in any::<bool>(),
        ) {
            // Many equal times too (a bucket's events often share a picosecond).
            let v: Vec<Slot<u32>> = offs
                .iter()
                .zip(0u32..)
                .map(|(&o, i)| Slot { time: 7 << GRAN_SHIFT | if few_times { o % 3 } else { o }, ev: i })
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|s| (s.time, s.ev));
            let key = |x: &Vec<Slot<u32>>| x.iter().map(|s| (s.time, s.ev)).collect::<Vec<_>>();
            let held = Slot { time: 0, ev: u32::MAX };
            let mut got = vec![held];
            rank_into(&v, &mut got);
            prop_assert_eq!(key(&got[..1].to_vec()), key(&vec![held]));
            prop_assert_eq!(key(&got[1..].to_vec()), key(&want));
        }
    }

    #[test]
    fn events_scheduled_between_a_bucket_and_the_next_one_preloaded_keep_their_order() {
        // Two events in bucket 1, one in bucket 4: popping the first preloads bucket 4 (fewer
        // than two events left), and what is then scheduled into buckets 1-4 goes before it,
        // or after it at equal times.
        let b = 1u64 << GRAN_SHIFT;
        let mut q = EventQueue::new();
        q.schedule(b + 10, 0);
        q.schedule(b + 20, 1);
        q.schedule(4 * b + 5, 2);
        assert_eq!(q.pop(), Some((b + 10, 0)));
        assert_eq!(q.peek_after(), Some(&2), "bucket 4 is preloaded");
        q.schedule(2 * b, 3);
        q.schedule(4 * b + 5, 4);
        q.schedule(b + 20, 5);
        q.schedule(4 * b, 6);
        let got: Vec<(Time, i32)> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            got,
            [
                (b + 20, 1),
                (b + 20, 5),
                (2 * b, 3),
                (4 * b, 6),
                (4 * b + 5, 2),
                (4 * b + 5, 4)
            ]
        );
    }

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

    #[test]
    fn schedule_before_a_bucket_peek_time_moved_to() {
        // peek_time() makes the next bucket the one being drained without popping; an event
        // scheduled after that, between now and that bucket, must still come first.
        let mut q = EventQueue::new();
        q.schedule(50_000, 1u32);
        assert_eq!(q.peek_time(), Some(50_000));
        q.schedule(3_000, 2);
        q.schedule(50_000, 3);
        q.schedule(49_999, 4);
        assert_eq!(q.pop(), Some((3_000, 2)));
        assert_eq!(q.pop(), Some((49_999, 4)));
        assert_eq!(q.pop(), Some((50_000, 1)));
        assert_eq!(q.pop(), Some((50_000, 3)));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn far_entries_come_before_later_scheduled_equal_times() {
        // An event filed in the far heap, then (once its bucket is within the horizon) others at
        // the very same time filed in the wheel: the far one was scheduled first and pops first.
        let horizon = NB << GRAN_SHIFT;
        let t = horizon + 5 * (1 << GRAN_SHIFT) + 17;
        let mut q = EventQueue::new();
        q.schedule(t, 0u32);
        q.schedule(t + 1, 1);
        q.schedule(t - 1, 2);
        q.schedule(10 << GRAN_SHIFT, 3);
        assert_eq!(q.pop(), Some((10 << GRAN_SHIFT, 3)));
        // now = 10 buckets: t's bucket is within the horizon; the far entries are in the wheel.
        q.schedule(t, 4);
        q.schedule(t - 1, 5);
        assert_eq!(q.pop(), Some((t - 1, 2)));
        assert_eq!(q.pop(), Some((t - 1, 5)));
        assert_eq!(q.pop(), Some((t, 0)));
        assert_eq!(q.pop(), Some((t, 4)));
        assert_eq!(q.pop(), Some((t + 1, 1)));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn buckets_of_every_size_sort_stably() {
        // Sizes across the rank widths (8, 16, 32) and the library sort above them, with many
        // equal times, filed in scrambled order.
        for n in 1..80u64 {
            let mut q = EventQueue::new();
            q.schedule(0, (0, 0));
            q.pop();
            let base = 7 << GRAN_SHIFT;
            let mut want = Vec::new();
            for i in 0..n {
                let t = base + (i * 7919) % 13 * 61;
                q.schedule(t, (t, i));
                want.push((t, i));
            }
            want.sort();
            let got: Vec<(u64, u64)> = std::iter::from_fn(|| q.pop().map(|x| x.1)).collect();
            assert_eq!(got, want, "bucket of {n}");
        }
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

        /// The same with events crowded into few buckets (many equal times, inserts into the
        /// bucket being drained, buckets of up to ~100 events), schedules right at and around
        /// the wheel's horizon, and `peek_time` between operations.
        #[test]
        fn matches_reference_crowded(ops in proptest::collection::vec((0u8..6, 0u64..1_000_000u64), 1..600)) {
            let horizon = NB << GRAN_SHIFT;
            let mut q = EventQueue::new();
            let mut r: BTreeMap<(u64, u64), u64> = BTreeMap::new();
            let mut seq = 0u64;
            for (op, dt) in ops {
                let d = match op {
                    0 => Some(dt % 4 * 256),
                    1 => Some(dt % 3_000),
                    2 => Some(horizon - 2_048 + dt % 4_096),
                    3 => Some(dt * 200),
                    _ => None,
                };
                if let Some(d) = d {
                    let t = q.now() + d;
                    q.schedule(t, seq);
                    r.insert((t, seq), seq);
                    seq += 1;
                } else if op == 4 {
                    let want = r.keys().next().map(|k| k.0);
                    prop_assert_eq!(q.peek_time(), want);
                } else {
                    let want = r.iter().next().map(|(k, v)| (*k, *v));
                    if let Some((k, _)) = want { r.remove(&k); }
                    prop_assert_eq!(q.pop(), want.map(|(k, v)| (k.0, v)));
                }
                prop_assert_eq!(q.len(), r.len());
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
