//! Flow-size distributions as piecewise-linear CDFs, in the HPCC format: one `size_bytes
//! cumulative_percent` pair per line, both non-decreasing, the last percent 100.
//!
//! Sampling follows HPCC's `traffic_gen.py` exactly: draw `y` uniform in [0, 100), take the first
//! point `i >= 1` with `y <= percent[i]`, interpolate linearly between points `i-1` and `i`, truncate
//! to an integer, and use 1 byte if that is 0. The mean is HPCC's `getAvg`: the trapezoid sum.
//!
//! Built-in distributions (flow-size CDFs are data):
//! - `web-search`: the DCTCP paper's web-search workload (Alizadeh et al., SIGCOMM'10), the file
//!   `WebSearch_distribution.txt` shipped with HPCC's traffic generator.
//! - `fb-hadoop`: Facebook Hadoop (Roy et al., SIGCOMM'15), HPCC's `FbHdp_distribution.txt`.
//! - `data-mining`: the VL2 data-mining workload (Greenberg et al., SIGCOMM'09) in the form used by
//!   pFabric (Alizadeh et al., SIGCOMM'13) and CONGA (Alizadeh et al., SIGCOMM'14): pFabric's ns-2
//!   simulation CDF (`CDF_dataming.tcl`) gives sizes in 1460-byte packets — 50% ≤ 1, 60% ≤ 2,
//!   70% ≤ 3, 80% ≤ 7, 90% ≤ 267, 95% ≤ 2107, 99% ≤ 66667, 100% ≤ 666667 packets — converted here to
//!   bytes (× 1460). Its mean is ≈ 7.47 MB, the "≈ 7.4 MB average" those papers quote; 80% of flows
//!   are at most 7 packets while almost all bytes are in the rare 100 MB – 1 GB flows. (The .tcl
//!   file itself was not retrievable here; the points were cross-checked against samples drawn from
//!   it, github.com/knaive/smartrep `cdf/data-mining.dat`: about half are 1 packet, most ≤ 7, the
//!   largest ≈ 650,000 packets.)
//! - `ali-storage`, `google-rpc`: the other two distributions shipped with HPCC's generator
//!   (Alibaba storage 2019, Google RPC 2008).

use crate::input::shown;
use std::path::Path;

/// A piecewise-linear flow-size CDF.
#[derive(Clone, Debug, PartialEq)]
pub struct Cdf {
    /// (size in bytes, cumulative percent 0–100), both non-decreasing, last percent = 100.
    pub points: Vec<(f64, f64)>,
}

/// Names of the built-in distributions.
pub const BUILTIN: &[&str] = &[
    "web-search",
    "data-mining",
    "fb-hadoop",
    "ali-storage",
    "google-rpc",
];

fn builtin_text(name: &str) -> Option<&'static str> {
    Some(match name {
        "web-search" => include_str!("cdf/web-search.txt"),
        "data-mining" => include_str!("cdf/data-mining.txt"),
        "fb-hadoop" => include_str!("cdf/fb-hadoop.txt"),
        "ali-storage" => include_str!("cdf/ali-storage.txt"),
        "google-rpc" => include_str!("cdf/google-rpc.txt"),
        _ => return None,
    })
}

impl Cdf {
    /// A built-in distribution by name (see [`BUILTIN`]).
    pub fn builtin(name: &str) -> Option<Cdf> {
        builtin_text(name).map(|t| Cdf::parse(name, t).expect("built-in CDF is valid"))
    }

    /// A built-in name, or else a file path (relative to `base_dir`). Errors are messages naming
    /// the file and line.
    pub fn load(spec: &str, base_dir: &Path) -> Result<Cdf, String> {
        if let Some(c) = Cdf::builtin(spec) {
            return Ok(c);
        }
        let path = crate::topology::resolve(base_dir, spec);
        if !path.exists() {
            return Err(format!(
                "{spec:?} is neither a built-in distribution ({}) nor a readable file: {}: no such file",
                BUILTIN.join(", "),
                path.display()
            ));
        }
        let text = crate::input::read_text(&path, crate::input::CDF_LIMIT)?;
        Cdf::parse(&path.display().to_string(), &text)
    }

