//! The bookkeeping of the RNIC's transmit arbiter: which QPs are active, in what round-robin
//! order, which of them need a look, and the state of the policies between classes (strict
//! priority, ETS). The decisions (a QP's status, building its packet) stay in `nic.rs`.
//!
//! Cost. The arbiter used to look at every active QP each time the wire freed: with a thousand
//! QPs paused by PFC or waiting for their rate limiter, every event paid for a thousand looks. A
//! QP that waits for a time now sleeps in a timer heap, and one that is ready but PFC-paused is
//! skipped while its priority is paused, both without leaving its place in the rotation; the
//! rotation is an order-statistic tree (a treap over the round-robin sequence), so finding the
//! next QP that needs a look and rotating the sequence cost O(log n) whatever n is.
//!
//! Faithfulness. The sequence is exactly the deque the arbiter rotated before (front = next to
//! look at; a QP looked at and passed goes to the back, as does the QP that sent; newly active QPs
//! join at the back). What changed is only that a QP is not looked at while nothing can have
//! changed for it: its wait time has not come, or its priority is still paused, and nobody
//! activated it (every event that can change a QP's status activates it: posts, feedback with a
//! kick, timers, CQ events for WAIT, ENABLE). Looking at such a QP returned the same answer and
//! changed nothing, so runs are the same as with the old arbiter.

use braid_engine::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const NIL: u32 = u32::MAX;
/// `own` bit of a QP that needs a look (newly active, activated, its wait is over, it sent).
pub const DIRTY: u16 = 1 << 8;

#[derive(Debug, Clone, Copy)]
struct Node {
    l: u32,
    r: u32,
    p: u32,
    pri: u32,
    size: u32,
    /// DIRTY, or bit `prio` (ready but its priority was paused), or 0 (waiting for a time).
    own: u16,
    /// OR of `own` over the subtree.
    mask: u16,
    /// In a rotation.
    member: bool,
    class: u8,
    /// Bumped whenever the QP's parked state changes: timer entries of older generations are void.
    gen: u32,
}

impl Default for Node {
    fn default() -> Self {
        Node {
            l: NIL,
            r: NIL,
            p: NIL,
            pri: 0,
            size: 0,
            own: 0,
            mask: 0,
            member: false,
            class: 0,
            gen: 0,
        }
    }
}

/// Active QPs in round-robin order per class, with the QPs that need a look findable in
/// O(log n). One node per QP number, shared by the classes' sequences.
///
/// Each class's rotation is a cycle: a treap over a sequence that never reorders (only inserts
/// and removals change it) and a *finger* on the QP at the front. Passing QPs to the back moves
/// the finger (the old deque's pop-and-push kept the same cyclic order); a newly active QP goes
/// just before the finger (the back). So the common step, the front QP sends and goes to the back,
/// is an in-order successor: O(1) amortised.
pub struct Rotations {
    nodes: Vec<Node>,
    roots: [u32; 8],
    /// The front QP of each class (NIL: empty).
    fingers: [u32; 8],
    /// (wake time, qpn, generation) of QPs waiting for a time.
    timers: BinaryHeap<Reverse<(Time, u32, u32)>>,
    rng: u64,
}

impl Default for Rotations {
    fn default() -> Self {
        Rotations {
            nodes: Vec::new(),
            roots: [NIL; 8],
            fingers: [NIL; 8],
            timers: BinaryHeap::new(),
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }
}

impl Rotations {
    // ------------------------------------------------------------------ treap internals

    #[inline]
    fn size(&self, x: u32) -> u32 {
        if x == NIL {
            0
        } else {
            self.nodes[x as usize].size
        }
    }
    #[inline]
    fn mask(&self, x: u32) -> u16 {
        if x == NIL {
            0
        } else {
            self.nodes[x as usize].mask
        }
    }
    #[inline]
    fn pull(&mut self, x: u32) {
        let n = self.nodes[x as usize];
        let size = 1 + self.size(n.l) + self.size(n.r);
        let mask = n.own | self.mask(n.l) | self.mask(n.r);
        let n = &mut self.nodes[x as usize];
        n.size = size;
        n.mask = mask;
    }
    #[inline]
    fn set_parent(&mut self, x: u32, p: u32) {
        if x != NIL {
            self.nodes[x as usize].p = p;
        }
    }

