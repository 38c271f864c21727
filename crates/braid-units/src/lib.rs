//! Human units for scenario files: rates (`"40Gbps"`), durations (`"1us"`) and sizes (`"64KB"`).
//!
//! Parsing is exact decimal arithmetic (no floating point): `"2.5Gbps"` is exactly 2,500,000,000
//! bit/s and `"0.001ms"` exactly 1,000,000 ps. A rate or duration finer than the base unit (bit/s,
//! picosecond) is rounded to the nearest base unit; a size must be a whole number of bytes. A number
//! without a unit is rejected for rates and durations (ambiguous); sizes accept a bare integer
//! (bytes). Serialisation gives a canonical string that parses back to the same value.

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// A data rate in bit/s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(pub u64);

/// A duration in picoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub u64);

/// A size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(pub u64);

/// Why a unit string did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitError(pub String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

const RATE_HINT: &str = "expected a rate like \"40Gbps\"";
const DURATION_HINT: &str = "expected a duration like \"1us\"";
const BYTES_HINT: &str = "expected a size like \"64KB\", \"64KiB\" or a number of bytes";

/// Rate units: suffix → bit/s. Bytes-per-second forms (`GBps`, `GB/s`) as ns-3's DataRate accepts.
const RATE_UNITS: &[(&str, u128)] = &[
    ("bps", 1),
    ("b/s", 1),
    ("Kbps", 1_000),
    ("kbps", 1_000),
    ("Kb/s", 1_000),
    ("kb/s", 1_000),
    ("Mbps", 1_000_000),
    ("Mb/s", 1_000_000),
    ("Gbps", 1_000_000_000),
    ("Gb/s", 1_000_000_000),
    ("Tbps", 1_000_000_000_000),
    ("Tb/s", 1_000_000_000_000),
    ("Bps", 8),
    ("B/s", 8),
    ("KBps", 8_000),
    ("kBps", 8_000),
    ("KB/s", 8_000),
    ("kB/s", 8_000),
    ("MBps", 8_000_000),
    ("MB/s", 8_000_000),
    ("GBps", 8_000_000_000),
    ("GB/s", 8_000_000_000),
    ("TBps", 8_000_000_000_000),
    ("TB/s", 8_000_000_000_000),
];

/// Duration units: suffix → picoseconds.
const DURATION_UNITS: &[(&str, u128)] = &[
    ("ps", 1),
    ("ns", 1_000),
    ("us", 1_000_000),
    ("µs", 1_000_000),
    ("μs", 1_000_000),
    ("ms", 1_000_000_000),
    ("s", 1_000_000_000_000),
];

