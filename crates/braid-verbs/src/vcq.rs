//! A completion queue a middleware keeps for its application: the layer decides what the
//! application sees (its own completions, a flush, a completion of a virtual QP), so it cannot
//! hand the NIC's CQ up as it is, yet the application must see ibverbs' CQ semantics on it.
//!
//! ibverbs' rules, which [`VirtualCq`] keeps in one place:
//! - `req_notify_cq` arms the CQ for one notification; the notification disarms it;
//! - only a completion that arrives while the CQ is armed is announced (what was queued before
//!   the arming waits for the application's poll or for the next completion);
//! - one notification covers every completion that arrived until the application polls.
//!
//! A layer announces either inside an event it is handling (push [`Event::Completion`] into
//! `up`) or, when completions appear during a verb call (a flush, a refill), by a wake to itself
//! that it answers with the announcement: [`VirtualCq::push`] says when such a wake is due.

use crate::WorkCompletion;
use std::collections::VecDeque;

/// One application CQ as a middleware presents it: the completions the application has yet
/// to poll, whether it armed the CQ, and whether completions arrived that no notification
/// announced yet ("fresh").
///
/// Invariant: a fresh CQ holds at least one completion (a poll or a [`VirtualCq::retain`]
/// that empties it forgets the news).
#[derive(Debug, Default, Clone)]
pub struct VirtualCq {
    armed: bool,
    fresh: bool,
    buf: VecDeque<WorkCompletion>,
}

impl VirtualCq {
    pub fn new() -> Self {
        Self::default()
    }

    /// The application armed it (`req_notify_cq`). News gathered before stays news: a layer
    /// that queued completions in a verb call and marked them ([`VirtualCq::mark_fresh`])
    /// still announces them to an application that arms afterwards.
    pub fn arm(&mut self) {
        self.armed = true;
    }

    /// Arming by the letter of ibverbs: only completions queued from now on are announced.
    pub fn arm_for_new(&mut self) {
        self.armed = true;
        self.fresh = false;
    }

    /// Disarms without an announcement from here (the notification reached the application
    /// another way, e.g. the NIC's own event for a CQ the layer shares with unmanaged QPs).
    pub fn disarm(&mut self) {
        self.armed = false;
        self.fresh = false;
    }

    pub fn is_armed(&self) -> bool {
        self.armed
    }

    /// Whether a notification is due: armed, with completions no notification announced.
    pub fn event_due(&self) -> bool {
        self.armed && self.fresh
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Queues a completion for the application. Returns true when it is the first news of an
    /// armed CQ: the caller, if it is not inside an event, wakes itself to announce it (later
    /// completions before that announcement ride on the same wake).
    pub fn push(&mut self, wc: WorkCompletion) -> bool {
        self.buf.push_back(wc);
        self.note_news()
    }

    /// Completions were queued (by [`VirtualCq::extend`]): if the CQ is armed they are news.
    /// Returns true as [`VirtualCq::push`] does, when a wake is due.
    pub fn note_news(&mut self) -> bool {
        if self.armed && !self.fresh && !self.buf.is_empty() {
            self.fresh = true;
            return true;
        }
        false
    }

    /// Queues completions without marking them (the caller tracks the news itself, see
    /// [`VirtualCq::take_event`]).
    pub fn extend(&mut self, wcs: impl IntoIterator<Item = WorkCompletion>) {
        self.buf.extend(wcs);
    }

    /// Marks what is queued as news, armed or not (completions a layer queued inside a verb
    /// call, to be announced by the next event).
    pub fn mark_fresh(&mut self) {
        if !self.buf.is_empty() {
            self.fresh = true;
        }
    }

    /// Keeps only the completions `keep` accepts (a destroyed QP's completions go).
    pub fn retain(&mut self, keep: impl FnMut(&WorkCompletion) -> bool) {
        self.buf.retain(keep);
        if self.buf.is_empty() {
            self.fresh = false;
        }
    }

    /// Takes the notification if one is due: the CQ is armed, holds completions, and they are
    /// news (marked fresh, or `news`: the caller just queued them). Disarms it.
    pub fn take_event(&mut self, news: bool) -> bool {
        if self.armed && (news || self.fresh) && !self.buf.is_empty() {
            self.armed = false;
            self.fresh = false;
            return true;
        }
        false
    }

    /// The application's `poll_cq`: up to `max` completions, oldest first, appended to `out`.
    /// Polling the CQ empty consumes the news.
    pub fn poll(&mut self, max: usize, out: &mut Vec<WorkCompletion>) -> usize {
        let n = max.min(self.buf.len());
        out.extend(self.buf.drain(..n));
        if self.buf.is_empty() {
            self.fresh = false;
        }
        n
    }
}

#[cfg(test)]
mod tests;
