//! The packet hop machinery: egress ports transmitting (`try_transmit`, `put_on_wire`),
//! drops, PFC frames, arrival at a node and forwarding through a switch.

use super::{port_at, Ev, Role, World, LB_AT_ARRIVAL, NO_PORT, NO_SWITCH};
use crate::net::{red_probability, Pool, MAX_PRIO};
use crate::nic::{addr_node, Effects, NextTx};
use crate::packet::{Packet, PktId, PktKind, PFC_SIZE};
use braid_engine::{EventQueue, Time};

impl World {
    /// Schedules a wake-up of port `port` of `node` (index `pi` in `ports`) at `t`.
    fn wake_at(&mut self, pi: usize, node: u32, port: u16, t: Time, q: &mut EventQueue<Ev>) {
        self.wake_at_inline(pi, node, port, t, q);
    }

    /// [`World::wake_at`], inlined into `put_on_wire` (a packet's hop, where most wake-ups are
    /// scheduled: the call's register saves cost more than the copy; slice1ms -16 M
    /// instructions, -0.37%; k34m -0.23%).
    #[inline(always)]
    fn wake_at_inline(&mut self, pi: usize, node: u32, port: u16, t: Time, q: &mut EventQueue<Ev>) {
        let p = &mut self.ports[pi];
        if p.wake_at.is_none_or(|w| t < w) {
            p.wake_at = Some(t);
            q.schedule(t, Ev::PortWake { node, port });
        }
    }

    /// Starts the next transmission on a port if it is free.
    pub(super) fn try_transmit(&mut self, now: Time, node: u32, port: u16, q: &mut EventQueue<Ev>) {
        // The port's index and the node's role, once: the hop below (`put_on_wire` included)
        // uses both, and nothing changes them.
        let pi = port_at(&self.hot, node, port);
        let busy = self.ports[pi].busy_until;
        if busy > now {
            self.wake_at(pi, node, port, busy, q);
            return;
        }
        let role = self.hot[node as usize].role;
        let id = match role {
            Role::Host(h) => {
                // (A host's one port is its port 0: `pi`.)
                let paused = self.ports[pi].paused;
                let mut eff = Effects::default();
                let host = &mut self.hosts[h as usize];
                let next =
                    host.nic
                        .next_packet(now, &paused, &self.params, &mut self.pool, &mut eff);
                self.apply(now, h, eff, q);
                match next {
                    NextTx::Packet(id) => id,
                    NextTx::WaitUntil(t) => {
                        self.wake_at(pi, node, port, t, q);
                        return;
                    }
                    NextTx::Idle => return,
                }
            }
            Role::Switch(s) => {
                let p = &mut self.ports[pi];
                let Some(id) = p.dequeue(self.sw.scheduler, &self.sw.dwrr_quantum, &self.pool)
                else {
                    return;
                };
                let pk = self.pool.get_mut(id);
                let size = pk.size as u64;
                if pk.kind != PktKind::Pfc {
                    // RED/ECN on the egress queue this packet leaves.
                    let prio = (pk.prio as usize).min(p.queues.len() - 1);
                    let qlen = p.qbytes[prio] + size;
                    if self.sw.ecn.enabled && !pk.ce {
                        let pr = red_probability(qlen, &p.ecn);
                        let sw = &mut self.switches[s as usize];
                        if pr > 0.0 && (pr >= 1.0 || sw.ecn_rng.uniform() < pr) {
                            pk.ce = true;
                            p.ecn_marks += 1;
                            self.counters.ecn_marks += 1;
                        }
                    }
                    // The packet leaves the shared buffer and its ingress queue.
                    let in_port = pk.in_port as usize;
                    let pprio = pk.prio as usize & 7;
                    let sw = &mut self.switches[s as usize];
                    if pk.in_hdrm {
                        sw.hdrm_used[in_port] -= size;
                    } else {
                        sw.shared_used -= size;
                    }
                    sw.ingress[in_port][pprio] -= size;
                    if sw.pause_sent[in_port][pprio]
                        && sw.below_xon(&self.sw, sw.ingress[in_port][pprio])
                    {
                        sw.pause_sent[in_port][pprio] = false;
                        self.counters.pfc_resumes += 1;
                        self.send_pfc(now, node, in_port as u16, pprio as u8, false, q);
                    }
                }
                if self.pool.int.on {
                    self.stamp_int(pi, id, now);
                }
                id
            }
        };
        self.put_on_wire(now, node, port, pi, role, id, q);
    }

