//! RoCEv2 frames as they would be on the wire, for packet traces: Ethernet II, IPv4, UDP to port
//! 4791, the InfiniBand Base Transport Header and the extended headers the operation carries
//! (RETH, AETH, DETH, ImmDt), the payload (zero-filled) and an ICRC placeholder. Also the PFC
//! frame (IEEE 802.1Qbb MAC control). Field layouts: InfiniBand Architecture Specification
//! vol. 1, §9.2–9.3 (BTH and extended headers) and Annex A16/A17 (RoCE, RoCEv2, CNP).
//!
//! Addresses: the IPv4 address of a host's address `node | k << 24` (its `k`-th, see
//! `nic.addresses`) is `(10 + k).a.b.c` with `a.b.c` the 24-bit node id; the MAC address of port
//! `p` of node `n` is `02:nn:nn:nn:pp:pp` (locally administered).

use crate::packet::{DataOp, Packet, PktKind, ROCE_DPORT};
use braid_verbs::QpType;

pub const ETH_LEN: usize = 14;
pub const IPV4_LEN: usize = 20;
pub const UDP_LEN: usize = 8;
pub const BTH_LEN: usize = 12;
pub const RETH_LEN: usize = 16;
pub const AETH_LEN: usize = 4;
pub const DETH_LEN: usize = 8;
pub const IMM_LEN: usize = 4;
pub const ICRC_LEN: usize = 4;
/// A CNP's 16 reserved bytes after the BTH (RoCEv2 Annex A17.9.3).
pub const CNP_PAD: usize = 16;
/// The shortest Ethernet frame without its FCS.
pub const MIN_FRAME: usize = 60;

/// BTH opcodes (IBA Table 38).
pub mod op {
    pub const SEND_FIRST: u8 = 0x00;
    pub const SEND_MIDDLE: u8 = 0x01;
    pub const SEND_LAST: u8 = 0x02;
    pub const SEND_LAST_IMM: u8 = 0x03;
    pub const SEND_ONLY: u8 = 0x04;
    pub const SEND_ONLY_IMM: u8 = 0x05;
    pub const WRITE_FIRST: u8 = 0x06;
    pub const WRITE_MIDDLE: u8 = 0x07;
    pub const WRITE_LAST: u8 = 0x08;
    pub const WRITE_LAST_IMM: u8 = 0x09;
    pub const WRITE_ONLY: u8 = 0x0A;
    pub const WRITE_ONLY_IMM: u8 = 0x0B;
    pub const READ_REQUEST: u8 = 0x0C;
    pub const READ_RESP_FIRST: u8 = 0x0D;
    pub const READ_RESP_MIDDLE: u8 = 0x0E;
    pub const READ_RESP_LAST: u8 = 0x0F;
    pub const READ_RESP_ONLY: u8 = 0x10;
    pub const ACK: u8 = 0x11;
    /// Unreliable connection: the RC opcode with this added.
    pub const UC: u8 = 0x20;
    pub const UD_SEND_ONLY: u8 = 0x64;
    pub const UD_SEND_ONLY_IMM: u8 = 0x65;
    /// RoCEv2 congestion notification packet.
    pub const CNP: u8 = 0x81;
}

/// The first QP number a data QP gets on the wire. braid numbers a host's QPs from 0, but on a real
/// NIC QP 0 and QP 1 are the subnet and general management QPs (IBA §3.6.1, §13.5.1), which
/// Wireshark dissects as management datagrams; the Linux software RoCE device starts its data QPs
/// at index 16 (`RXE_MIN_QP_INDEX`, drivers/infiniband/sw/rxe/rxe_param.h), and so do braid's
/// traces. Only the capture renumbers: results tables keep braid's numbers (wire = braid + 16).
pub const WIRE_QPN_BASE: u32 = 16;
/// QP number 0xFFFFFF is the multicast QP (IBA §10.5.1); wire numbers stay below it.
const WIRE_QPN_LIMIT: u32 = 0x00FF_FFFF;

/// The 24-bit QP number braid's QP `qpn` has in a trace: `qpn + WIRE_QPN_BASE`, wrapping within
/// `[WIRE_QPN_BASE, 0xFFFFFF)` so it never becomes a management or the multicast QP.
pub fn wire_qpn(qpn: u32) -> u32 {
    WIRE_QPN_BASE + qpn % (WIRE_QPN_LIMIT - WIRE_QPN_BASE)
}