    /// Joins two sequences (every element of `a` before every element of `b`).
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].pri >= self.nodes[b as usize].pri {
            let ar = self.nodes[a as usize].r;
            let m = self.merge(ar, b);
            self.nodes[a as usize].r = m;
            self.set_parent(m, a);
            self.pull(a);
            a
        } else {
            let bl = self.nodes[b as usize].l;
            let m = self.merge(a, bl);
            self.nodes[b as usize].l = m;
            self.set_parent(m, b);
            self.pull(b);
            b
        }
    }

    /// Splits a sequence into its first `k` elements and the rest. The roots returned have no
    /// parent.
    fn split(&mut self, t: u32, k: u32) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let l = self.nodes[t as usize].l;
        let ls = self.size(l);
        if k <= ls {
            let (a, b) = self.split(l, k);
            self.nodes[t as usize].l = b;
            self.set_parent(b, t);
            self.pull(t);
            self.set_parent(a, NIL);
            self.nodes[t as usize].p = NIL;
            (a, t)
        } else {
            let r = self.nodes[t as usize].r;
            let (a, b) = self.split(r, k - ls - 1);
            self.nodes[t as usize].r = a;
            self.set_parent(a, t);
            self.pull(t);
            self.set_parent(b, NIL);
            self.nodes[t as usize].p = NIL;
            (t, b)
        }
    }

    fn set_root(&mut self, c: usize, r: u32) {
        self.set_parent(r, NIL);
        self.roots[c] = r;
    }

    /// Position of a member in its class's (unrotated) sequence.
    fn index_of(&self, x: u32) -> u32 {
        let mut i = self.size(self.nodes[x as usize].l);
        let mut x = x;
        loop {
            let p = self.nodes[x as usize].p;
            if p == NIL {
                return i;
            }
            if self.nodes[p as usize].r == x {
                i += self.size(self.nodes[p as usize].l) + 1;
            }
            x = p;
        }
    }

    /// The member at position `k` of the (unrotated) sequence rooted at `t`.
    fn select(&self, mut t: u32, mut k: u32) -> u32 {
        loop {
            let n = &self.nodes[t as usize];
            let ls = self.size(n.l);
            if k < ls {
                t = n.l;
            } else if k == ls {
                return t;
            } else {
                k -= ls + 1;
                t = n.r;
            }
        }
    }

    fn leftmost(&self, mut t: u32) -> u32 {
        while t != NIL && self.nodes[t as usize].l != NIL {
            t = self.nodes[t as usize].l;
        }
        t
    }

    /// The next member in sequence order (NIL after the last).
    fn succ(&self, x: u32) -> u32 {
        let r = self.nodes[x as usize].r;
        if r != NIL {
            return self.leftmost(r);
        }
        let mut x = x;
        loop {
            let p = self.nodes[x as usize].p;
            if p == NIL || self.nodes[p as usize].l == x {
                return p;
            }
            x = p;
        }
    }

    /// The first member of subtree `t` whose `own` meets `want` (the subtree's mask must).
    fn leftmost_match(&self, mut t: u32, want: u16) -> u32 {
        loop {
            let n = &self.nodes[t as usize];
            if self.mask(n.l) & want != 0 {
                t = n.l;
            } else if n.own & want != 0 {
                return t;
            } else {
                t = n.r;
            }
        }
    }

    /// The first member at or after `x` in sequence order (not wrapping) whose `own` meets `want`.
    fn match_from(&self, x: u32, want: u16) -> u32 {
        let n = &self.nodes[x as usize];
        if n.own & want != 0 {
            return x;
        }
        if self.mask(n.r) & want != 0 {
            return self.leftmost_match(n.r, want);
        }
        let mut x = x;
        loop {
            let p = self.nodes[x as usize].p;
            if p == NIL {
                return NIL;
            }
            let pn = &self.nodes[p as usize];
            if pn.l == x {
                if pn.own & want != 0 {
                    return p;
                }
                if self.mask(pn.r) & want != 0 {
                    return self.leftmost_match(pn.r, want);
                }
            }
            x = p;
        }
    }

    fn set_own(&mut self, x: u32, own: u16) {
        self.nodes[x as usize].own = own;
        let mut y = x;
        while y != NIL {
            let n = self.nodes[y as usize];
            let m = n.own | self.mask(n.l) | self.mask(n.r);
            if m == n.mask && y != x {
                break;
            }
            self.nodes[y as usize].mask = m;
            y = n.p;
        }
    }

    fn next_pri(&mut self) -> u32 {
        // xorshift64*: the tree's shape only, never the simulation's randomness.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }

    /// Takes member `x` of class `c` out of the sequence (the finger is the caller's business).
    fn unlink(&mut self, c: usize, x: u32) {
        let k = self.index_of(x);
        let (a, b) = self.split(self.roots[c], k);
        let (x2, rest) = self.split(b, 1);
        debug_assert_eq!(x2, x);
        let r = self.merge(a, rest);
        self.set_root(c, r);
        self.forget(x);
    }

    fn forget(&mut self, x: u32) {
        let n = &mut self.nodes[x as usize];
        let gen = n.gen.wrapping_add(1);
        *n = Node {
            gen,
            ..Node::default()
        };
    }

    // ------------------------------------------------------------------ the rotation

    /// Whether `qpn` is in a rotation.
    #[inline]
    pub fn contains(&self, qpn: u32) -> bool {
        self.nodes.get(qpn as usize).is_some_and(|n| n.member)
    }

    /// Active QPs of class `c` (waiting and paused ones included).
    #[inline]
    pub fn len(&self, c: usize) -> u32 {
        self.size(self.roots[c])
    }

    /// No active QP in any class.
    pub fn is_empty(&self) -> bool {
        self.roots.iter().all(|&r| r == NIL)
    }

    /// Appends `qpn` to the back of class `c`'s rotation (just before the front), needing a look.
    pub fn push_back(&mut self, c: usize, qpn: u32) {
        if self.nodes.len() <= qpn as usize {
            self.nodes.resize(qpn as usize + 1, Node::default());
        }
        let pri = self.next_pri();
        let gen = self.nodes[qpn as usize].gen.wrapping_add(1);
        self.nodes[qpn as usize] = Node {
            l: NIL,
            r: NIL,
            p: NIL,
            pri,
            size: 1,
            own: DIRTY,
            mask: DIRTY,
            member: true,
            class: c as u8,
            gen,
        };
        let f = self.fingers[c];
        if f == NIL {
            self.set_root(c, qpn);
            self.fingers[c] = qpn;
            return;
        }
        let k = self.index_of(f);
        let (a, b) = self.split(self.roots[c], k);
        let a = self.merge(a, qpn);
        let r = self.merge(a, b);
        self.set_root(c, r);
    }

    /// Marks a member as needing a look (it was activated, or its wait is over). Returns false if
    /// it is not a member.
    pub fn wake(&mut self, qpn: u32) -> bool {
        if !self.contains(qpn) {
            return false;
        }
        if self.nodes[qpn as usize].own != DIRTY {
            let n = &mut self.nodes[qpn as usize];
            n.gen = n.gen.wrapping_add(1);
            self.set_own(qpn, DIRTY);
        }
        true
    }

    /// Parks a member until `t`: it gets no look before then unless woken.
    pub fn park_until(&mut self, qpn: u32, t: Time) {
        let n = &mut self.nodes[qpn as usize];
        n.gen = n.gen.wrapping_add(1);
        let gen = n.gen;
        self.set_own(qpn, 0);
        self.timers.push(Reverse((t, qpn, gen)));
    }

    /// Parks a member that is ready but whose priority `prio` is paused: it gets no look while
    /// that priority stays paused, unless woken.
    pub fn park_paused(&mut self, qpn: u32, prio: u8) {
        let n = &mut self.nodes[qpn as usize];
        n.gen = n.gen.wrapping_add(1);
        self.set_own(qpn, 1 << (prio & 7));
    }

    /// Wakes the QPs whose wait is over at `now`.
    pub fn release_timers(&mut self, now: Time) {
        while let Some(&Reverse((t, qpn, gen))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let n = &self.nodes[qpn as usize];
            if n.member && n.gen == gen && n.own == 0 {
                self.wake(qpn);
            }
        }
    }

    /// The earliest time a parked QP's wait ends, if any QP waits for a time.
    pub fn next_timer(&mut self) -> Option<Time> {
        while let Some(&Reverse((t, qpn, gen))) = self.timers.peek() {
            let n = &self.nodes[qpn as usize];
            if n.member && n.gen == gen && n.own == 0 {
                return Some(t);
            }
            self.timers.pop();
        }
        None
    }

    /// The first QP of class `c`'s rotation that needs a look, given the paused priorities (bit
    /// p = priority p paused), if it is among the first `limit`: (its position from the front,
    /// the QP).
    ///
    /// Inlined for the usual answer, the front itself (it sent last time and is marked for a
    /// look): the call and its register saves were a third of the cost.
    #[inline]
    pub fn first_candidate(&self, c: usize, limit: u32, paused: u8) -> Option<(u32, u32)> {
        let want = DIRTY | (!paused) as u16;
        let f = self.fingers[c];
        if f == NIL || limit == 0 {
            return None;
        }
        // The front meets `want`, so its subtree's mask and the root's do too.
        if self.nodes[f as usize].own & want != 0 {
            return Some((0, f));
        }
        self.first_candidate_after(c, f, limit, want)
    }

    /// [`Self::first_candidate`] when the front `f` needs no look.
    fn first_candidate_after(&self, c: usize, f: u32, limit: u32, want: u16) -> Option<(u32, u32)> {
        if self.mask(self.roots[c]) & want == 0 {
            return None;
        }
        let mut y = self.match_from(f, want);
        if y == NIL {
            // Wrap around: the first one from the start of the sequence (before the finger).
            y = self.leftmost_match(self.roots[c], want);
        }
        if y == f {
            return Some((0, y));
        }
        let n = self.len(c);
        let j = (self.index_of(y) + n - self.index_of(f)) % n;
        (j < limit).then_some((j, y))
    }

    /// Whether class `c` has a QP that needs a look (given the paused priorities).
    pub fn has_candidate(&self, c: usize, paused: u8) -> bool {
        self.mask(self.roots[c]) & (DIRTY | (!paused) as u16) != 0
    }

    /// The QP at the front of class `c`'s rotation.
    #[inline]
    pub fn front(&self, c: usize) -> Option<u32> {
        let f = self.fingers[c];
        (f != NIL).then_some(f)
    }

    /// Moves the first `k` QPs of class `c` to the back, in order.
    ///
    /// Inlined for a rotation of one QP, which changes nothing: the usual case (one active QP per
    /// NIC), where the call used to pay for a 32-bit divide (k % n with k = n = 1).
    #[inline]
    pub fn rotate(&mut self, c: usize, k: u32) {
        if self.len(c) > 1 {
            self.rotate_some(c, k);
        }
    }

    fn rotate_some(&mut self, c: usize, k: u32) {
        let n = self.len(c);
        // Usually k = 1 < n: no division (a 32-bit divide costs tens of cycles per packet).
        let k = if k < n { k } else { k % n };
        let f = self.fingers[c];
        self.fingers[c] = match k {
            0 => f,
            1 => match self.succ(f) {
                NIL => self.leftmost(self.roots[c]),
                s => s,
            },
            _ => self.select(self.roots[c], (self.index_of(f) + k) % n),
        };
    }

    /// Makes member `qpn` of class `c` the front, passing those before it to the back (a
    /// `rotate` by its position, which the caller knows from [`Self::first_candidate`]).
    pub fn rotate_to(&mut self, c: usize, qpn: u32) {
        debug_assert!(self.contains(qpn) && self.nodes[qpn as usize].class as usize == c);
        self.fingers[c] = qpn;
    }

    /// Takes the front QP of class `c` out of the rotation.
    pub fn pop_front(&mut self, c: usize) -> Option<u32> {
        let f = self.fingers[c];
        if f == NIL {
            return None;
        }
        self.remove(f);
        Some(f)
    }

    /// Takes `qpn` out of its rotation (wherever it is).
    pub fn remove(&mut self, qpn: u32) {
        if !self.contains(qpn) {
            return;
        }
        let c = self.nodes[qpn as usize].class as usize;
        if self.fingers[c] == qpn {
            let next = match self.succ(qpn) {
                NIL => self.leftmost(self.roots[c]),
                s => s,
            };
            self.fingers[c] = if next == qpn { NIL } else { next };
        }
        self.unlink(c, qpn);
    }

    /// The rotation of class `c`, front first (tests and debugging).
    pub fn sequence(&self, c: usize) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.len(c) as usize);
        let mut stack = Vec::new();
        let mut t = self.roots[c];
        while t != NIL || !stack.is_empty() {
            while t != NIL {
                stack.push(t);
                t = self.nodes[t as usize].l;
            }
            let x = stack.pop().unwrap();
            out.push(x);
            t = self.nodes[x as usize].r;
        }
        if let Some(i) = out.iter().position(|&x| x == self.fingers[c]) {
            out.rotate_left(i);
        }
        out
    }
}