/// Size units: suffix → bytes.
const BYTES_UNITS: &[(&str, u128)] = &[
    ("B", 1),
    ("KB", 1_000),
    ("kB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

/// An exact non-negative decimal: `digits × 10^exp`.
struct Decimal {
    digits: u128,
    exp: i32,
}

/// Parses `123`, `1.5`, `.5`, `1e9`, `2.5E-3` exactly. No sign, no NaN/inf, no whitespace inside.
fn parse_decimal(s: &str) -> Option<Decimal> {
    let (mant, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = match mant.find('.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut e: i64 = match exp {
        None => 0,
        Some(x) => {
            let (neg, body) = match x.strip_prefix('-') {
                Some(b) => (true, b),
                None => (false, x.strip_prefix('+').unwrap_or(x)),
            };
            if body.is_empty() || body.len() > 6 || !body.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let v: i64 = body.parse().ok()?;
            if neg {
                -v
            } else {
                v
            }
        }
    };
    let mut digits: u128 = 0;
    let mut overflow_digits: i64 = 0; // integer digits dropped (value too large) → error later
    for b in int.bytes() {
        match digits
            .checked_mul(10)
            .and_then(|d| d.checked_add((b - b'0') as u128))
        {
            Some(d) => digits = d,
            None => overflow_digits += 1,
        }
    }
    if overflow_digits > 0 {
        // Far beyond u64 in any unit; make it overflow.
        e += overflow_digits;
    }
    for b in frac.bytes() {
        if overflow_digits > 0 {
            break;
        }
        match digits
            .checked_mul(10)
            .and_then(|d| d.checked_add((b - b'0') as u128))
        {
            Some(d) => {
                digits = d;
                e -= 1;
            }
            // Further fractional digits cannot matter at u64 resolution... unless they round;
            // 38 significant digits are far beyond what any u64 value needs.
            None => break,
        }
    }
    Some(Decimal {
        digits,
        exp: e.clamp(-1000, 1000) as i32,
    })
}

/// `d × scale` as an integer. `Err(true)` on overflow; `Err(false)` if not whole and `whole` is
/// required; otherwise rounds half up.
fn scaled(d: &Decimal, scale: u128, whole: bool) -> Result<u64, bool> {
    if d.digits == 0 {
        return Ok(0);
    }
    let v = d.digits.checked_mul(scale).ok_or(true)?;
    if d.exp >= 0 {
        let mut v = v;
        for _ in 0..d.exp {
            v = v.checked_mul(10).ok_or(true)?;
        }
        u64::try_from(v).map_err(|_| true)
    } else {
        let n = -d.exp;
        if n > 38 {
            // v < 10^39 / 10^39: rounds to 0 (or is not whole).
            return if whole { Err(false) } else { Ok(0) };
        }
        let div = 10u128.pow(n as u32);
        let q = v / div;
        let r = v % div;
        if whole && r != 0 {
            return Err(false);
        }
        let q = if r * 2 >= div { q + 1 } else { q };
        u64::try_from(q).map_err(|_| true)
    }
}

fn split_unit<'a>(s: &'a str, units: &[(&str, u128)]) -> Option<(&'a str, u128)> {
    // Longest suffix first, so "Gbps" is not read as "…ps".
    let mut best: Option<(&str, u128)> = None;
    for &(u, scale) in units {
        if let Some(num) = s.strip_suffix(u) {
            match best {
                Some((n, _)) if n.len() <= num.len() => {}
                _ => best = Some((num, scale)),
            }
        }
    }
    best
}

fn parse_with_units(
    s: &str,
    units: &[(&str, u128)],
    hint: &str,
    bare_ok: bool,
    whole: bool,
    what: &str,
) -> Result<u64, UnitError> {
    let t = s.trim();
    let bad = || UnitError(format!("{hint}, got {s:?}"));
    if t.starts_with('-') {
        return Err(UnitError(format!("{what} must not be negative, got {s:?}")));
    }
    let (num, scale) = match split_unit(t, units) {
        Some((num, scale)) => (num.trim_end(), scale),
        None => {
            if parse_decimal(t).is_some() {
                if !bare_ok {
                    return Err(UnitError(format!(
                        "{hint} (a number without a unit is ambiguous), got {s:?}"
                    )));
                }
                (t, 1)
            } else {
                return Err(bad());
            }
        }
    };
    if num.starts_with('-') {
        return Err(UnitError(format!("{what} must not be negative, got {s:?}")));
    }
    let d = parse_decimal(num).ok_or_else(bad)?;
    scaled(&d, scale, whole).map_err(|overflow| {
        if overflow {
            UnitError(format!("{what} {s:?} is too large"))
        } else {
            UnitError(format!("{what} {s:?} is not a whole number of bytes"))
        }
    })
}

/// Formats `v` in the largest unit of `units` (ascending scale) not exceeding it, as an exact
/// decimal.
fn format_exact(v: u64, units: &[(&str, u64)]) -> String {
    let mut chosen = units[0];
    for &u in units {
        if v >= u.1 {
            chosen = u;
        }
    }
    let (name, scale) = chosen;
    let int = v / scale;
    let rem = v % scale;
    if rem == 0 {
        return format!("{int}{name}");
    }
    let width = (scale as f64).log10().round() as usize;
    let frac = format!("{rem:0width$}");
    format!("{int}.{}{name}", frac.trim_end_matches('0'))
}

impl FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        parse_with_units(s, RATE_UNITS, RATE_HINT, false, false, "rate").map(Rate)
    }
}

impl FromStr for Duration {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        parse_with_units(s, DURATION_UNITS, DURATION_HINT, false, false, "duration").map(Duration)
    }
}

