//! Deferred egress decisions at switches: a backlogged switch port needs no wake-up event per
//! packet.
//!
//! When a switch port finishes a packet at `T` and has more queued, the next packet is chosen
//! with the switch's state at `T` (queues, PFC state, shared buffer, RED). Only events at that
//! switch change that state, and nothing the decision does can be seen elsewhere before `T` plus
//! the shortest delay of the switch's links (the earliest its packets, PFC frames included,
//! arrive anywhere). So the decision is put off: the port is listed in the switch's `lag`, and
//! the switch *catches up* — makes its due decisions in time order, each as of its own time —
//! before any event at the switch is handled (a packet or PFC frame arriving, a link changing
//! state, a queue sample), at the end of every run slice, and, if nothing else comes first, at one
//! catch-up event per switch scheduled `lookahead` after the earliest due decision. A port
//! sending back to back at 100 Gb/s on 1 µs links thus makes ~12 decisions per catch-up instead
//! of one wake-up event per packet, and most catch-ups ride on arrivals that happen anyway.
//!
//! Each decision is the one the wake-up event would have made, in the same order relative to
//! every event at the switch. What differs is the order of *simultaneous* events: a packet sent
//! by a catch-up has its arrival scheduled later than a wake-up event would have scheduled it,
//! so it takes a later sequence number and, at a tie to the picosecond with another event at
//! its next hop, is handled after it rather than before (docs/performance.md).

use super::{Ev, Role, World};
use braid_engine::{EventQueue, Time};

impl World {
    /// A decision is due on switch `s`'s `port` at the port's `busy_until` (= `t`).
    #[inline]
    pub(super) fn defer(&mut self, s: u32, port: u16, t: Time, q: &mut EventQueue<Ev>) {
        let sw = &mut self.switches[s as usize];
        let p = &mut self.nodes[sw.node as usize].ports[port as usize];
        if p.lagging {
            sw.lag[p.lag_idx as usize].0 = t;
        } else {
            p.lagging = true;
            p.lag_idx = sw.lag.len() as u16;
            sw.lag.push((t, port));
        }
        sw.next_due = sw.next_due.min(t);
        let due = t + sw.lookahead;
        if sw.catch_up_at.is_none_or(|c| c > due) {
            sw.catch_up_at = Some(due);
            q.schedule(
                due,
                Ev::PortWake {
                    node: sw.node,
                    port: u16::MAX,
                },
            );
        }
    }

    /// Makes switch `s`'s decisions due before `now` (and at `now` if `inclusive`), earliest
    /// first, each at its own time. Called before anything at the switch is handled.
    #[inline(always)]
    pub(super) fn catch_up(&mut self, s: u32, now: Time, inclusive: bool, q: &mut EventQueue<Ev>) {
        let due = self.switches[s as usize].next_due;
        if due < now || (inclusive && due == now) {
            self.catch_up_slow(s, now, inclusive, q);
        }
    }

    #[inline(never)]
    fn catch_up_slow(&mut self, s: u32, now: Time, inclusive: bool, q: &mut EventQueue<Ev>) {
        let node = self.switches[s as usize].node;
        let due = |t: Time| t < now || (t == now && inclusive);
        let next = loop {
            // The earliest due decision (ties: the lowest port number), and the one after it.
            let lag = &self.switches[s as usize].lag;
            let Some(&(mut first)) = lag.first() else {
                break Time::MAX;
            };
            let mut at = 0;
            let mut second = (Time::MAX, u16::MAX);
            for (i, &e) in lag.iter().enumerate().skip(1) {
                if e < first {
                    second = first;
                    first = e;
                    at = i;
                } else if e < second {
                    second = e;
                }
            }
            if !due(first.0) {
                break first.0;
            }
            let port = first.1;
            let sw = &mut self.switches[s as usize];
            sw.lag.swap_remove(at);
            let ports = &mut self.nodes[node as usize].ports;
            if let Some(&(_, moved)) = sw.lag.get(at) {
                ports[moved as usize].lag_idx = at as u16;
            }
            ports[port as usize].lagging = false;
            // This port's decisions, while they come before every other port's.
            // (A port that starts lagging meanwhile, e.g. to send a PFC frame, ends the run.)
            let others = self.switches[s as usize].lag.len();
            let mut t = first.0;
            loop {
                self.try_transmit(t, node, port, q);
                let p = &self.nodes[node as usize].ports[port as usize];
                if !p.lagging
                    || !due(p.busy_until)
                    || (p.busy_until, port) > second
                    || self.switches[s as usize].lag.len() != others + 1
                {
                    break;
                }
                t = p.busy_until;
                let (sw, ports) = (
                    &mut self.switches[s as usize],
                    &mut self.nodes[node as usize].ports,
                );
                let at = ports[port as usize].lag_idx as usize;
                sw.lag.swap_remove(at);
                if let Some(&(_, moved)) = sw.lag.get(at) {
                    ports[moved as usize].lag_idx = at as u16;
                }
                ports[port as usize].lagging = false;
            }
        };
        self.switches[s as usize].next_due = next;
        self.schedule_catch_up(s, now, q);
    }

    /// Makes sure a catch-up event comes by `lookahead` after the earliest due decision.
    fn schedule_catch_up(&mut self, s: u32, now: Time, q: &mut EventQueue<Ev>) {
        let sw = &mut self.switches[s as usize];
        if sw.next_due == Time::MAX {
            return;
        }
        let due = (sw.next_due + sw.lookahead).max(now);
        if sw.catch_up_at.is_none_or(|c| c > due || c < now) {
            sw.catch_up_at = Some(due);
            q.schedule(
                due,
                Ev::PortWake {
                    node: sw.node,
                    port: u16::MAX,
                },
            );
        }
    }

    /// The catch-up event of the switch at `node`.
    pub(super) fn catch_up_event(&mut self, now: Time, node: u32, q: &mut EventQueue<Ev>) {
        let Role::Switch(s) = self.nodes[node as usize].role else {
            return;
        };
        let sw = &mut self.switches[s as usize];
        if sw.catch_up_at == Some(now) {
            sw.catch_up_at = None;
        }
        self.catch_up(s, now, true, q);
        // (Its decisions may all have been made already, by arrivals: then the next ones need an
        // event of their own.)
        self.schedule_catch_up(s, now, q);
    }

    /// Catches up the switch at `node`, if it is one (before an event there at `now`).
    #[inline(always)]
    pub(super) fn catch_up_node(&mut self, node: u32, now: Time, q: &mut EventQueue<Ev>) {
        if let Role::Switch(s) = self.nodes[node as usize].role {
            self.catch_up(s, now, false, q);
        }
    }

    /// Catches up every switch: to `now` exclusive (before a queue sample at `now`), or inclusive
    /// (at the end of a run slice, every event up to `now` handled).
    pub fn catch_up_all(&mut self, now: Time, inclusive: bool, q: &mut EventQueue<Ev>) {
        for s in 0..self.switches.len() as u32 {
            self.catch_up(s, now, inclusive, q);
        }
    }

    /// No deferred decisions (pcap captures write records in time order).
    pub fn defer_nothing(&mut self) {
        for sw in &mut self.switches {
            sw.lookahead = 0;
        }
    }
}