/// The state of ETS's deficit round robin between classes (traffic classes, as ConnectX's ETS:
/// a bandwidth share per TC, `mlnx_qos --tcbw`), with byte quanta.
///
/// The grain is the one of Linux's `sch_ets` (802.1Qaz ETS): a bandwidth-sharing band's default
/// quantum is one MTU. So the heaviest class gets one full frame per round and the others their
/// share of it, a fraction of a frame: the shares are the weights, and a class waits for at most
/// one frame of each other class per round, whatever the weights. A class whose deficit does not
/// cover its next packet keeps the debt it ran (the last packet of a turn may overdraw) and earns
/// its quantum again each round, so a light class of full frames sends one every few rounds.
#[derive(Debug, Clone, Default)]
pub struct Ets {
    /// Bytes each class may still send in its current turn (below 0 after an overdraw).
    pub deficit: [i64; 8],
    /// Bytes a class's turn adds.
    pub quantum: [i64; 8],
    /// The class whose turn it is.
    pub cur: usize,
    /// Whether `cur` has had its quantum for this turn.
    pub credited: bool,
}

impl Ets {
    /// Quanta from the weights (class 0 first; missing classes weigh 1): the heaviest class gets
    /// one full frame, the others `weight / heaviest` of it (at least one byte).
    pub fn new(weights: &[f64], frame: u64) -> Self {
        let w: Vec<f64> = (0..8)
            .map(|c| weights.get(c).copied().unwrap_or(1.0))
            .collect();
        let max = w.iter().cloned().fold(0.0, f64::max).max(1e-9);
        let mut quantum = [0i64; 8];
        for c in 0..8 {
            quantum[c] = (((w[c] / max) * frame as f64).round() as i64).max(1);
        }
        Ets {
            quantum,
            ..Default::default()
        }
    }