impl FromStr for Bytes {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        parse_with_units(s, BYTES_UNITS, BYTES_HINT, true, true, "size").map(Bytes)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_exact(
            self.0,
            &[
                ("bps", 1),
                ("Kbps", 1_000),
                ("Mbps", 1_000_000),
                ("Gbps", 1_000_000_000),
                ("Tbps", 1_000_000_000_000),
            ],
        ))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_exact(
            self.0,
            &[
                ("ps", 1),
                ("ns", 1_000),
                ("us", 1_000_000),
                ("ms", 1_000_000_000),
                ("s", 1_000_000_000_000),
            ],
        ))
    }
}

impl fmt::Display for Bytes {
    #[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87; the workspace supports 1.80
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        // Prefer an integer in decimal units, then an integer in binary units, else exact decimal.
        for (name, scale) in [
            ("TB", 1_000_000_000_000u64),
            ("GB", 1_000_000_000),
            ("MB", 1_000_000),
            ("KB", 1_000),
        ] {
            if v >= scale && v % scale == 0 {
                return write!(f, "{}{name}", v / scale);
            }
        }
        for (name, scale) in [
            ("TiB", 1u64 << 40),
            ("GiB", 1 << 30),
            ("MiB", 1 << 20),
            ("KiB", 1 << 10),
        ] {
            if v >= scale && v % scale == 0 {
                return write!(f, "{}{name}", v / scale);
            }
        }
        write!(f, "{v}B")
    }
}

macro_rules! string_unit_serde {
    ($ty:ident, $hint:expr, $pattern:expr, $desc:expr, $bare_int:expr) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_string())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($hint.strip_prefix("expected ").unwrap_or($hint))
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse::<$ty>().map_err(|e| E::custom(e.0))
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        if $bare_int {
                            Ok($ty(v))
                        } else {
                            Err(E::custom(format!("{} (a number without a unit is ambiguous), got {v}", $hint)))
                        }
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        if v >= 0 {
                            self.visit_u64(v as u64)
                        } else if $bare_int {
                            Err(E::custom(format!("size must not be negative, got {v}")))
                        } else {
                            Err(E::custom(format!("{}, got {v}", $hint)))
                        }
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        Err(E::custom(format!("{}, got {v}", $hint)))
                    }
                }
                d.deserialize_any(V)
            }
        }

        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                stringify!($ty).into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                if $bare_int {
                    json_schema!({
                        "description": $desc,
                        "anyOf": [
                            { "type": "string", "pattern": $pattern },
                            { "type": "integer", "minimum": 0 }
                        ]
                    })
                } else {
                    json_schema!({
                        "type": "string",
                        "pattern": $pattern,
                        "description": $desc
                    })
                }
            }
        }
    };
}

string_unit_serde!(
    Rate,
    RATE_HINT,
    concat!(r"^\s*(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", r"([KkMGT]?(bps|b/s)|[KkMGT]?(Bps|B/s))\s*$"),
    "A data rate with a unit: \"40Gbps\", \"2.5Gbps\", \"100Mbps\", \"1e9bps\" (also Kbps, Tbps, Gb/s; GBps = bytes/s).",
    false
);
string_unit_serde!(
    Duration,
    DURATION_HINT,
    concat!(
        r"^\s*(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*",
        r"(ps|ns|us|µs|μs|ms|s)\s*$"
    ),
    "A duration with a unit: \"1us\", \"500ns\", \"2.5ms\", \"1s\", \"300ps\".",
    false
);
string_unit_serde!(
    Bytes,
    BYTES_HINT,
    concat!(
        r"^\s*(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*",
        r"(B|KB|kB|MB|GB|TB|KiB|MiB|GiB|TiB)?\s*$"
    ),
    "A size: \"64KB\" (10^3 bytes), \"64KiB\" (2^10), \"1MB\", \"1000B\", or a number of bytes.",
    true
);

impl Rate {
    pub const fn gbps(g: u64) -> Rate {
        Rate(g * 1_000_000_000)
    }
    pub const fn bps(self) -> u64 {
        self.0
    }
}

