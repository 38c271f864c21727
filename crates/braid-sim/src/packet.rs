//! Packets on the wire and the pool that owns them.
//!
//! Packets live in one slab and travel as 32-bit ids, so events stay small and no packet is
//! copied hop by hop.

/// Wire sizes (bytes) of RoCEv2 framing: Ethernet header 14 + FCS 4, IPv4 20, UDP 8, BTH 12,
/// ICRC 4. Preamble and inter-frame gap are not counted (as in HPCC ns-3).
pub const ROCE_HEADER: u32 = 14 + 4 + 20 + 8 + 12 + 4;
/// ACK/NAK: RoCE header plus the AETH (4).
pub const ACK_SIZE: u32 = ROCE_HEADER + 4;
/// CNP: RoCE header plus 16 reserved bytes.
pub const CNP_SIZE: u32 = ROCE_HEADER + 16;
/// READ request: RoCE header plus RETH (16).
pub const READ_REQ_SIZE: u32 = ROCE_HEADER + 16;
/// A PFC frame is a minimum-size Ethernet frame.
pub const PFC_SIZE: u32 = 64;
/// The RoCEv2 UDP destination port.
pub const ROCE_DPORT: u16 = 4791;

pub type PktId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PktKind {
    /// Payload of a SEND / WRITE / READ response.
    Data,
    /// READ request (responder turns it into response data).
    ReadReq,
    /// Cumulative acknowledgement: every PSN below `psn` arrived.
    Ack,
    /// Negative acknowledgement: expected `psn`; resend from there (go-back-N).
    Nak,
    /// Receiver not ready (no RECV posted): resend `psn` after a delay.
    RnrNak,
    /// DCQCN congestion notification for QP `dst_qp` at the data sender.
    Cnp,
    /// PFC pause (`aux` = 1) or resume (`aux` = 0) for priority `prio` — hop-local.
    Pfc,
}

/// Operation carried by a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataOp {
    Send,
    Write,
    ReadResp,
}

/// A packet.
///
/// The layout is fixed (`repr(C)`, aligned to a cache line) so that a hop through a switch touches
/// one line of it: everything forwarding, routing (ECMP on the 5-tuple), ECN marking, PFC
/// accounting and `put_on_wire` read comes first (line 0: kind, priority, flags, size, addresses,
/// ports, `in_port`), the transport's fields follow, and the 64-bit fields (addresses, lengths,
/// time sent) that only the NICs read come in line 1 (docs/performance.md, "Round 5").
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct Packet {
    // --- line 0: what a hop reads
    /// Source and destination host node ids.
    pub src: u32,
    pub dst: u32,
    /// Wire size in bytes.
    pub size: u32,
    pub sport: u16,
    pub dport: u16,
    /// Ingress port at the switch currently holding the packet (for PFC accounting).
    pub in_port: u16,
    pub kind: PktKind,
    pub prio: u8,
    /// ECN Congestion Experienced.
    pub ce: bool,
    /// Its bytes are accounted in the ingress port's PFC headroom (not the shared pool).
    pub in_hdrm: bool,
    // --- line 0, the transport's 32-bit and smaller fields
    pub op: DataOp,
    /// First / last packet of a message.
    pub first: bool,
    pub last: bool,
    /// Retransmitted copy.
    pub retx: bool,
    /// MP-RDMA: part of a synchronise message (`SendWr::fence`, §3.4); with `ipsn` the receiver
    /// knows the message's first PSN (psn − ipsn).
    pub sync: bool,
    /// Message-specific: immediate data present (`has_imm`) and value.
    pub has_imm: bool,
    /// ACKs: the PSN that triggered this ACK (selective acknowledgement; u32::MAX = none), the
    /// source port of that data packet (echoed so a multipath sender knows its path) and its ECN
    /// mark (ECN-Echo).
    pub ece: bool,
    /// Its payload bytes (tracked memory) wait in the sending NIC's side table, to be handed to
    /// the receiver on arrival: only then does the world look there (a lookup in another host's
    /// NIC per packet otherwise). Fills line 0's one byte of padding.
    pub tracked: bool,
    pub echo_sport: u16,
    pub sack: u32,
    pub payload: u32,
    pub src_qp: u32,
    pub dst_qp: u32,
    pub psn: u32,
    /// Generic field: PFC pause on/off, READ request length in PSNs, rkey of a WRITE.
    pub aux: u32,
    /// MP-RDMA: message sequence number of a data packet (counts the messages that consume a
    /// RECV: SEND, WRITE with immediate), so the receiver finds its RECV out of order (Fig. 3).
    pub msn: u32,
    /// MP-RDMA: the packet's index within its message (iPSN, Fig. 3).
    pub ipsn: u32,
    // --- line 1
    pub imm: u32,
    /// Destination address of this packet's payload (WRITE / READ response) or its offset in the
    /// message (SEND), and the source address (for data checking).
    pub addr: u64,
    pub src_addr: u64,
    /// Message length (READ request: bytes to read).
    pub msg_len: u64,
    /// Time the packet left its source NIC.
    pub sent_ps: u64,
    /// Endpoint delay (Swift's host delay, kept apart from the fabric's): time spent waiting
    /// for a receiving NIC's pipeline. A data packet gathers its wait at the responder; the ACK
    /// answering it starts with that and adds its own wait at the requester. 0 when no NIC made
    /// it wait (written only then: nothing on the common path).
    pub endpoint_ps: u64,
}