/// AETH syndromes (IBA §9.7.5.2.1): ACK with an unlimited credit count, NAKs.
const AETH_ACK: u8 = 0x1F;
const AETH_RNR: u8 = 0x20;
const AETH_NAK_SEQ: u8 = 0x60;
const AETH_NAK_ACCESS: u8 = 0x62;
const AETH_NAK_INVALID: u8 = 0x61;

/// The IPv4 address of a braid address (`node | k << 24`).
pub fn ipv4(addr: u32) -> [u8; 4] {
    let node = addr & 0x00FF_FFFF;
    let k = (addr >> 24) as u8;
    [
        10u8.wrapping_add(k),
        (node >> 16) as u8,
        (node >> 8) as u8,
        node as u8,
    ]
}

/// The MAC address of port `port` of node `node`.
pub fn mac(node: u32, port: u16) -> [u8; 6] {
    [
        0x02,
        (node >> 16) as u8,
        (node >> 8) as u8,
        node as u8,
        (port >> 8) as u8,
        port as u8,
    ]
}

/// The Internet checksum (RFC 1071) of `b`.
pub fn internet_checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in b.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], 0])
        };
        sum += w as u32;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// What follows the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub opcode: u8,
    pub reth: bool,
    pub aeth: Option<u8>,
    pub deth: bool,
    pub imm: bool,
    /// CNP: 16 reserved bytes.
    pub cnp: bool,
    /// Payload bytes (before padding to a multiple of 4).
    pub payload: usize,
}

impl Layout {
    /// Header bytes after the BTH.
    pub fn ext_len(&self) -> usize {
        self.reth as usize * RETH_LEN
            + self.aeth.is_some() as usize * AETH_LEN
            + self.deth as usize * DETH_LEN
            + self.imm as usize * IMM_LEN
            + self.cnp as usize * CNP_PAD
    }
    /// Pad bytes that bring the payload to a multiple of 4 (the BTH's PadCnt).
    pub fn pad(&self) -> usize {
        (4 - self.payload % 4) % 4
    }
    /// Bytes of every header, Ethernet to the last extended header.
    pub fn headers(&self) -> usize {
        ETH_LEN + IPV4_LEN + UDP_LEN + BTH_LEN + self.ext_len()
    }
    /// The whole frame without its FCS.
    pub fn frame_len(&self) -> usize {
        (self.headers() + self.payload + self.pad() + ICRC_LEN).max(MIN_FRAME)
    }
}

