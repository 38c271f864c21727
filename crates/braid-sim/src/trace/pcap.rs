//! `measure.pcap`: packet traces in the libpcap format (nanosecond timestamps, magic
//! 0xa1b23c4d, Ethernet link type), readable by Wireshark and tshark, which decode RoCEv2 on UDP
//! port 4791.
//!
//! What is captured:
//! - `ports`: every frame a chosen port puts on its link (RoCE packets and PFC frames), stamped
//!   when its first bit leaves, with its ECN mark as it leaves (after the port's RED/ECN);
//! - `flows`: every packet of the chosen flows (data, READ requests and responses, ACKs, NAKs,
//!   CNPs, both directions), stamped when it reaches the host it is addressed to (`at =
//!   "receive"`, the default: a capture on both end hosts' receive side, showing the ECN marks
//!   the fabric set) or when it leaves the host that sends it (`at = "send"`).
//!
//! A packet captured at several points is in the file once per point. Frames are built by
//! [`super::frame`]; payload bytes are zeros, and frames are cut at `snaplen` (the record's
//! captured length says so, its original length is the frame's). At most `max_packets` frames are
//! kept (`pcap_missed` in the run statistics counts the rest), so a trace cannot fill the disk.

use super::frame;
use super::ports::QueueSpec;
use crate::api::{ConfigError, ScenarioError};
use crate::build::err;
use crate::measure::SharedLog;
use crate::nic::addr_node;
use crate::packet::{Packet, PktKind};
use crate::world::{port_at, Role, World};
use braid_engine::Time;
use braid_verbs::QpType;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// `[measure.pcap]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PcapConfig {
    /// Flow ids (the `flow` column of `flows.parquet`) whose packets are captured.
    pub flows: Vec<u32>,
    /// Ports whose outgoing frames are captured: "node:port", `{ node, peer }` or "all-fabric",
    /// as in `measure.queues`.
    pub ports: Vec<QueueSpec>,
    /// Where a flow's packets are captured: "receive" (at the host they reach) or "send" (at the
    /// host that sends them).
    pub at: CaptureAt,
    /// The most frames kept; the rest are counted (`pcap_missed`) and dropped.
    pub max_packets: u64,
    /// Bytes kept of each frame (64 to 65535; default: whole frames). Wireshark decodes the
    /// headers of a cut frame but marks it malformed (its RoCE dissector wants the whole packet).
    pub snaplen: u32,
}

impl Default for PcapConfig {
    fn default() -> Self {
        PcapConfig {
            flows: vec![],
            ports: vec![],
            at: CaptureAt::Receive,
            max_packets: 100_000,
            snaplen: 65535,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CaptureAt {
    #[default]
    Receive,
    Send,
}

/// The most frames `max_packets` may ask for (about 13 GB at the largest snap length).
pub const MAX_PACKETS_LIMIT: u64 = 200_000_000;

impl PcapConfig {
    pub fn enabled(&self) -> bool {
        !self.flows.is_empty() || !self.ports.is_empty()
    }

    /// The checks of the table alone (keys relative to `[measure.pcap]`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_PACKETS_LIMIT).contains(&self.max_packets) {
            return Err(ConfigError::new(
                "max_packets",
                format!("expected a whole number from 1 to {MAX_PACKETS_LIMIT}"),
            ));
        }
        if !(64..=65535).contains(&self.snaplen) {
            return Err(ConfigError::new(
                "snaplen",
                "expected a number of bytes from 64 to 65535",
            ));
        }
        Ok(())
    }

    /// Builds the tracer with its ports resolved (None when nothing is captured); flows are
    /// checked by [`PcapTracer::set_flows`] once the run's flows exist.
    pub fn build(
        &self,
        world: &World,
        names: &HashMap<String, u32>,
    ) -> Result<Option<PcapTracer>, ScenarioError> {
        self.validate().map_err(|e| e.under("measure.pcap"))?;
        if !self.enabled() {
            return Ok(None);
        }
        let mut ports = HashSet::new();
        for (i, spec) in self.ports.iter().enumerate() {
            let path = format!("measure.pcap.ports[{i}]");
            for (n, p, name) in super::ports::resolve_ports(world, spec, &path, names)? {
                if !ports.insert((n, p)) {
                    return Err(err(
                        path,
                        format!("port {name} is already captured; list each port once"),
                    ));
                }
            }
        }
        Ok(Some(PcapTracer {
            ports,
            flows: vec![],
            flows_wanted: self.flows.clone(),
            at_send: self.at == CaptureAt::Send,
            max_packets: self.max_packets,
            snaplen: self.snaplen,
            log: None,
            buf: Vec::new(),
            packets: 0,
            missed: 0,
            scratch: Vec::new(),
        }))
    }
}

/// The capture: where, what, and the records so far.
pub struct PcapTracer {
    ports: HashSet<(u32, u16)>,
    flows: Vec<u32>,
    flows_wanted: Vec<u32>,
    at_send: bool,
    max_packets: u64,
    snaplen: u32,
    log: Option<SharedLog>,
    /// pcap records (header and frame), back to back.
    buf: Vec<u8>,
    pub packets: u64,
    pub missed: u64,
    scratch: Vec<u8>,
}

impl PcapTracer {
    /// Checks `measure.pcap.flows` against the run's `n_flows` flows and keeps the flow log (the
    /// flows' QPs are known once their applications create them).
    pub fn set_flows(&mut self, n_flows: usize, log: SharedLog) -> Result<(), ScenarioError> {
        for (i, &f) in self.flows_wanted.iter().enumerate() {
            if f as usize >= n_flows {
                return Err(err(
                    format!("measure.pcap.flows[{i}]"),
                    format!(
                        "no flow {f}: the run has {n_flows} flows (ids 0 to {})",
                        n_flows.saturating_sub(1)
                    ),
                ));
            }
            if self.flows.contains(&f) {
                return Err(err(
                    format!("measure.pcap.flows[{i}]"),
                    format!("flow {f} is listed twice"),
                ));
            }
            self.flows.push(f);
        }
        self.log = Some(log);
        Ok(())
    }