/// The packet classes link loss counts separately (`Packet::loss_class` indexes them; results
/// counters `drops_loss_<name>`, which sum to `drops_loss`). MP-RDMA's ACKs and NACKs are ACK and
/// NAK packets, its probes data packets; a READ response is data carrying `DataOp::ReadResp`.
pub const LOSS_CLASSES: [&str; 7] = [
    "data",
    "read_resp",
    "read_req",
    "ack",
    "nak",
    "rnr_nak",
    "cnp",
];

// What a hop reads is in the first cache line (see above); the record is two lines.
const _: () = assert!(std::mem::offset_of!(Packet, ipsn) + 4 <= 64);
const _: () = assert!(std::mem::size_of::<Packet>() == 128);

impl Packet {
    /// Its index in [`LOSS_CLASSES`]; `None` for a PFC frame, which link loss spares (see
    /// `World::put_on_wire`).
    pub fn loss_class(&self) -> Option<usize> {
        Some(match self.kind {
            PktKind::Data if self.op == DataOp::ReadResp => 1,
            PktKind::Data => 0,
            PktKind::ReadReq => 2,
            PktKind::Ack => 3,
            PktKind::Nak => 4,
            PktKind::RnrNak => 5,
            PktKind::Cnp => 6,
            PktKind::Pfc => return None,
        })
    }

    pub fn control(kind: PktKind, size: u32) -> Self {
        Packet {
            kind,
            op: DataOp::Write,
            src: 0,
            dst: 0,
            sport: 0,
            dport: ROCE_DPORT,
            prio: 0,
            ce: false,
            first: false,
            last: false,
            retx: false,
            sync: false,
            size,
            payload: 0,
            src_qp: 0,
            dst_qp: 0,
            psn: 0,
            has_imm: false,
            imm: 0,
            addr: 0,
            src_addr: 0,
            msg_len: 0,
            aux: 0,
            sack: u32::MAX,
            echo_sport: 0,
            ece: false,
            tracked: false,
            msn: 0,
            ipsn: 0,
            in_port: 0,
            in_hdrm: false,
            sent_ps: 0,
            endpoint_ps: 0,
        }
    }
}

/// Slab of packets with a free list.
#[derive(Default)]
pub struct PacketPool {
    slots: Vec<Packet>,
    free: Vec<PktId>,
    live: usize,
    pub created: u64,
    /// In-band telemetry records of the packets (`net/int.rs`), kept only in runs that read them.
    pub int: crate::net::int::IntArena,
}

impl PacketPool {
    #[inline]
    pub fn alloc(&mut self, p: Packet) -> PktId {
        self.live += 1;
        self.created += 1;
        let id = if let Some(id) = self.free.pop() {
            self.slots[id as usize] = p;
            id
        } else {
            self.slots.push(p);
            (self.slots.len() - 1) as PktId
        };
        if self.int.on {
            self.int.reset(id);
        }
        id
    }
    #[inline]
    pub fn free(&mut self, id: PktId) {
        self.live -= 1;
        self.free.push(id);
    }
    #[inline]
    pub fn get(&self, id: PktId) -> &Packet {
        &self.slots[id as usize]
    }
    /// Starts loading packet `id`'s record into the cache (a hint; nothing if `id` is free).
    #[inline]
    pub fn prefetch(&self, id: PktId) {
        if let Some(p) = self.slots.get(id as usize) {
            braid_engine::prefetch(p);
        }
    }
    /// Whether `id` names a slot of the pool (live or free; never panics on it).
    #[inline]
    pub fn live_slot(&self, id: PktId) -> bool {
        (id as usize) < self.slots.len()
    }
    #[inline]
    pub fn get_mut(&mut self, id: PktId) -> &mut Packet {
        &mut self.slots[id as usize]
    }
    pub fn live(&self) -> usize {
        self.live
    }
}