    /// Parses `size percent` lines. Blank lines and `#` comments are skipped.
    pub fn parse(name: &str, text: &str) -> Result<Cdf, String> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |m: String| format!("{name}:{}: {m}", i + 1);
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() != 2 {
                return Err(err(format!(
                    "expected `size_bytes cumulative_percent` (two numbers), got {} fields",
                    f.len()
                )));
            }
            let x: f64 = f[0]
                .parse()
                .map_err(|_| err(format!("expected a size in bytes, got {}", shown(f[0]))))?;
            let y: f64 = f[1].parse().map_err(|_| {
                err(format!(
                    "expected a cumulative percent, got {}",
                    shown(f[1])
                ))
            })?;
            if !x.is_finite() || x < 0.0 {
                return Err(err(format!(
                    "size must be a non-negative number, got {:?}",
                    f[0]
                )));
            }
            if !y.is_finite() || !(0.0..=100.0).contains(&y) {
                return Err(err(format!(
                    "cumulative percent must be between 0 and 100, got {:?}",
                    f[1]
                )));
            }
            if let Some(&(px, py)) = points.last() {
                if x < px {
                    return Err(err(format!("sizes must not decrease ({x} after {px})")));
                }
                if y < py {
                    return Err(err(format!(
                        "cumulative percents must not decrease ({y} after {py})"
                    )));
                }
            }
            points.push((x, y));
        }
        if points.len() < 2 {
            return Err(format!("{name}: a CDF needs at least two points"));
        }
        let last = points.last().unwrap().1;
        if (last - 100.0).abs() > 1e-9 {
            return Err(format!(
                "{name}: the last cumulative percent must be 100, got {last}"
            ));
        }
        Ok(Cdf { points })
    }

    /// Mean size in bytes (HPCC's `getAvg`: trapezoids between consecutive points).
    pub fn mean(&self) -> f64 {
        let mut s = 0.0;
        for w in self.points.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            s += (x0 + x1) / 2.0 * (y1 - y0);
        }
        s / 100.0
    }

    /// The size at cumulative percent `y` (0–100), interpolated as HPCC does.
    pub fn value_at_percent(&self, y: f64) -> f64 {
        let p = &self.points;
        for i in 1..p.len() {
            if y <= p[i].1 {
                let (x0, y0) = p[i - 1];
                let (x1, y1) = p[i];
                if y1 == y0 {
                    return x0;
                }
                return x0 + (x1 - x0) / (y1 - y0) * (y - y0);
            }
        }
        p[p.len() - 1].0
    }

    /// A flow size from a uniform draw `u` in [0, 1): truncated to whole bytes, at least 1.
    pub fn sample(&self, u: f64) -> u64 {
        let v = self.value_at_percent(u * 100.0);
        let s = v as u64; // truncation, as HPCC's int()
        s.max(1)
    }

    /// The CDF (fraction 0–1) at size `x`, linear between points (the distribution `sample`
    /// draws from, before truncation).
    pub fn fraction_at(&self, x: f64) -> f64 {
        let p = &self.points;
        if x < p[0].0 {
            return 0.0;
        }
        // The last point with size <= x, then interpolate towards the next larger size.
        let mut i = 0;
        while i + 1 < p.len() && p[i + 1].0 <= x {
            i += 1;
        }
        if i + 1 == p.len() {
            return 1.0;
        }
        let (x0, y0) = p[i];
        let (x1, y1) = p[i + 1];
        (y0 + (y1 - y0) * (x - x0) / (x1 - x0)) / 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        for n in BUILTIN {
            let c = Cdf::builtin(n).unwrap();
            assert!(c.mean() > 0.0, "{n}");
        }
        // HPCC's web-search mean (traffic_gen.py's getAvg) is 1,711,250 bytes.
        let ws = Cdf::builtin("web-search").unwrap().mean();
        assert!((ws - 1_711_250.0).abs() < 1.0, "{ws}");
        let dm = Cdf::builtin("data-mining").unwrap().mean();
        assert!((dm - 7.47e6).abs() < 0.05e6, "{dm}");
    }

    #[test]
    fn interpolation_matches_hpcc() {
        let c = Cdf::parse("t", "0 0\n100 50\n300 100\n").unwrap();
        assert_eq!(c.value_at_percent(25.0), 50.0);
        assert_eq!(c.value_at_percent(75.0), 200.0);
        assert_eq!(c.sample(0.0), 1);
        assert_eq!(c.sample(0.999999), 299);
        assert_eq!(c.mean(), (50.0 * 50.0 + 200.0 * 50.0) / 100.0);
        assert!((c.fraction_at(200.0) - 0.75).abs() < 1e-12);
        assert_eq!(c.fraction_at(1e9), 1.0);
    }

    #[test]
    fn bad_cdfs() {
        assert!(Cdf::parse("t", "0 0\n100 50\n")
            .unwrap_err()
            .contains("100"));
        assert!(Cdf::parse("t", "0 0\n100 50\n50 100\n")
            .unwrap_err()
            .starts_with("t:3:"));
        assert!(Cdf::parse("t", "0 0\n100 x\n")
            .unwrap_err()
            .starts_with("t:2:"));
        assert!(Cdf::load("no-such-thing", Path::new("."))
            .unwrap_err()
            .contains("web-search"));
    }
}