    // Inlined into its two callers (forwarding's fast path, `try_transmit`): the call's own
    // register saves and restores were ~17 instructions per packet.
    //
    // `pi` is the port's index in `ports` and `role` the node's: both callers know them. With
    // `Port::peer_switch` (no lookup of the peer's role) and `wake_at` taking the index too:
    // slice1ms -111 M instructions (-2.4%), k34m -2.4%.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn put_on_wire(
        &mut self,
        now: Time,
        node: u32,
        port: u16,
        pi: usize,
        role: Role,
        id: PktId,
        q: &mut EventQueue<Ev>,
    ) {
        let pk = self.pool.get(id);
        let size = pk.size as u64;
        let is_pfc = pk.kind == PktKind::Pfc;
        let p = &mut self.ports[pi];
        p.tx_pfc += is_pfc as u64;
        let ser = p.serialization(size);
        p.busy_until = now + ser;
        p.tx_bytes += size;
        p.tx_pkts += 1;
        let (peer, peer_port, delay, up) = (p.peer_node, p.peer_port, p.delay, p.up);
        let peer_switch = p.peer_switch;
        // Link loss (bit errors) drops any frame: data, READ requests, ACKs, NAKs, CNPs; one
        // draw per frame from the port's stream. Except PFC frames: the model's pause has no
        // timer (a real one expires after its quanta, and a congested switch refreshes it), so a
        // lost resume would pause a port for the rest of the run.
        let lost = up && p.loss > 0.0 && !is_pfc && p.loss_rng.bernoulli(p.loss);
        if self.measure.pcap.is_some() {
            self.pcap_on_wire(now, node, port, id);
        }
        if !up {
            self.counters.drops_link_down += 1;
            self.drop_packet(id);
        } else if lost {
            self.counters.drops_loss += 1;
            if let Some(c) = self.pool.get(id).loss_class() {
                self.counters.drops_loss_by_class[c] += 1;
            }
            self.drop_packet(id);
        } else {
            // A PFC frame is consumed at the hop; a host forwards nothing. (`is_pfc`, and
            // `forward`'s `ce`, read before the calls that take `self` mutably: reading them again
            // after cost a bounds check and a load; slice1ms -22 M instructions, -0.49%.)
            let out = if peer_switch == NO_SWITCH || is_pfc {
                NO_PORT
            } else {
                self.egress_at(peer_switch, self.pool.get(id))
            };
            q.schedule(
                now + ser + delay,
                Ev::Arrive {
                    node: peer,
                    port: peer_port,
                    pkt: id,
                    out,
                },
            );
        }
        // Come back when this transmission ends, if anything may follow.
        let more = match role {
            Role::Host(h) => self.hosts[h as usize].nic.has_pending(),
            Role::Switch(_) => {
                let p = &self.ports[pi];
                !p.ctrl.is_empty() || p.bytes > 0
            }
        };
        if more {
            self.wake_at_inline(pi, node, port, now + ser, q);
        }
    }

    /// In-band telemetry (`net/int.rs`): a data packet leaving a switch port gets the port's
    /// record. Kept out of line: runs without INT never call it.
    #[inline(never)]
    fn stamp_int(&mut self, pi: usize, id: PktId, now: Time) {
        let pk = self.pool.get(id);
        if pk.kind != PktKind::Data {
            return;
        }
        let size = pk.size as u64;
        let p = &self.ports[pi];
        // `put_on_wire` counts this packet's bytes next: the record includes them.
        let hop = crate::net::int::IntHop {
            qlen: p.bytes,
            tx_bytes: p.tx_bytes + size,
            ts: now,
            rate_bps: p.rate,
            port: pi as u32,
        };
        crate::net::int::stamp(&mut self.pool.int, id, hop);
    }

    fn drop_packet(&mut self, id: PktId) {
        // Payload bytes (tracked memory) travel in the sender NIC's side table.
        if let Some(h) = self.host_of(self.pool.get(id).src) {
            let p = &mut self.hosts[h].nic.payloads;
            if !p.is_empty() {
                p.remove(&id);
            }
        }
        self.pool.free(id);
    }

    /// The host index of an address (any of the host's), if it is a host's.
    pub fn host_of(&self, addr: u32) -> Option<usize> {
        match self.host_index.get(addr_node(addr) as usize) {
            Some(&h) if h != u32::MAX => Some(h as usize),
            _ => None,
        }
    }

    /// Queues a PFC frame on `port` of `node` (towards the upstream that feeds that port).
    pub(super) fn send_pfc(
        &mut self,
        now: Time,
        node: u32,
        port: u16,
        prio: u8,
        pause: bool,
        q: &mut EventQueue<Ev>,
    ) {
        let mut pk = Packet::control(PktKind::Pfc, PFC_SIZE);
        pk.prio = prio;
        pk.aux = pause as u32;
        let id = self.pool.alloc(pk);
        if pause {
            self.counters.pfc_pauses += 1;
        }
        self.measure.pfc_frame(crate::measure::PfcRecord {
            time: now,
            node,
            port,
            prio,
            pause,
            received: false,
        });
        match self.hot[node as usize].role {
            Role::Switch(_) => {
                self.ports[port_at(&self.hot, node, port)]
                    .ctrl
                    .push_back(id);
                self.try_transmit(now, node, port, q);
            }
            Role::Host(h) => {
                let mut eff = Effects::default();
                self.hosts[h as usize].nic.push_ctrl(id, &mut eff);
                self.apply(now, h, eff, q);
            }
        }
    }

    // ------------------------------------------------------------------ arrival

    #[allow(clippy::too_many_arguments)]
    pub(super) fn arrive(
        &mut self,
        now: Time,
        node: u32,
        port: u16,
        id: PktId,
        out: u16,
        q: &mut EventQueue<Ev>,
    ) {
        let pk = self.pool.get(id);
        if pk.kind == PktKind::Pfc {
            let (prio, on) = (pk.prio as usize, pk.aux == 1);
            self.pool.free(id);
            self.measure.pfc_frame(crate::measure::PfcRecord {
                time: now,
                node,
                port,
                prio: prio as u8,
                pause: on,
                received: true,
            });
            self.ports[port_at(&self.hot, node, port)].set_paused(prio, on, now);
            if !on {
                self.try_transmit(now, node, port, q);
            }
            return;
        }
        match self.hot[node as usize].role {
            Role::Host(h) => {
                if self.measure.pcap.is_some() {
                    self.pcap_arrive(now, node, port, id);
                }
                let pk = self.pool.get(id);
                if addr_node(pk.dst) != node {
                    self.counters.drops_no_route += 1;
                    self.drop_packet(id);
                    return;
                }
                let nic = &mut self.hosts[h as usize].nic;
                let done = nic.rx_admit(now, pk, &self.params);
                // One receive pipeline, first in first out: while packets admitted earlier are
                // still in it (a backlog), this one queues behind them even if its own work ends
                // now. (It arrived as a QP-cache-miss stall ended: their `NicRx` events are due
                // now too, and processing it at once would overtake them, reordering a QP.)
                if done > now || nic.rx_backlog > 0 {
                    let mut eff = Effects::default();
                    let size = pk.size as i64;
                    if done > now {
                        // The wait is the endpoint's delay, not the fabric's (Swift).
                        self.pool.get_mut(id).endpoint_ps += done - now;
                    }
                    let nic = &mut self.hosts[h as usize].nic;
                    nic.rx_backlog_change(size, &self.params, &mut eff);
                    q.schedule(done, Ev::NicRx { host: h, pkt: id });
                    self.apply(now, h, eff, q);
                } else {
                    self.nic_receive(now, h, id, q);
                }
            }
            Role::Switch(s) => self.forward(now, s as usize, node, port, id, out, q),
        }
    }

    pub(super) fn nic_receive(&mut self, now: Time, h: u32, id: PktId, q: &mut EventQueue<Ev>) {
        // Payload bytes (tracked memory) travel in the sender NIC's side table.
        let pk = self.pool.get(id);
        let payload = if pk.tracked {
            self.host_of(pk.src)
                .and_then(|s| self.hosts[s].nic.payloads.remove(&id))
        } else {
            None
        };
        let mut eff = Effects::default();
        let host = &mut self.hosts[h as usize];
        if let Some(b) = payload {
            host.nic.payloads.insert(id, b);
        }
        host.nic
            .receive(now, id, &self.params, &mut self.pool, &mut eff);
        self.apply(now, h, eff, q);
    }

    /// The egress port switch `sw` will forward `pk` (not a PFC frame) on when it arrives
    /// there; `NO_PORT` if it has no route.
    ///
    /// A route depends on the switch's tables and seed (fixed once the run starts) and on the
    /// packet's addresses and ports (unchanged on the wire), so computing it when the packet is
    /// put on the wire gives the port the arrival would compute, once instead of twice (the
    /// arrival's prefetch computed it too, through an out-of-line closure).
    ///
    /// Whether the peer is a switch comes from the port (`Port::peer_switch`), not from the
    /// peer's record in `hot` (a load, its bounds check and a likely cache miss at 10^4 hosts).
    ///
    /// A switch with a load balancer other than ECMP's hash chooses on arrival, from its state
    /// then (`LB_AT_ARRIVAL`; `World::balance`).
    #[inline(never)]
    fn egress_at(&self, sw: u32, pk: &Packet) -> u16 {
        if self.routes_at_arrival(sw as usize) {
            return LB_AT_ARRIVAL;
        }
        self.route_or(sw as usize, pk, NO_PORT)
    }

    /// Starts loading egress port `out` of `node` (from an arrival's event; `NO_PORT`: none).
    #[inline]
    pub(super) fn prefetch_egress(&self, node: u32, out: u16) {
        if out >= LB_AT_ARRIVAL {
            return;
        }
        let Some(n) = self.hot.get(node as usize) else {
            return;
        };
        // `get` only keeps a hint in bounds.
        if let Some(p) = self.ports.get(n.first_port as usize + out as usize) {
            // Its first three cache lines (`net::Port`'s layout).
            braid_engine::prefetch(&p.busy_until);
            braid_engine::prefetch(&p.ctrl);
            braid_engine::prefetch(&p.ecn);
        }
    }

    /// Starts loading the lines of port `port` of `node` that a wake-up reads (a switch's; a
    /// host's NIC chooses its packet from its own state).
    #[inline]
    pub(super) fn prefetch_port(&self, node: u32, port: u16) {
        if let Some(p) = self.switch_port(node, port) {
            braid_engine::prefetch(&p.busy_until);
            braid_engine::prefetch(&p.ctrl);
        }
    }

    /// Starts loading the packet a switch port's wake-up will most likely send (`Port::head`).
    #[inline]
    pub(super) fn prefetch_head(&self, node: u32, port: u16) {
        if let Some(id) = self.switch_port(node, port).and_then(|p| p.head()) {
            self.pool.prefetch(id);
        }
    }

    /// Port `port` of `node` if `node` is a switch (for hints: never panics).
    #[inline]
    fn switch_port(&self, node: u32, port: u16) -> Option<&crate::net::Port> {
        let n = self.hot.get(node as usize)?;
        if !matches!(n.role, Role::Switch(_)) {
            return None;
        }
        self.ports.get(n.first_port as usize + port as usize)
    }

    /// Forwards packet `id`, arrived on `in_port` of switch `s` (at `node`), on port `out`
    /// (its route, `egress_at`; `NO_PORT`: none, the packet is dropped).
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &mut self,
        now: Time,
        s: usize,
        node: u32,
        in_port: u16,
        id: PktId,
        out: u16,
        q: &mut EventQueue<Ev>,
    ) {
        // (One comparison for both markers: `LB_AT_ARRIVAL` is `NO_PORT - 1`.)
        let out = if out >= LB_AT_ARRIVAL {
            let out = if out == LB_AT_ARRIVAL {
                self.balance(now, s, id)
            } else {
                out
            };
            if out == NO_PORT {
                self.counters.drops_no_route += 1;
                self.drop_packet(id);
                return;
            }
            out
        } else {
            out
        };
        let pk = self.pool.get(id);
        let size = pk.size as u64;
        let ce = pk.ce;
        let prio = (pk.prio as usize).min(MAX_PRIO - 1);
        let lossless = self.lossless_mask & (1 << prio) != 0;
        let control = matches!(
            pk.kind,
            PktKind::Ack | PktKind::Nak | PktKind::RnrNak | PktKind::Cnp
        );
        let sw = &mut self.switches[s];
        let Some(pool) = sw.admit(in_port as usize, size, lossless, control) else {
            self.counters.drops_buffer += 1;
            self.drop_packet(id);
            return;
        };
        // Fast path: an idle egress with nothing queued sends the packet at once. The buffer would
        // hold it for no time, so nothing changes but the work (unless it would trip XOFF, which
        // the full path handles).
        let ei = port_at(&self.hot, node, out);
        let egress = &self.ports[ei];
        let q_prio = prio.min(egress.queues.len() - 1);
        // (The XOFF test last: it is needed only when the egress is idle.)
        if egress.busy_until <= now
            && egress.bytes == 0
            && egress.ctrl.is_empty()
            && !egress.paused[q_prio]
            && !(lossless && sw.above_xoff(&self.sw, sw.ingress[in_port as usize][prio] + size))
        {
            self.counters.packets_forwarded += 1;
            if self.sw.ecn.enabled && !ce {
                let pr = red_probability(size, &egress.ecn);
                if pr > 0.0 && (pr >= 1.0 || sw.ecn_rng.uniform() < pr) {
                    self.pool.get_mut(id).ce = true;
                    self.ports[ei].ecn_marks += 1;
                    self.counters.ecn_marks += 1;
                }
            }
            self.put_on_wire(now, node, out, ei, Role::Switch(s as u32), id, q);
            return;
        }
        match pool {
            Pool::Shared => sw.shared_used += size,
            Pool::Headroom => sw.hdrm_used[in_port as usize] += size,
        }
        sw.ingress[in_port as usize][prio] += size;
        self.counters.packets_forwarded += 1;
        let pause = lossless
            && !sw.pause_sent[in_port as usize][prio]
            && sw.above_xoff(&self.sw, sw.ingress[in_port as usize][prio]);
        if pause {
            sw.pause_sent[in_port as usize][prio] = true;
        }
        let pk = self.pool.get_mut(id);
        pk.in_port = in_port;
        pk.in_hdrm = pool == Pool::Headroom;
        self.ports[ei].enqueue(id, prio, size);
        if pause {
            self.send_pfc(now, node, in_port, prio as u8, true, q);
        }
        self.try_transmit(now, node, out, q);
    }
}
