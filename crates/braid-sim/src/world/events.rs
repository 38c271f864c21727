//! The event handler: what each world event does, and periodic sampling for measurement.

use super::{port_at, Ev, World};
use crate::nic::Effects;
use braid_engine::{EventQueue, Handler, Time};
use braid_verbs::Event;

impl Handler<Ev> for World {
    /// Arrivals, in two steps: for the event after next, the packet and the node it arrives at
    /// (at 10^4 hosts they are rarely still in cache); for the next one (its node loaded
    /// meanwhile), the egress port a switch will put it on (carried in the event), whose state
    /// forwarding reads first. A switch port's wake-up: the port, then the packet at the head
    /// of its queues, which the dequeue reads first and which has waited in the buffer long
    /// enough to leave the cache (docs/performance.md, "Round 6").
    #[inline]
    fn prefetch(&self, next: &Ev, after: Option<&Ev>) {
        match after {
            Some(&Ev::Arrive { node, pkt, .. }) => {
                self.pool.prefetch(pkt);
                if let Some(n) = self.hot.get(node as usize) {
                    braid_engine::prefetch(n);
                }
            }
            Some(&Ev::PortWake { node, port }) => self.prefetch_port(node, port),
            _ => {}
        }
        match *next {
            Ev::Arrive { node, out, .. } => self.prefetch_egress(node, out),
            Ev::PortWake { node, port } => self.prefetch_head(node, port),
            _ => {}
        }
    }

    fn handle(&mut self, now: Time, ev: Ev, q: &mut EventQueue<Ev>) {
        self.ev_counts[ev.kind()] += 1;
        match ev {
            Ev::Arrive {
                node,
                port,
                pkt,
                out,
            } => self.arrive(now, node, port, pkt, out, q),
            Ev::PortWake { node, port } => {
                let p = &mut self.ports[port_at(&self.hot, node, port)];
                if p.wake_at == Some(now) {
                    p.wake_at = None;
                }
                self.try_transmit(now, node, port, q);
            }
            Ev::NicRx { host, pkt } => {
                let size = self.pool.get(pkt).size as i64;
                let mut eff = Effects::default();
                self.hosts[host as usize]
                    .nic
                    .rx_backlog_change(-size, &self.params, &mut eff);
                self.apply(now, host, eff, q);
                self.nic_receive(now, host, pkt, q);
            }
            Ev::Timer {
                host,
                kind,
                qp,
                gen,
            } => {
                let mut eff = Effects::default();
                self.hosts[host as usize]
                    .nic
                    .on_timer(now, kind, qp, gen, &self.params, &mut eff);
                self.apply(now, host, eff, q);
            }
            Ev::AppTimer { host, app, slot } => {
                let token = self.take_token(slot);
                self.with_app(now, host, app, q, Some(Event::Timer(token)))
            }
            Ev::Wake { host, app, slot } => {
                let token = self.take_token(slot);
                self.with_app(now, host, app, q, Some(Event::Wake(token)))
            }
            Ev::AppStart { host, app } => self.with_app(now, host, app, q, None),
            Ev::LinkState {
                link,
                up,
                detected: false,
            } => self.link_changed(now, link, up, q),
            Ev::LinkState {
                link,
                up,
                detected: true,
            } => self.link_detected(link, up),
            Ev::Sample => {
                let iv = self.measure.interval;
                if iv > 0 && now.is_multiple_of(iv) {
                    self.sample(now);
                }
                self.sample_cc(now);
                if !self.measure.stopped {
                    if let Some(t) = self.measure.next_sample(now) {
                        q.schedule(t, Ev::Sample);
                    }
                }
            }
        }
        if !self.pending_notify.is_empty() {
            self.flush_notifications(now, q);
        }
    }
}

impl World {
    /// The run ended at `now`: sample the interval since the last sample (shorter than
    /// `measure.interval`), so the series holds every byte delivered.
    pub fn final_sample(&mut self, now: Time) {
        if self.measure.interval > 0 && now > self.measure.last_sample() {
            self.sample(now);
        }
    }

    fn sample(&mut self, now: Time) {
        let rx: Vec<(u32, u32, u64)> = self
            .hosts
            .iter()
            .enumerate()
            .flat_map(|(h, host)| {
                host.nic
                    .qps()
                    .filter(|qp| qp.rx_bytes > 0)
                    .map(move |qp| (h as u32, qp.qpn, qp.rx_bytes))
            })
            .collect();
        self.measure.sample_rx(now, &rx);
        let queues: Vec<(usize, u64)> = self
            .measure
            .queue_ports
            .iter()
            .enumerate()
            .map(|(i, &(n, p))| (i, self.ports[port_at(&self.hot, n, p)].bytes))
            .collect();
        self.measure.sample_queues(now, &queues);
    }
}