impl Duration {
    pub const fn from_ps(ps: u64) -> Duration {
        Duration(ps)
    }
    pub const fn from_ns(ns: u64) -> Duration {
        Duration(ns * 1_000)
    }
    pub const fn from_us(us: u64) -> Duration {
        Duration(us * 1_000_000)
    }
    pub const fn ps(self) -> u64 {
        self.0
    }
}

impl Bytes {
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rates() {
        assert_eq!("40Gbps".parse::<Rate>().unwrap(), Rate(40_000_000_000));
        assert_eq!("2.5Gbps".parse::<Rate>().unwrap(), Rate(2_500_000_000));
        assert_eq!("100Mbps".parse::<Rate>().unwrap(), Rate(100_000_000));
        assert_eq!("1e9bps".parse::<Rate>().unwrap(), Rate(1_000_000_000));
        assert_eq!("20Mb/s".parse::<Rate>().unwrap(), Rate(20_000_000));
        assert_eq!("1GBps".parse::<Rate>().unwrap(), Rate(8_000_000_000));
        assert_eq!("0bps".parse::<Rate>().unwrap(), Rate(0));
        assert_eq!(" 40 Gbps ".parse::<Rate>().unwrap(), Rate(40_000_000_000));
        assert_eq!(Rate(40_000_000_000).to_string(), "40Gbps");
        assert_eq!(Rate(2_500_000_000).to_string(), "2.5Gbps");
        assert_eq!(Rate(999).to_string(), "999bps");
    }

    #[test]
    fn durations() {
        assert_eq!("1us".parse::<Duration>().unwrap(), Duration(1_000_000));
        assert_eq!("500ns".parse::<Duration>().unwrap(), Duration(500_000));
        assert_eq!(
            "2.5ms".parse::<Duration>().unwrap(),
            Duration(2_500_000_000)
        );
        assert_eq!(
            "1s".parse::<Duration>().unwrap(),
            Duration(1_000_000_000_000)
        );
        assert_eq!("300ps".parse::<Duration>().unwrap(), Duration(300));
        assert_eq!("0.001ms".parse::<Duration>().unwrap(), Duration(1_000_000));
        assert_eq!("1000ns".parse::<Duration>().unwrap(), Duration(1_000_000));
        assert_eq!("1µs".parse::<Duration>().unwrap(), Duration(1_000_000));
        // Sub-picosecond rounds to nearest.
        assert_eq!("1.4ps".parse::<Duration>().unwrap(), Duration(1));
        assert_eq!("1.5ps".parse::<Duration>().unwrap(), Duration(2));
        assert_eq!(Duration(2_500_000_000).to_string(), "2.5ms");
        assert_eq!(Duration(1).to_string(), "1ps");
    }

    #[test]
    fn bytes() {
        assert_eq!("64KB".parse::<Bytes>().unwrap(), Bytes(64_000));
        assert_eq!("64KiB".parse::<Bytes>().unwrap(), Bytes(65_536));
        assert_eq!("1MB".parse::<Bytes>().unwrap(), Bytes(1_000_000));
        assert_eq!("1000B".parse::<Bytes>().unwrap(), Bytes(1000));
        assert_eq!("1000".parse::<Bytes>().unwrap(), Bytes(1000));
        assert_eq!("1.5KiB".parse::<Bytes>().unwrap(), Bytes(1536));
        assert!("0.1KiB"
            .parse::<Bytes>()
            .unwrap_err()
            .0
            .contains("whole number"));
        assert_eq!(Bytes(65_536).to_string(), "64KiB");
        assert_eq!(Bytes(1500).to_string(), "1500B");
        assert_eq!(Bytes(12_000_000).to_string(), "12MB");
    }

