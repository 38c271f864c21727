//! The online solver's control messages: a fixed 24-byte header and fixed-size items, all
//! little-endian.
//!
//! ```text
//!   0  u16  magic 0x4452 ("DR")
//!   2  u8   version (2)
//!   3  u8   kind: 1 contributions, 2 replies, 3 idle
//!   4  u8   flags: bit 0 = the sender has settled
//!   5  u8[3] zero
//!   8  u32  epoch of the sender's instance
//!  12  u64  round
//!  20  u32  item count
//!  24  items
//!        contributions: (sender conn u32, receiver conn u32, B·x f64)            16 bytes
//!        replies:       (sender conn u32, receiver conn u32, ρa² f64, ρa(y−v) f64) 24 bytes
//!        idle:          none
//! ```
//! A receiver conn with the top bit set ([`LINK_BIT`]) names a fabric link row of the receiver
//! (its owner), `link | LINK_BIT`: contributions then carry `coef · x` (the connection's load on
//! the link) and replies `ρ` and `ρ (y − v)` in that unit (version 2; version 1 had no link
//! rows).
//! Decoding checks everything (length, magic, version, kind, padding, finite values, B x ≥ 0,
//! ρa² ≥ 0)
//! and returns a [`WireError`]; it never panics.

use std::fmt;

pub const MAGIC: u16 = 0x4452;
pub const VERSION: u8 = 2;
/// The top bit of a pair's receiver id: the pair is a fabric link row of the receiver.
pub const LINK_BIT: u32 = 1 << 31;
pub const HEADER: usize = 24;
pub const CONTRIB_ITEM: usize = 16;
pub const REPLY_ITEM: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Contrib = 1,
    Reply = 2,
    Idle = 3,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub kind: Kind,
    pub settled: bool,
    pub epoch: u32,
    pub round: u64,
}

/// A pair: the sending connection (on the sender host) and the receiving row (on the receiver).
pub type PairKey = (u32, u32);

#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// per pair, the traffic `B x` of the sending connection toward the row
    Contrib(Vec<(PairKey, f64)>),
    /// per pair, the x-update's quadratic and linear coefficients in units of `B x`
    Reply(Vec<(PairKey, f64, f64)>),
    Idle,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub header: Header,
    pub body: Body,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    Short(usize),
    Magic(u16),
    Version(u8),
    Kind(u8),
    Padding,
    Length { expected: usize, got: usize },
    NotFinite { item: usize },
    Negative { item: usize },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Short(n) => write!(
                f,
                "message of {n} bytes is shorter than the {HEADER}-byte header"
            ),
            WireError::Magic(m) => write!(f, "bad magic {m:#06x}, expected {MAGIC:#06x}"),
            WireError::Version(v) => write!(f, "unsupported version {v}, expected {VERSION}"),
            WireError::Kind(k) => write!(f, "unknown message kind {k}"),
            WireError::Padding => write!(f, "reserved header bytes are not zero"),
            WireError::Length { expected, got } => {
                write!(
                    f,
                    "length {got} does not match the item count (expected {expected})"
                )
            }
            WireError::NotFinite { item } => {
                write!(f, "item {item} holds a value that is not finite")
            }
            WireError::Negative { item } => {
                write!(f, "item {item} holds a negative rate or penalty")
            }
        }
    }
}

impl std::error::Error for WireError {}

impl Message {
    pub fn encode(&self) -> Vec<u8> {
        let (kind, n, item) = match &self.body {
            Body::Contrib(v) => (Kind::Contrib, v.len(), CONTRIB_ITEM),
            Body::Reply(v) => (Kind::Reply, v.len(), REPLY_ITEM),
            Body::Idle => (Kind::Idle, 0, 0),
        };
        let mut b = Vec::with_capacity(HEADER + n * item);
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.push(VERSION);
        b.push(kind as u8);
        b.push(self.header.settled as u8);
        b.extend_from_slice(&[0, 0, 0]);
        b.extend_from_slice(&self.header.epoch.to_le_bytes());
        b.extend_from_slice(&self.header.round.to_le_bytes());
        b.extend_from_slice(&(n as u32).to_le_bytes());
        match &self.body {
            Body::Contrib(v) => {
                for ((s, r), x) in v {
                    b.extend_from_slice(&s.to_le_bytes());
                    b.extend_from_slice(&r.to_le_bytes());
                    b.extend_from_slice(&x.to_le_bytes());
                }
            }
            Body::Reply(v) => {
                for ((s, r), qa, qb) in v {
                    b.extend_from_slice(&s.to_le_bytes());
                    b.extend_from_slice(&r.to_le_bytes());
                    b.extend_from_slice(&qa.to_le_bytes());
                    b.extend_from_slice(&qb.to_le_bytes());
                }
            }
            Body::Idle => {}
        }
        b
    }