    /// The turn passes to the next class.
    pub fn advance(&mut self) {
        self.cur = (self.cur + 1) % 8;
        self.credited = false;
    }

    /// A whole round passed and no class could send: every class in `active` is in debt. The
    /// rounds in which none of them would get out of it are credited at once (each such round
    /// adds each active class's quantum and sends nothing), leaving the round in which the first
    /// gets out to be played visit by visit. Returns false if no class is active.
    pub fn skip_rounds(&mut self, active: impl Fn(usize) -> bool) -> bool {
        let mut k = i64::MAX;
        for c in (0..8).filter(|&c| active(c)) {
            // Rounds until the deficit is positive again.
            let need = (1 - self.deficit[c]).max(0);
            k = k.min(((need + self.quantum[c] - 1) / self.quantum[c]).max(1));
        }
        if k == i64::MAX {
            return false;
        }
        for c in (0..8).filter(|&c| active(c)) {
            self.deficit[c] += (k - 1) * self.quantum[c];
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// DRR by hand: classes 1 and 2 backlogged with 1062 B frames at weights 16 : 1, the
    /// rounds played as the arbiter plays them (a class sends while its deficit is positive,
    /// keeps its debt, skips the rounds in which nobody can send).
    #[test]
    fn ets_quanta_give_byte_shares_by_weight_with_a_one_frame_grain() {
        let frame = 1062;
        let mut e = Ets::new(&[1.0, 16.0, 1.0], frame);
        // The heaviest class gets one frame a round, the others 1/16 of it.
        assert_eq!(e.quantum[1], 1062);
        assert_eq!(e.quantum[2], 66);
        assert_eq!(e.quantum[0], 66);
        let active = |c: usize| c == 1 || c == 2;
        let mut sent = [0i64; 8];
        let mut idle = 0;
        for _ in 0..200_000 {
            if idle >= 8 {
                assert!(e.skip_rounds(active));
                idle = 0;
            }
            let c = e.cur;
            if !active(c) {
                e.deficit[c] = 0;
                e.advance();
                idle += 1;
                continue;
            }
            if !e.credited {
                e.deficit[c] += e.quantum[c];
                e.credited = true;
            }
            if e.deficit[c] <= 0 {
                e.advance();
                idle += 1;
                continue;
            }
            e.deficit[c] -= frame as i64;
            sent[c] += frame as i64;
            idle = 0;
            if e.deficit[c] <= 0 {
                e.advance();
            }
        }
        let share = sent[1] as f64 / (sent[1] + sent[2]) as f64;
        assert!((share - 16.0 / 17.0).abs() < 1e-3, "{share}");
        // Nothing active: no round to skip.
        assert!(!e.skip_rounds(|_| false));
    }

    /// The rotation against a plain deque under random operations.
    #[test]
    fn rotations_behave_like_a_deque() {
        let mut r = Rotations::default();
        let mut d: VecDeque<u32> = VecDeque::new();
        let mut next = 0u32;
        let mut x = 12345u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        for _ in 0..20_000 {
            match rnd(6) {
                0 | 1 => {
                    r.push_back(0, next);
                    d.push_back(next);
                    next += 1;
                }
                2 if !d.is_empty() => {
                    let k = rnd(d.len() as u64) as u32;
                    r.rotate(0, k);
                    d.rotate_left(k as usize);
                }
                3 if !d.is_empty() => {
                    let i = rnd(d.len() as u64) as usize;
                    let q = d.remove(i).unwrap();
                    r.remove(q);
                }
                4 if !d.is_empty() => {
                    assert_eq!(r.pop_front(0), d.pop_front());
                }
                5 if !d.is_empty() => {
                    // Park some, then look for the first candidate.
                    let i = rnd(d.len() as u64) as usize;
                    r.park_until(d[i], 100);
                }
                _ => {}
            }
            assert_eq!(r.len(0) as usize, d.len());
            if rnd(50) == 0 {
                assert_eq!(r.sequence(0), d.iter().copied().collect::<Vec<_>>());
            }
        }
        assert_eq!(r.sequence(0), d.iter().copied().collect::<Vec<_>>());
        assert_eq!(r.front(0), d.front().copied());
    }

    #[test]
    fn candidates_skip_parked_qps_and_paused_priorities() {
        let mut r = Rotations::default();
        for q in 0..10 {
            r.push_back(0, q);
        }
        for q in 0..4 {
            r.park_until(q, 50 + q as u64);
        }
        r.park_paused(4, 3);
        assert_eq!(
            r.first_candidate(0, 10, 0),
            Some((4, 4)),
            "ready, priority not paused"
        );
        assert_eq!(
            r.first_candidate(0, 10, 1 << 3),
            Some((5, 5)),
            "priority 3 paused"
        );
        assert_eq!(r.first_candidate(0, 5, 1 << 3), None, "beyond the limit");
        // From a rotated front, the search wraps around.
        r.rotate(0, 6);
        assert_eq!(r.first_candidate(0, 10, 1 << 3), Some((0, 6)));
        r.park_until(6, 70);
        r.park_until(7, 70);
        r.park_until(8, 70);
        r.park_until(9, 70);
        assert_eq!(r.first_candidate(0, 10, 1 << 3), Some((9, 5)), "wrapped");
        assert_eq!(r.first_candidate(0, 9, 1 << 3), None, "beyond the limit");
        assert_eq!(r.first_candidate(0, 10, 0), Some((8, 4)), "wrapped");
        r.rotate(0, 4);
        assert_eq!(r.next_timer(), Some(50));
        r.release_timers(51);
        assert_eq!(r.first_candidate(0, 10, 1 << 3), Some((0, 0)));
        assert_eq!(r.first_candidate(0, 10, 0), Some((0, 0)));
        // A woken QP's timer no longer counts.
        r.wake(2);
        assert_eq!(r.next_timer(), Some(53));
        r.remove(3);
        assert_eq!(r.next_timer(), Some(70));
        for q in 6..10 {
            r.wake(q);
        }
        assert_eq!(r.next_timer(), None);
    }
}
