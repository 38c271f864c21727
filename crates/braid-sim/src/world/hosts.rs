//! Hosts and tenants: carrying out a NIC's effects (`apply`), running an application
//! through its verbs stack (`with_app`) and delivering CQ notifications.

use super::{Ev, World};
use crate::nic::{Effect, Effects};
use braid_engine::{EventQueue, Time};
use braid_verbs::{Event, Stack};

impl World {
    /// Carries out what a NIC call asked for.
    #[inline]
    pub fn apply(&mut self, now: Time, h: u32, eff: Effects, q: &mut EventQueue<Ev>) {
        // Most packets a NIC takes in change nothing the world must act on (an ACK that frees
        // nothing, data that completes no message): skip the empty walk and its drop.
        if !eff.kick && eff.rx_pfc.is_none() && eff.list.is_empty() {
            return;
        }
        self.apply_some(now, h, eff, q);
    }

    /// Timers are scheduled, then messages recorded, the PFC frame sent and CQ notifications
    /// queued, then the transmit side kicked. Timers and messages touch nothing the frame or the
    /// notifications do, so one walk in the order asked does the same; a notification waits for
    /// the frame (sending it may transmit, and a completion's notification queue behind).
    fn apply_some(&mut self, now: Time, h: u32, eff: Effects, q: &mut EventQueue<Ev>) {
        let mut later = Vec::new();
        for e in eff.list {
            match e {
                Effect::Timer(t, kind, qp, gen) => q.schedule(
                    t.max(now),
                    Ev::Timer {
                        host: h,
                        kind,
                        qp,
                        gen,
                    },
                ),
                Effect::Message(m) => self.measure.message(h, m),
                Effect::Notify(cq) if eff.rx_pfc.is_some() => later.push(cq),
                Effect::Notify(cq) => self.notify_cq(h, cq),
            }
        }
        if let Some(on) = eff.rx_pfc {
            let node = self.hosts[h as usize].node;
            let prio = self.params.nic.priority;
            if on {
                self.send_pfc(now, node, 0, prio, true, q);
            } else {
                self.send_pfc(now, node, 0, prio, false, q);
            }
        }
        for cq in later {
            self.notify_cq(h, cq);
        }
        if eff.kick {
            let node = self.hosts[h as usize].node;
            self.try_transmit(now, node, 0, q);
        }
    }

    fn notify_cq(&mut self, h: u32, cq: braid_verbs::CqId) {
        // Only armed CQs notify (once per arming), so there is nothing to deduplicate.
        if let Some(t) = self.hosts[h as usize].owners.cq_owner(cq) {
            self.pending_notify.push((h, t, cq));
        }
        self.measure.note_cq(h, cq);
    }

    /// Runs a tenant's callback with its verbs stack over this host's NIC (`ev` None: start it).
    pub fn with_app(
        &mut self,
        now: Time,
        h: u32,
        app: u32,
        q: &mut EventQueue<Ev>,
        ev: Option<Event>,
    ) {
        let mut sink = crate::hostverbs::HostSink::default();
        let created = std::cell::RefCell::new(Vec::new());
        let end;
        {
            let host = &mut self.hosts[h as usize];
            let slot = &mut host.apps[app as usize];
            let params = slot.params.as_deref().unwrap_or(&self.params);
            // The tenant's thread runs the callback once it is free.
            let start = if self.cpu_delay {
                now.max(slot.cpu.free_at)
            } else {
                now
            };
            if ev.is_none() {
                crate::lazy_flows::reserve_at_start(
                    slot.plan.as_deref(),
                    &mut host.nic,
                    &mut slot.cpu,
                    &self.cpu_cost,
                );
            }
            let mut bottom = crate::hostverbs::HostVerbs {
                nic: &mut host.nic,
                params,
                caps: &host.caps,
                cost: &self.cpu_cost,
                start,
                spent: 0,
                delay: self.cpu_delay,
                tenant: app,
                owners: &mut host.owners,
                cpu: &mut slot.cpu,
                sink: &mut sink,
                created: &created,
                plan: slot.plan.as_deref(),
            };
            let mut stack = Stack::new(&mut slot.stack, &mut bottom);
            let family = match ev {
                None => {
                    stack.start_layers();
                    let mut facing = super::facing::Facing {
                        stack: &mut stack,
                        created: &created,
                        family: Vec::new(),
                    };
                    slot.app.start(&mut facing);
                    facing.family
                }
                Some(ev) => {
                    let mut up = Vec::new();
                    stack.deliver(ev, &mut up);
                    let mut facing = super::facing::Facing {
                        stack: &mut stack,
                        created: &created,
                        family: Vec::new(),
                    };
                    for e in up {
                        slot.app.on_event(&mut facing, e);
                    }
                    facing.family
                }
            };
            end = bottom.start + bottom.spent;
            host.owners.family.extend(family);
            slot.cpu.free_at = end;
        }
        for (t, token) in sink.timers.drain(..) {
            let slot = self.keep_token(token);
            q.schedule(t.max(now), Ev::AppTimer { host: h, app, slot });
        }
        for (tenant, token) in sink.wakes.drain(..) {
            if (tenant as usize) < self.hosts[h as usize].apps.len() {
                let slot = self.keep_token(token);
                q.schedule(
                    end,
                    Ev::Wake {
                        host: h,
                        app: tenant,
                        slot,
                    },
                );
            }
        }
        let eff = std::mem::take(&mut sink.effects);
        self.apply(now, h, eff, q);
    }

    pub(super) fn flush_notifications(&mut self, now: Time, q: &mut EventQueue<Ev>) {
        while !self.pending_notify.is_empty() {
            let batch = std::mem::take(&mut self.pending_notify);
            for (h, app, cq) in batch {
                self.with_app(now, h, app, q, Some(Event::Completion(cq)));
            }
        }
    }

    pub fn all_apps_done(&self) -> bool {
        self.hosts
            .iter()
            .all(|h| h.apps.iter().all(|a| a.app.is_done()))
    }
}