/// The opcode and headers of a (non-PFC) packet of a QP of type `qp_type`.
pub fn layout(pk: &Packet, qp_type: QpType) -> Layout {
    let mut l = Layout {
        opcode: 0,
        reth: false,
        aeth: None,
        deth: false,
        imm: false,
        cnp: false,
        payload: 0,
    };
    match pk.kind {
        PktKind::Data => {
            l.payload = pk.payload as usize;
            let pos = |first, middle, last, only| match (pk.first, pk.last) {
                (true, true) => only,
                (true, false) => first,
                (false, true) => last,
                (false, false) => middle,
            };
            match pk.op {
                DataOp::ReadResp => {
                    l.opcode = pos(
                        op::READ_RESP_FIRST,
                        op::READ_RESP_MIDDLE,
                        op::READ_RESP_LAST,
                        op::READ_RESP_ONLY,
                    );
                    if l.opcode != op::READ_RESP_MIDDLE {
                        l.aeth = Some(AETH_ACK);
                    }
                }
                DataOp::Send if qp_type == QpType::Ud => {
                    l.deth = true;
                    l.imm = pk.has_imm;
                    l.opcode = if pk.has_imm {
                        op::UD_SEND_ONLY_IMM
                    } else {
                        op::UD_SEND_ONLY
                    };
                }
                DataOp::Send => {
                    let (last, only) = if pk.has_imm {
                        (op::SEND_LAST_IMM, op::SEND_ONLY_IMM)
                    } else {
                        (op::SEND_LAST, op::SEND_ONLY)
                    };
                    l.opcode = pos(op::SEND_FIRST, op::SEND_MIDDLE, last, only);
                    l.imm = pk.has_imm && pk.last;
                }
                DataOp::Write => {
                    let (last, only) = if pk.has_imm {
                        (op::WRITE_LAST_IMM, op::WRITE_ONLY_IMM)
                    } else {
                        (op::WRITE_LAST, op::WRITE_ONLY)
                    };
                    l.opcode = pos(op::WRITE_FIRST, op::WRITE_MIDDLE, last, only);
                    l.reth = pk.first;
                    l.imm = pk.has_imm && pk.last;
                }
            }
            if qp_type == QpType::Uc && pk.op != DataOp::ReadResp {
                l.opcode += op::UC;
            }
        }
        PktKind::ReadReq => {
            l.opcode = op::READ_REQUEST;
            l.reth = true;
        }
        PktKind::Ack => {
            l.opcode = op::ACK;
            l.aeth = Some(AETH_ACK);
        }
        PktKind::Nak => {
            l.opcode = op::ACK;
            l.aeth = Some(match pk.aux {
                crate::nic::NAK_REMOTE_ACCESS => AETH_NAK_ACCESS,
                crate::nic::NAK_INVALID_REQUEST => AETH_NAK_INVALID,
                _ => AETH_NAK_SEQ,
            });
        }
        PktKind::RnrNak => {
            l.opcode = op::ACK;
            l.aeth = Some(AETH_RNR);
        }
        PktKind::Cnp => {
            l.opcode = op::CNP;
            l.cnp = true;
        }
        PktKind::Pfc => unreachable!("PFC frames are not RoCE packets"),
    }
    l
}

/// The PSN a packet's BTH carries: an ACK names the last PSN it acknowledges (braid's ACKs
/// carry the first PSN not yet received), every other packet its own.
pub fn bth_psn(pk: &Packet) -> u32 {
    let psn = match pk.kind {
        PktKind::Ack => pk.psn.wrapping_sub(1),
        _ => pk.psn,
    };
    psn & 0x00FF_FFFF
}