    /// The pcap file: global header and the records.
    pub fn file(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(24 + self.buf.len());
        f.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        f.extend_from_slice(&2u16.to_le_bytes());
        f.extend_from_slice(&4u16.to_le_bytes());
        f.extend_from_slice(&0i32.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&self.snaplen.to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
        f.extend_from_slice(&self.buf);
        f
    }

    fn room(&mut self) -> bool {
        if self.packets >= self.max_packets {
            self.missed += 1;
            false
        } else {
            true
        }
    }

    /// Appends one record whose frame is in `scratch`.
    fn record(&mut self, now: Time, orig_len: usize) {
        let sec = now / 1_000_000_000_000;
        let nsec = (now % 1_000_000_000_000) / 1000;
        self.buf.extend_from_slice(&(sec as u32).to_le_bytes());
        self.buf.extend_from_slice(&(nsec as u32).to_le_bytes());
        self.buf
            .extend_from_slice(&(self.scratch.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&(orig_len as u32).to_le_bytes());
        self.buf.extend_from_slice(&self.scratch);
        self.packets += 1;
    }

    /// Whether `pk` belongs to a chosen flow: one of its ends is a chosen flow's sending or
    /// receiving QP (or a QP a middleware made for one).
    fn flow_packet(&self, world: &World, pk: &Packet) -> bool {
        if self.flows.is_empty() || pk.kind == PktKind::Pfc {
            return false;
        }
        let Some(log) = self.log.as_ref().and_then(|l| l.try_borrow().ok()) else {
            return false;
        };
        for (addr, qpn) in [(pk.src, pk.src_qp), (pk.dst, pk.dst_qp)] {
            let Some(h) = world.host_of(addr) else {
                continue;
            };
            let node = addr_node(addr);
            let head = world.hosts[h].owners.family_head(qpn);
            if let Some(f) = log.rx_qp_flow.get(&(node, head)) {
                if self.flows.contains(f) {
                    return true;
                }
            }
            if self
                .flows
                .iter()
                .any(|&f| log.flows[f as usize].src_qp == Some((node, head)))
            {
                return true;
            }
        }
        false
    }
}

/// The type of the QP a packet comes from or goes to (ACKs and READ traffic are RC's).
fn qp_type(world: &World, pk: &Packet) -> QpType {
    if pk.kind != PktKind::Data {
        return QpType::Rc;
    }
    world
        .host_of(pk.src)
        .and_then(|h| world.hosts[h].nic.qp(pk.src_qp))
        .map_or(QpType::Rc, |q| q.qp_type)
}

impl World {
    /// `node` puts packet `id` on the link of `port` at `now` (called only while tracing).
    #[cold]
    #[inline(never)]
    pub(crate) fn pcap_on_wire(&mut self, now: Time, node: u32, port: u16, id: u32) {
        let Some(mut t) = self.measure.pcap.take() else {
            return;
        };
        let pk = self.pool.get(id);
        let from_host = matches!(self.nodes[node as usize].role, Role::Host(_));
        let want =
            t.ports.contains(&(node, port)) || (t.at_send && from_host && t.flow_packet(self, pk));
        if want && t.room() {
            let p = &self.ports[port_at(&self.hot, node, port)];
            let (src, dst) = (frame::mac(node, port), frame::mac(p.peer_node, p.peer_port));
            t.scratch.clear();
            let snap = t.snaplen as usize;
            let (_, len) = if pk.kind == PktKind::Pfc {
                frame::write_pfc(pk.prio, pk.aux == 1, src, snap, &mut t.scratch)
            } else {
                frame::write_roce(pk, qp_type(self, pk), src, dst, snap, &mut t.scratch)
            };
            t.record(now, len);
        }
        self.measure.pcap = Some(t);
    }

    /// Packet `id` finished arriving at host `node` on `port` (called only while tracing).
    #[cold]
    #[inline(never)]
    pub(crate) fn pcap_arrive(&mut self, now: Time, node: u32, port: u16, id: u32) {
        let Some(mut t) = self.measure.pcap.take() else {
            return;
        };
        let pk = self.pool.get(id);
        if !t.at_send && t.flow_packet(self, pk) && t.room() {
            let p = &self.ports[port_at(&self.hot, node, port)];
            let (src, dst) = (frame::mac(p.peer_node, p.peer_port), frame::mac(node, port));
            t.scratch.clear();
            let snap = t.snaplen as usize;
            let (_, len) = frame::write_roce(pk, qp_type(self, pk), src, dst, snap, &mut t.scratch);
            t.record(now, len);
        }
        self.measure.pcap = Some(t);
    }
}