    pub fn decode(b: &[u8]) -> Result<Message, WireError> {
        if b.len() < HEADER {
            return Err(WireError::Short(b.len()));
        }
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(a)
        };
        let f64_at = |o: usize| f64::from_bits(u64_at(o));
        let magic = u16::from_le_bytes([b[0], b[1]]);
        if magic != MAGIC {
            return Err(WireError::Magic(magic));
        }
        if b[2] != VERSION {
            return Err(WireError::Version(b[2]));
        }
        let kind = match b[3] {
            1 => Kind::Contrib,
            2 => Kind::Reply,
            3 => Kind::Idle,
            k => return Err(WireError::Kind(k)),
        };
        if b[4] > 1 || b[5..8] != [0, 0, 0] {
            return Err(WireError::Padding);
        }
        let header = Header {
            kind,
            settled: b[4] == 1,
            epoch: u32_at(8),
            round: u64_at(12),
        };
        let n = u32_at(20) as usize;
        let item = match kind {
            Kind::Contrib => CONTRIB_ITEM,
            Kind::Reply => REPLY_ITEM,
            Kind::Idle => 0,
        };
        // checked: a huge count must not overflow into a matching length
        let expected = n
            .checked_mul(item)
            .and_then(|l| l.checked_add(HEADER))
            .unwrap_or(usize::MAX);
        if kind == Kind::Idle && n != 0 || expected != b.len() {
            return Err(WireError::Length {
                expected,
                got: b.len(),
            });
        }
        let body = match kind {
            Kind::Contrib => {
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    let o = HEADER + i * CONTRIB_ITEM;
                    let x = f64_at(o + 8);
                    if !x.is_finite() {
                        return Err(WireError::NotFinite { item: i });
                    }
                    // B x: a rate, never negative
                    if x < 0.0 {
                        return Err(WireError::Negative { item: i });
                    }
                    v.push(((u32_at(o), u32_at(o + 4)), x));
                }
                Body::Contrib(v)
            }
            Kind::Reply => {
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    let o = HEADER + i * REPLY_ITEM;
                    let (qa, qb) = (f64_at(o + 8), f64_at(o + 16));
                    if !qa.is_finite() || !qb.is_finite() {
                        return Err(WireError::NotFinite { item: i });
                    }
                    if qa < 0.0 {
                        return Err(WireError::Negative { item: i });
                    }
                    v.push(((u32_at(o), u32_at(o + 4)), qa, qb));
                }
                Body::Reply(v)
            }
            Kind::Idle => Body::Idle,
        };
        Ok(Message { header, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_sizes() {
        let m = Message {
            header: Header {
                kind: Kind::Reply,
                settled: true,
                epoch: 7,
                round: 1 << 40,
            },
            body: Body::Reply(vec![((1, 2), 0.5, -3.25), ((9, 4), 0.0, 1e300)]),
        };
        let b = m.encode();
        assert_eq!(b.len(), HEADER + 2 * REPLY_ITEM);
        assert_eq!(Message::decode(&b).unwrap(), m);
        let c = Message {
            header: Header {
                kind: Kind::Contrib,
                settled: false,
                epoch: 0,
                round: 3,
            },
            body: Body::Contrib(vec![((5, 6), 1.5)]),
        };
        assert_eq!(c.encode().len(), HEADER + CONTRIB_ITEM);
        assert_eq!(Message::decode(&c.encode()).unwrap(), c);
    }

    #[test]
    fn rejects_bad_input() {
        let good = Message {
            header: Header {
                kind: Kind::Contrib,
                settled: false,
                epoch: 1,
                round: 1,
            },
            body: Body::Contrib(vec![((1, 1), 2.0)]),
        }
        .encode();
        assert_eq!(Message::decode(&good[..10]), Err(WireError::Short(10)));
        let mut b = good.clone();
        b[0] = 0;
        assert!(matches!(Message::decode(&b), Err(WireError::Magic(_))));
        let mut b = good.clone();
        b[2] = 9;
        assert_eq!(Message::decode(&b), Err(WireError::Version(9)));
        let mut b = good.clone();
        b[3] = 7;
        assert_eq!(Message::decode(&b), Err(WireError::Kind(7)));
        let mut b = good.clone();
        b.pop();
        assert!(matches!(Message::decode(&b), Err(WireError::Length { .. })));
        let mut b = good.clone();
        b[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(Message::decode(&b), Err(WireError::Length { .. })));
        let mut b = good;
        b[32..40].copy_from_slice(&f64::NAN.to_le_bytes());
        assert_eq!(Message::decode(&b), Err(WireError::NotFinite { item: 0 }));
    }
}