    #[test]
    fn errors() {
        let e = "40".parse::<Rate>().unwrap_err().0;
        assert!(e.starts_with("expected a rate like \"40Gbps\""), "{e}");
        let e = "1".parse::<Duration>().unwrap_err().0;
        assert!(e.starts_with("expected a duration like \"1us\""), "{e}");
        assert!("-1Gbps".parse::<Rate>().unwrap_err().0.contains("negative"));
        assert!("-5us"
            .parse::<Duration>()
            .unwrap_err()
            .0
            .contains("negative"));
        assert!("-5".parse::<Bytes>().unwrap_err().0.contains("negative"));
        assert!("NaNGbps".parse::<Rate>().is_err());
        assert!("infGbps".parse::<Rate>().is_err());
        assert!("nan".parse::<Bytes>().is_err());
        assert!("1e30Gbps"
            .parse::<Rate>()
            .unwrap_err()
            .0
            .contains("too large"));
        assert!("99999999999999999999999999999999999999999999s"
            .parse::<Duration>()
            .unwrap_err()
            .0
            .contains("too large"));
        assert!("18446744073709551616"
            .parse::<Bytes>()
            .unwrap_err()
            .0
            .contains("too large"));
        assert!("1.2.3us".parse::<Duration>().is_err());
        assert!("us".parse::<Duration>().is_err());
        assert!("1 furlong".parse::<Duration>().is_err());
        assert!("1Gbpss".parse::<Rate>().is_err());
        assert!("".parse::<Bytes>().is_err());
    }

    #[test]
    fn serde_forms() {
        let r: Rate = serde_json::from_str("\"40Gbps\"").unwrap();
        assert_eq!(r, Rate(40_000_000_000));
        let e = serde_json::from_str::<Rate>("40").unwrap_err().to_string();
        assert!(
            e.contains("expected a rate like \\\"40Gbps\\\"")
                || e.contains("expected a rate like \"40Gbps\""),
            "{e}"
        );
        let e = serde_json::from_str::<Duration>("1.5")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a duration like"), "{e}");
        let b: Bytes = serde_json::from_str("1000").unwrap();
        assert_eq!(b, Bytes(1000));
        assert!(serde_json::from_str::<Bytes>("-3").is_err());
        assert!(serde_json::from_str::<Bytes>("1.5").is_err());
        assert_eq!(
            serde_json::to_string(&Duration(1_000_000)).unwrap(),
            "\"1us\""
        );
        let schema = serde_json::to_value(schemars::schema_for!(Rate)).unwrap();
        assert_eq!(schema["type"], "string");
        assert!(schema["pattern"].is_string());
    }

    proptest! {
        #[test]
        fn rate_round_trips(v in any::<u64>()) {
            let s = Rate(v).to_string();
            prop_assert_eq!(s.parse::<Rate>().unwrap(), Rate(v));
            let j = serde_json::to_string(&Rate(v)).unwrap();
            prop_assert_eq!(serde_json::from_str::<Rate>(&j).unwrap(), Rate(v));
        }

        #[test]
        fn duration_round_trips(v in any::<u64>()) {
            let s = Duration(v).to_string();
            prop_assert_eq!(s.parse::<Duration>().unwrap(), Duration(v));
        }

        #[test]
        fn bytes_round_trip(v in any::<u64>()) {
            let s = Bytes(v).to_string();
            prop_assert_eq!(s.parse::<Bytes>().unwrap(), Bytes(v));
            prop_assert_eq!(v.to_string().parse::<Bytes>().unwrap(), Bytes(v));
        }

        #[test]
        fn small_units_scale(v in 0u64..1_000_000_000) {
            prop_assert_eq!(format!("{}ns", v).parse::<Duration>().unwrap(), Duration(v * 1000));
            prop_assert_eq!(format!("{}Mbps", v).parse::<Rate>().unwrap(), Rate(v * 1_000_000));
            prop_assert_eq!(format!("{}KiB", v).parse::<Bytes>().unwrap(), Bytes(v * 1024));
        }

        #[test]
        fn garbage_never_panics(s in "\\PC{0,12}") {
            let _ = s.parse::<Rate>();
            let _ = s.parse::<Duration>();
            let _ = s.parse::<Bytes>();
        }

        #[test]
        fn negatives_rejected(v in 1u64..1_000_000) {
            let (r, d, b) = (format!("-{}Gbps", v), format!("-{}us", v), format!("-{}", v));
            prop_assert!(r.parse::<Rate>().is_err());
            prop_assert!(d.parse::<Duration>().is_err());
            prop_assert!(b.parse::<Bytes>().is_err());
        }
    }
}
