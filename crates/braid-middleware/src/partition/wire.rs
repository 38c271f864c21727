//! What travels between the two ends besides the application's bytes: the chunk header, the
//! board records of the extra QPs, the members' UDP source ports.

/// Bytes of a chunk header in front of a SEND chunk's payload.
pub const HDR: u64 = 32;
const MAGIC: u16 = 0x5054; // "PT"

/// The header carries the application's imm.
pub const F_IMM: u16 = 1;
/// A header with no payload announcing that the next WRITE_WITH_IMM on this QP finishes
/// message `id` of `total` bytes (the imm's receive completion reports the total length).
pub const F_WRITE_IMM: u16 = 2;

/// The paper's custom header: data id, total data size, current chunk offset (and our length,
/// flags and the imm of a *_WITH_IMM message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub flags: u16,
    pub id: u32,
    pub total: u64,
    pub offset: u64,
    pub len: u32,
    pub imm: u32,
}

impl Header {
    pub fn encode(&self) -> [u8; HDR as usize] {
        let mut b = [0u8; HDR as usize];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2..4].copy_from_slice(&self.flags.to_le_bytes());
        b[4..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..16].copy_from_slice(&self.total.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b[24..28].copy_from_slice(&self.len.to_le_bytes());
        b[28..32].copy_from_slice(&self.imm.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Option<Header> {
        if b.len() < HDR as usize {
            return None;
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if u16_at(0) != MAGIC {
            return None;
        }
        Some(Header {
            flags: u16_at(2),
            id: u32_at(4),
            total: u64_at(8),
            offset: u64_at(16),
            len: u32_at(24),
            imm: u32_at(28),
        })
    }
}

/// The board key under which a host publishes member `index` of the connection whose
/// application QP is `qpn` (index 0: the count record). Top bit: middleware's; then "P"; host
/// and QP number keep their low 24 bits (simulated hosts and QP numbers fit).
pub fn board_key(host: u32, qpn: u32, index: u32) -> u64 {
    (1 << 63)
        | (0x50 << 56)
        | ((host as u64 & 0xFF_FFFF) << 32)
        | ((qpn as u64 & 0xFF_FFFF) << 8)
        | (index as u64 & 0xFF)
}

/// The UDP source port of member `i` of the connection of (host, application QP) in a run with
/// this seed: distinct for every member (4099 is odd, so i * 4099 mod 16384 never repeats below
/// 16384), spread by a hash of the seed and the connection so connections differ, and another
/// seed re-draws them (and so the members' ECMP paths). In the dynamic range 49152..65535.
pub fn member_sport(seed: u64, host: u32, qpn: u32, i: u32) -> u16 {
    let mut h = mix(seed ^ 0x7061_7274_6974_696f) ^ ((host as u64) << 32 | qpn as u64);
    h = mix(h);
    let base = (h % 16384) as u32;
    (49152 + (base + i * 4099) % 16384) as u16
}

/// A 64-bit finaliser (MurmurHash3's fmix64): every input bit flips about half the output bits.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_verbs::{slice_sges, Sge};

    #[test]
    fn headers_round_trip_and_foreign_bytes_are_refused() {
        let h = Header {
            flags: F_IMM,
            id: 7,
            total: 1 << 33,
            offset: 4096,
            len: 1024,
            imm: 0xdead_beef,
        };
        assert_eq!(Header::decode(&h.encode()), Some(h));
        assert_eq!(Header::decode(&[0u8; 32]), None);
        assert_eq!(Header::decode(&h.encode()[..31]), None);
    }

    #[test]
    fn members_get_distinct_ports_and_keys() {
        let ports: Vec<u16> = (0..16).map(|i| member_sport(1, 3, 17, i)).collect();
        let mut d = ports.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 16);
        assert!(ports.iter().all(|&p| p >= 49152));
        // Another seed draws other ports for the same connection; the same seed the same ones.
        let other: Vec<u16> = (0..16).map(|i| member_sport(2, 3, 17, i)).collect();
        assert_ne!(ports, other);
        assert_eq!(
            ports,
            (0..16)
                .map(|i| member_sport(1, 3, 17, i))
                .collect::<Vec<_>>()
        );
        assert_ne!(board_key(1, 2, 0), board_key(2, 1, 0));
        assert_ne!(board_key(1, 2, 0), board_key(1, 2, 1));
        assert!(board_key(1, 2, 3) >> 63 == 1);
    }

    #[test]
    fn slices_cross_sge_boundaries() {
        let sg = [
            Sge {
                addr: 100,
                length: 10,
                lkey: 1,
            },
            Sge {
                addr: 500,
                length: 10,
                lkey: 2,
            },
        ];
        let s = slice_sges(&sg, 5, 10);
        assert_eq!(
            s,
            vec![
                Sge {
                    addr: 105,
                    length: 5,
                    lkey: 1
                },
                Sge {
                    addr: 500,
                    length: 5,
                    lkey: 2
                }
            ]
        );
        assert!(slice_sges(&sg, 20, 0).is_empty());
        assert_eq!(slice_sges(&sg, 12, 100)[0].addr, 502);
    }
}