/// Appends the frame of `pk`, sent from `src_mac` to `dst_mac`, to `out`: every header, then
/// the payload, pad and ICRC as zero bytes, cut at `snaplen` bytes. Returns (bytes written, the
/// frame's length on the wire without FCS).
pub fn write_roce(
    pk: &Packet,
    qp_type: QpType,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    snaplen: usize,
    out: &mut Vec<u8>,
) -> (usize, usize) {
    let l = layout(pk, qp_type);
    let start = out.len();
    let frame_len = l.frame_len();
    // The IP packet: headers, payload, pad, ICRC (the frame may add Ethernet padding).
    let udp_len = l.headers() + l.payload + l.pad() + ICRC_LEN - ETH_LEN - IPV4_LEN;
    let ip_len = udp_len + IPV4_LEN;
    // Ethernet II.
    out.extend_from_slice(&dst_mac);
    out.extend_from_slice(&src_mac);
    out.extend_from_slice(&0x0800u16.to_be_bytes());
    // IPv4: DSCP = class selector of the packet's priority; ECN from its CE mark (else ECT(0));
    // don't fragment; TTL 64; UDP.
    let ip0 = out.len();
    let ecn = if pk.ce { 0b11 } else { 0b10 };
    out.push(0x45);
    out.push(((pk.prio & 7) << 5) | ecn);
    out.extend_from_slice(&(ip_len as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
    out.extend_from_slice(&ipv4(pk.src));
    out.extend_from_slice(&ipv4(pk.dst));
    let c = internet_checksum(&out[ip0..ip0 + IPV4_LEN]);
    out[ip0 + 10..ip0 + 12].copy_from_slice(&c.to_be_bytes());
    // UDP: the QP's source port (its flow label for ECMP), checksum 0 (RoCEv2 Annex A17.3.3).
    out.extend_from_slice(&pk.sport.to_be_bytes());
    out.extend_from_slice(&ROCE_DPORT.to_be_bytes());
    out.extend_from_slice(&(udp_len as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    // BTH: opcode; SE, MigReq, PadCnt, TVer; P_Key; FECN/BECN; DestQP; AckReq; PSN.
    out.push(l.opcode);
    out.push((l.pad() as u8) << 4);
    out.extend_from_slice(&0xFFFFu16.to_be_bytes());
    out.push(0);
    out.extend_from_slice(&wire_qpn(pk.dst_qp).to_be_bytes()[1..]);
    let ack_req = qp_type == QpType::Rc
        && ((pk.kind == PktKind::Data && pk.op != DataOp::ReadResp && pk.last)
            || pk.kind == PktKind::ReadReq);
    out.push((ack_req as u8) << 7);
    out.extend_from_slice(&bth_psn(pk).to_be_bytes()[1..]);
    // Extended headers, in the order IBA §9.2 lists them.
    if l.deth {
        // Q_Key, reserved, source QP.
        out.extend_from_slice(&0u32.to_be_bytes());
        out.push(0);
        out.extend_from_slice(&wire_qpn(pk.src_qp).to_be_bytes()[1..]);
    }
    if l.reth {
        // Virtual address, R_Key, DMA length.
        let (rkey, len) = match pk.kind {
            PktKind::ReadReq => (pk.imm, pk.msg_len),
            _ => (pk.aux, pk.msg_len),
        };
        out.extend_from_slice(&pk.addr.to_be_bytes());
        out.extend_from_slice(&rkey.to_be_bytes());
        out.extend_from_slice(&(len.min(u32::MAX as u64) as u32).to_be_bytes());
    }
    if let Some(s) = l.aeth {
        // Syndrome, MSN (not kept by braid's responders: 0).
        out.extend_from_slice(&[s, 0, 0, 0]);
    }
    if l.imm {
        out.extend_from_slice(&pk.imm.to_be_bytes());
    }
    if l.cnp {
        out.extend_from_slice(&[0; CNP_PAD]);
    }
    // Payload, pad, ICRC (and Ethernet padding of a short frame): zeros, up to the snap length.
    let want = frame_len.min(snaplen);
    let have = out.len() - start;
    if want > have {
        out.resize(start + want, 0);
    } else {
        out.truncate(start + want);
    }
    (want, frame_len)
}

/// Appends a PFC frame (802.1Qbb): pause (`quanta` 0xFFFF) or resume (0) of priority `prio`.
/// Returns (bytes written, frame length).
pub fn write_pfc(
    prio: u8,
    pause: bool,
    src_mac: [u8; 6],
    snaplen: usize,
    out: &mut Vec<u8>,
) -> (usize, usize) {
    let start = out.len();
    out.extend_from_slice(&[0x01, 0x80, 0xC2, 0x00, 0x00, 0x01]);
    out.extend_from_slice(&src_mac);
    out.extend_from_slice(&0x8808u16.to_be_bytes());
    out.extend_from_slice(&0x0101u16.to_be_bytes());
    let p = (prio & 7) as usize;
    out.extend_from_slice(&(1u16 << p).to_be_bytes());
    for i in 0..8 {
        let q: u16 = if i == p && pause { 0xFFFF } else { 0 };
        out.extend_from_slice(&q.to_be_bytes());
    }
    out.resize(start + MIN_FRAME, 0);
    let want = MIN_FRAME.min(snaplen);
    out.truncate(start + want);
    (want, MIN_FRAME)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::ROCE_HEADER;

    fn write_first(payload: u32) -> Packet {
        let mut pk = Packet::control(PktKind::Data, ROCE_HEADER + payload);
        pk.op = DataOp::Write;
        pk.first = true;
        pk.last = false;
        pk.payload = payload;
        pk.src = 3;
        pk.dst = 0x0001_0205;
        pk.sport = 49152;
        pk.dst_qp = 0x0000_0012;
        pk.psn = 0x0123_4567; // beyond 24 bits: the BTH keeps the low 24
        pk.addr = 0x1122_3344_5566_7788;
        pk.aux = 0xAABB_CCDD;
        pk.msg_len = 8192;
        pk.prio = 3;
        pk.ce = true;
        pk
    }

    #[test]
    fn a_write_first_packet_is_the_bytes_the_specification_gives() {
        let pk = write_first(1024);
        let mut out = vec![];
        let (cap, len) = write_roce(&pk, QpType::Rc, mac(7, 1), mac(9, 2), 4096, &mut out);
        // 14 + 20 + 8 + 12 + RETH 16 + 1024 payload + ICRC 4.
        assert_eq!(len, 1098);
        assert_eq!(cap, 1098);
        assert_eq!(out.len(), 1098);
        // Written out by hand from IBA §9.2 / RFC 791 / RFC 768.
        #[rustfmt::skip]
        let want_headers: [u8; 70] = [
            // Ethernet: dst, src, IPv4
            0x02, 0, 0, 9, 0, 2,   0x02, 0, 0, 7, 0, 1,   0x08, 0x00,
            // IPv4: v4 IHL 5; DSCP CS3 (3 << 3) and CE (0b11): 0x60 | 0x03; total length 1084
            0x45, 0x63, 0x04, 0x3C, 0, 0, 0x40, 0, 64, 17, 0xFF, 0xFF /* checksum, below */,
            10, 0, 0, 3,   10, 1, 2, 5,
            // UDP: 49152 -> 4791, length 1064, checksum 0
            0xC0, 0x00, 0x12, 0xB7, 0x04, 0x28, 0, 0,
            // BTH: WRITE First, PadCnt 0, P_Key 0xFFFF, DestQP 0x12 + 16 on the wire, no
            // AckReq, PSN 0x234567
            0x06, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x22, 0x00, 0x23, 0x45, 0x67,
            // RETH: VA, R_Key, DMA length 8192
            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0xAA, 0xBB, 0xCC, 0xDD, 0, 0, 0x20, 0,
        ];
        let mut got = out[..70].to_vec();
        // The checksum makes the header sum to 0xFFFF (RFC 1071): recomputing it over the whole
        // header gives 0.
        assert_eq!(internet_checksum(&out[14..34]), 0);
        got[24] = 0xFF;
        got[25] = 0xFF;
        assert_eq!(got, want_headers);
        // Payload and ICRC are zeros.
        assert!(out[70..].iter().all(|&b| b == 0));
    }

    #[test]
    fn wire_qp_numbers_are_never_management_or_multicast_qps() {
        // IBA: QP 0 (SMI) and QP 1 (GSI) are management QPs, 0xFFFFFF the multicast QP.
        assert_eq!(wire_qpn(0), 16);
        assert_eq!(wire_qpn(1), 17);
        for q in [0, 1, 2, 0x00FF_FFEE, 0x00FF_FFEF, 0x00FF_FFFF, u32::MAX] {
            let w = wire_qpn(q);
            assert!((16..0x00FF_FFFF).contains(&w), "{q:#x} -> {w:#x}");
        }
        // Distinct braid QPs stay distinct on the wire (a host has far fewer than 2^24 QPs).
        let mut seen: Vec<u32> = (0..10_000).map(wire_qpn).collect();
        seen.dedup();
        assert_eq!(seen.len(), 10_000);
    }

    #[test]
    fn checksum_of_a_known_header() {
        // The worked example of RFC 1071 §3 / the classic Wikipedia IPv4 header.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&h), 0xb861);
    }

    #[test]
    fn lengths_padding_and_truncation() {
        // A 1001-byte SEND Only pads to 1004 (PadCnt 3).
        let mut pk = Packet::control(PktKind::Data, ROCE_HEADER + 1001);
        pk.op = DataOp::Send;
        pk.first = true;
        pk.last = true;
        pk.payload = 1001;
        let mut out = vec![];
        let (cap, len) = write_roce(&pk, QpType::Rc, mac(0, 0), mac(1, 0), 96, &mut out);
        assert_eq!(len, 14 + 20 + 8 + 12 + 1004 + 4);
        assert_eq!(cap, 96);
        assert_eq!(out.len(), 96, "cut at the snap length");
        assert_eq!(out[42], op::SEND_ONLY);
        assert_eq!(out[43] >> 4 & 3, 3, "PadCnt");
        assert_eq!(out[50] >> 7, 1, "AckReq on the last packet");
        // IP total length and UDP length describe the whole packet, not the capture.
        assert_eq!(u16::from_be_bytes([out[16], out[17]]) as usize, len - 14);
        assert_eq!(u16::from_be_bytes([out[38], out[39]]) as usize, len - 34);
        // Not CE: ECT(0).
        assert_eq!(out[15] & 3, 0b10);

        // An ACK: AETH, the PSN it acknowledges is one below braid's cumulative point; a short
        // frame is padded to 60 bytes on the wire (the IP length stays the packet's).
        let mut a = Packet::control(PktKind::Ack, crate::packet::ACK_SIZE);
        a.psn = 10;
        let mut out = vec![];
        let (cap, len) = write_roce(&a, QpType::Rc, mac(0, 0), mac(1, 0), 128, &mut out);
        assert_eq!(len, 62); // 14 + 20 + 8 + 12 + 4 + 4
        assert_eq!(cap, 62);
        assert_eq!(out[42], op::ACK);
        assert_eq!(&out[51..54], &[0, 0, 9]);
        assert_eq!(out[54], 0x1F, "ACK syndrome");

        // A CNP: opcode 0x81, 16 reserved bytes.
        let c = Packet::control(PktKind::Cnp, crate::packet::CNP_SIZE);
        let mut out = vec![];
        let (_, len) = write_roce(&c, QpType::Rc, mac(0, 0), mac(1, 0), 128, &mut out);
        assert_eq!(out[42], 0x81);
        assert_eq!(len, 14 + 20 + 8 + 12 + 16 + 4);
        assert_eq!(u16::from_be_bytes([out[16], out[17]]) as usize, len - 14);
    }

    #[test]
    fn opcodes_follow_the_message_position_and_kind() {
        let mut pk = write_first(100);
        let cases = [
            (
                DataOp::Write,
                false,
                true,
                false,
                QpType::Rc,
                op::WRITE_FIRST,
            ),
            (
                DataOp::Write,
                false,
                false,
                false,
                QpType::Rc,
                op::WRITE_MIDDLE,
            ),
            (
                DataOp::Write,
                false,
                false,
                true,
                QpType::Rc,
                op::WRITE_LAST,
            ),
            (
                DataOp::Write,
                true,
                false,
                true,
                QpType::Rc,
                op::WRITE_LAST_IMM,
            ),
            (
                DataOp::Write,
                true,
                true,
                true,
                QpType::Rc,
                op::WRITE_ONLY_IMM,
            ),
            (
                DataOp::Send,
                true,
                true,
                true,
                QpType::Rc,
                op::SEND_ONLY_IMM,
            ),
            (DataOp::Send, false, true, true, QpType::Uc, 0x24),
            (
                DataOp::Send,
                false,
                true,
                true,
                QpType::Ud,
                op::UD_SEND_ONLY,
            ),
            (
                DataOp::ReadResp,
                false,
                true,
                false,
                QpType::Rc,
                op::READ_RESP_FIRST,
            ),
            (
                DataOp::ReadResp,
                false,
                false,
                false,
                QpType::Rc,
                op::READ_RESP_MIDDLE,
            ),
        ];
        for (o, imm, first, last, t, want) in cases {
            pk.op = o;
            pk.has_imm = imm;
            pk.first = first;
            pk.last = last;
            let l = layout(&pk, t);
            assert_eq!(
                l.opcode, want,
                "{o:?} imm {imm} first {first} last {last} {t:?}"
            );
        }
        // Header sets: WRITE Only with immediate has RETH and ImmDt; READ response middle none.
        pk.op = DataOp::Write;
        pk.has_imm = true;
        pk.first = true;
        pk.last = true;
        assert_eq!(layout(&pk, QpType::Rc).ext_len(), RETH_LEN + IMM_LEN);
        pk.op = DataOp::ReadResp;
        pk.first = false;
        pk.last = false;
        assert_eq!(layout(&pk, QpType::Rc).ext_len(), 0);
    }

    #[test]
    fn pfc_frame() {
        let mut out = vec![];
        let (cap, len) = write_pfc(3, true, mac(4, 1), 128, &mut out);
        assert_eq!((cap, len), (60, 60));
        assert_eq!(&out[12..16], &[0x88, 0x08, 0x01, 0x01]);
        assert_eq!(
            &out[16..18],
            &[0x00, 0x08],
            "class-enable vector: priority 3"
        );
        assert_eq!(&out[24..26], &[0xFF, 0xFF], "priority 3's pause time");
    }
}
