//! The DRUM model: data, validation and the coupling layout.
//!
//! Entries are indexed host-major: entry `k = i*m + j` is application j on host i.
//!
//! ```text
//! maximise   sum_k w_k U_alpha(x_k)  -  sum_k beta_k / z_k^2
//! s.t.       sum_j x_ij <= Q_i,   sum_j z_ij <= C_i            (per host i)
//!            g_k <= x_k,  x_k = 0 for inactive k                  (guarantee, top-k selection)
//!            z = P x                                              (coupling)
//!            R x <= L                                             (optional fabric links)
//! ```
//! One-sided: `P = diag(a)`. Two-sided: `z_ij = a_ij (x_ij + sum_{l != i} B[(l,j), i] x_lj)`:
//! the receiver's CQEs for traffic from the other hosts plus its own send completions. The self
//! term is the identity part only; a non-zero `B[(l,j), l]` (host l "sending to itself") is
//! rejected so that it cannot be counted twice.

use std::fmt;

/// Input errors, each naming the parameter at fault.
#[derive(Clone, Debug, PartialEq)]
pub struct DrumError {
    pub param: String,
    pub msg: String,
}

impl DrumError {
    pub fn new(param: &str, msg: impl Into<String>) -> Self {
        DrumError {
            param: param.to_string(),
            msg: msg.into(),
        }
    }
}

impl fmt::Display for DrumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.param, self.msg)
    }
}

impl std::error::Error for DrumError {}

pub type Result<T> = std::result::Result<T, DrumError>;

/// Sparse traffic matrix B: for each sender entry (l, j), the fractions of its WQEs that go to
/// each destination host i (CSR over sender entries).
#[derive(Clone, Debug, Default)]
pub struct Traffic {
    pub ptr: Vec<u64>,  // len N+1
    pub dst: Vec<u32>,  // destination host
    pub frac: Vec<f64>, // fraction
}

/// Fabric links: capacity and the host pairs whose traffic crosses each link.
#[derive(Clone, Debug, Default)]
pub struct Links {
    pub cap: Vec<f64>,
    /// (src host, dst host, link) triplets
    pub paths: Vec<(u32, u32, u32)>,
    /// cost of one WQE of entry k on a link (e.g. message size when capacities are bytes/s);
    /// empty means 1.
    pub size: Vec<f64>,
}

/// The largest α accepted. The α-fair allocation tends to max-min fairness as α grows; its
/// rates differ from max-min's by factors `(w_j/w_k)^(1/α)` (0.7% for weights within a factor
/// 2 at α = 100), while `x^(1−α)` overflows double precision once a rate is a factor
/// `e^(709/(α−1))` below the scale (0.2 of the mean share at α = 440, 0.001 at α = 100).
pub const MAX_ALPHA: f64 = 100.0;

#[derive(Clone, Debug)]
pub struct Problem {
    pub n: usize,
    pub m: usize,
    pub alpha: f64,
    pub beta: f64,
    pub w: Vec<f64>,
    pub a: Vec<f64>,
    pub q_cap: Vec<f64>,
    pub c_cap: Vec<f64>,
    /// guaranteed rates (lower bounds); empty = none
    pub guarantee: Vec<f64>,
    /// top-k selection result; empty = all active
    pub active: Vec<bool>,
    /// preemptible range coefficients r (SOC constraint sum x + ||r o x|| <= Q); empty = none
    pub preempt: Vec<f64>,
    pub two_sided: bool,
    pub traffic: Option<Traffic>,
    pub links: Option<Links>,
}

fn check_vec(name: &str, v: &[f64], len: usize, allow_empty: bool) -> Result<()> {
    if v.is_empty() && allow_empty {
        return Ok(());
    }
    if v.len() != len {
        return Err(DrumError::new(
            name,
            format!("has length {}, expected {}", v.len(), len),
        ));
    }
    Ok(())
}

/// The first host (of `c_cap`, numbered from `h0`) whose guaranteed CQE load `pg` (the CQ rows
/// of those hosts, m per host) exceeds its capacity.
pub fn cq_guarantee_error(pg: &[f64], c_cap: &[f64], m: usize, h0: usize) -> Option<DrumError> {
    for (i, &c) in c_cap.iter().enumerate() {
        let s: f64 = pg[i * m..(i + 1) * m].iter().sum();
        if s > c {
            return Some(DrumError::new(
                "guarantee",
                format!(
                    "infeasible guarantees on host {}: their CQEs need {s} of the CQE capacity C = {c}",
                    h0 + i
                ),
            ));
        }
    }
    None
}

impl Problem {
    pub fn entries(&self) -> usize {
        self.n * self.m
    }
    pub fn is_active(&self, k: usize) -> bool {
        self.active.is_empty() || self.active[k]
    }
    pub fn lower(&self, k: usize) -> f64 {
        if self.guarantee.is_empty() {
            0.0
        } else {
            self.guarantee[k]
        }
    }
    pub fn beta_k(&self, k: usize) -> f64 {
        if self.is_active(k) {
            self.beta
        } else {
            0.0
        }
    }
    pub fn has_preempt(&self) -> bool {
        !self.preempt.is_empty() && self.preempt.iter().any(|&r| r > 0.0)
    }

    /// Check shapes, signs and feasibility of the guarantees.
    pub fn validate(&self) -> Result<()> {
        self.validate_local(0, self.n)?;
        self.validate_coupled()?;
        self.validate_scale()
    }

    /// The solvers work in units of the mean equal share `sx` with the objective divided by
    /// `mean(w)·sx^(1−α)` (`scaled.rs`); refuse an instance whose factors leave double precision
    /// (they gave NaN and −inf "converged" answers): α = 50 with rates in ops/s makes
    /// `sx^(1−α)` underflow, capacities of 1e-300 make the CQ term's `β/sx²` overflow.
    pub fn validate_scale(&self) -> Result<()> {
        use crate::scaled::{Factors, HostStats};
        let f = Factors::from_stats(&HostStats::of(self), self.alpha, true);
        let wf = f.sx.powf(1.0 - self.alpha) / f.sf;
        let bf = 1.0 / (f.sx * f.sx * f.sf);
        let ok = |v: f64| v.is_finite() && v > 0.0;
        if !(ok(f.sx) && ok(f.sf) && ok(wf)) {
            return Err(DrumError::new(
                "alpha",
                format!(
                    "with alpha = {} and rates of ~{:e} (the mean equal share), the utility's \
                     scale sx^(1-alpha) is outside double precision: give the rates and \
                     capacities in units near 1 (e.g. Mops) or use a smaller alpha",
                    self.alpha, f.sx
                ),
            ));
        }
        if self.beta > 0.0 && !(ok(bf) && (self.beta * bf).is_finite()) {
            return Err(DrumError::new(
                "Q",
                format!(
                    "capacities whose mean equal share is ~{:e} put the CQ term beta/z^2 \
                     outside double precision relative to the utility: give the rates and \
                     capacities in units near 1 (e.g. Mops), or beta = 0",
                    f.sx
                ),
            ));
        }
        Ok(())
    }

    /// The checks that need only this problem's own hosts. For a piece of a larger instance
    /// (hosts `h0..h0+n` of `n_total`, traffic destinations global), messages name global hosts
    /// and entries. Not checked here: guarantees against the CQE and link capacities, which
    /// depend on the senders' traffic (`validate_coupled`, or the sharded solver's setup).
    pub fn validate_local(&self, h0: usize, n_total: usize) -> Result<()> {
        let (n, m) = (self.n, self.m);
        let ent = |k: usize| format!("entry {} (host {}, app {})", h0 * m + k, h0 + k / m, k % m);
        if n == 0 {
            return Err(DrumError::new("n", "must be at least 1 host"));
        }
        if m == 0 {
            return Err(DrumError::new(
                "m",
                "must be at least 1 application per host",
            ));
        }
        let nn = n
            .checked_mul(m)
            .ok_or_else(|| DrumError::new("n*m", "too large"))?;
        if nn > u32::MAX as usize {
            return Err(DrumError::new(
                "n*m",
                "more than 2^32 entries is not supported",
            ));
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0 && self.alpha <= MAX_ALPHA) {
            return Err(DrumError::new(
                "alpha",
                format!(
                    "must be a number in (0, {MAX_ALPHA}], got {} (beyond {MAX_ALPHA} the \
                     utility x^(1-alpha) leaves double precision)",
                    self.alpha
                ),
            ));
        }
        if !(self.beta.is_finite() && self.beta >= 0.0) {
            return Err(DrumError::new(
                "beta",
                format!("must be a finite number >= 0, got {}", self.beta),
            ));
        }
        check_vec("w", &self.w, nn, false)?;
        check_vec("a", &self.a, nn, false)?;
        check_vec("Q", &self.q_cap, n, false)?;
        check_vec("C", &self.c_cap, n, false)?;
        check_vec("guarantee", &self.guarantee, nn, true)?;
        check_vec("preempt", &self.preempt, nn, true)?;
        if !self.active.is_empty() && self.active.len() != nn {
            return Err(DrumError::new(
                "active",
                format!("has length {}, expected {}", self.active.len(), nn),
            ));
        }
        for (i, &q) in self.q_cap.iter().enumerate() {
            if !(q.is_finite() && q > 0.0) {
                return Err(DrumError::new(
                    "Q",
                    format!(
                        "capacity of host {} must be finite and > 0, got {q}",
                        h0 + i
                    ),
                ));
            }
        }
        for (i, &c) in self.c_cap.iter().enumerate() {
            if !(c.is_finite() && c > 0.0) {
                return Err(DrumError::new(
                    "C",
                    format!(
                        "capacity of host {} must be finite and > 0, got {c}",
                        h0 + i
                    ),
                ));
            }
        }
        for (k, &w) in self.w.iter().enumerate() {
            if !(w.is_finite() && w > 0.0) {
                return Err(DrumError::new(
                    "w",
                    format!("weight of {} must be finite and > 0, got {w}", ent(k)),
                ));
            }
        }
        for (k, &a) in self.a.iter().enumerate() {
            if !(a.is_finite() && a > 0.0) {
                return Err(DrumError::new(
                    "a",
                    format!("CQEs per WQE of {} must be finite and > 0, got {a}", ent(k)),
                ));
            }
        }
        for (k, &r) in self.preempt.iter().enumerate() {
            if !(r.is_finite() && r >= 0.0) {
                return Err(DrumError::new(
                    "preempt",
                    format!("{} must be finite and >= 0, got {r}", ent(k)),
                ));
            }
        }
        for (k, &g) in self.guarantee.iter().enumerate() {
            if !(g.is_finite() && g >= 0.0) {
                return Err(DrumError::new(
                    "guarantee",
                    format!("{} must be finite and >= 0, got {g}", ent(k)),
                ));
            }
            if g > 0.0 && !self.is_active(k) {
                return Err(DrumError::new(
                    "guarantee",
                    format!("{} has a guarantee but is not active", ent(k)),
                ));
            }
        }
        if self.two_sided && self.traffic.is_none() {
            return Err(DrumError::new(
                "B",
                "two-sided operations need the traffic matrix B",
            ));
        }
        if let Some(t) = &self.traffic {
            if t.ptr.len() != nn + 1
                || *t.ptr.last().unwrap() as usize != t.dst.len()
                || t.dst.len() != t.frac.len()
            {
                return Err(DrumError::new(
                    "B",
                    format!("must have shape (n*m, n) = ({nn}, {n})"),
                ));
            }
            if t.ptr.first() != Some(&0) || t.ptr.windows(2).any(|w| w[0] > w[1]) {
                return Err(DrumError::new(
                    "B",
                    "CSR pointer must start at 0 and not decrease",
                ));
            }
            for kl in 0..nn {
                let k = h0 * m + kl;
                let l = h0 + kl / m;
                let mut tot = 0.0;
                for e in t.ptr[kl] as usize..t.ptr[kl + 1] as usize {
                    let i = t.dst[e] as usize;
                    let f = t.frac[e];
                    if i >= n_total {
                        return Err(DrumError::new(
                            "B",
                            format!("destination host {i} out of range (n = {n_total})"),
                        ));
                    }
                    if !(f.is_finite() && f >= 0.0) {
                        return Err(DrumError::new(
                            "B",
                            format!("fraction B[{k}, {i}] must be finite and >= 0, got {f}"),
                        ));
                    }
                    if i == l && f != 0.0 {
                        return Err(DrumError::new(
                            "B",
                            format!("B[{k}, {l}] = {f}: traffic from host {l} to itself; the self term a x is already counted once in z, so the diagonal of B must be 0"),
                        ));
                    }
                    tot += f;
                }
                if tot > 1.0 + 1e-9 {
                    return Err(DrumError::new("B", format!("row {k} (host {l}, app {}) sums to {tot} > 1: fractions of an application's traffic", kl % m)));
                }
            }
        }
        if let Some(lk) = &self.links {
            if self.traffic.is_none() {
                return Err(DrumError::new(
                    "links",
                    "link capacities need the traffic matrix B (who sends to whom)",
                ));
            }
            for (e, &c) in lk.cap.iter().enumerate() {
                if !(c.is_finite() && c > 0.0) {
                    return Err(DrumError::new(
                        "link_cap",
                        format!("capacity of link {e} must be finite and > 0, got {c}"),
                    ));
                }
            }
            for &(s, d, e) in &lk.paths {
                if s as usize >= n || d as usize >= n || e as usize >= lk.cap.len() {
                    return Err(DrumError::new(
                        "link_paths",
                        format!("triplet ({s}, {d}, {e}) out of range"),
                    ));
                }
            }
            check_vec("link_size", &lk.size, nn, true)?;
            for &sz in &lk.size {
                if !(sz.is_finite() && sz > 0.0) {
                    return Err(DrumError::new("link_size", "must be finite and > 0"));
                }
            }
        }
        // guarantees must fit the WQE capacity: sum g + ||r o g|| <= Q
        if !self.guarantee.is_empty() {
            for i in 0..n {
                let g = &self.guarantee[i * m..(i + 1) * m];
                let mut s: f64 = g.iter().sum();
                if self.has_preempt() {
                    let r = &self.preempt[i * m..(i + 1) * m];
                    s += g
                        .iter()
                        .zip(r)
                        .map(|(g, r)| (g * r) * (g * r))
                        .sum::<f64>()
                        .sqrt();
                }
                if s > self.q_cap[i] {
                    return Err(DrumError::new(
                        "guarantee",
                        format!("infeasible guarantees on host {}: they need {s} of the WQE capacity Q = {}", h0 + i, self.q_cap[i]),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Guarantees against the CQE capacities (P g <= C) and the links (R g <= L).
    pub fn validate_coupled(&self) -> Result<()> {
        let (n, m) = (self.n, self.m);
        let nn = n * m;
        if !self.guarantee.is_empty() {
            let layout = Layout::build(self);
            let pg = layout.row_sums(&self.guarantee);
            if let Some(e) = cq_guarantee_error(&pg[..nn], &self.c_cap, m, 0) {
                return Err(e);
            }
            if let Some(lk) = &self.links {
                for (e, &c) in lk.cap.iter().enumerate() {
                    if pg[nn + e] > c {
                        return Err(DrumError::new(
                            "guarantee",
                            format!(
                                "infeasible guarantees: link {e} would carry {} > capacity {c}",
                                pg[nn + e]
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Sum of the weights of the active entries (the normaliser of the gap).
    /// Summed per host, then over the hosts in order: a sharded run adds the same per-host
    /// sums in the same order and gets the same bits.
    pub fn weight_sum(&self) -> f64 {
        crate::scaled::HostStats::of(self)
            .iter()
            .map(|h| h.wsum)
            .sum()
    }

    /// Objective `sum w U(x) - sum beta / z^2` over active entries (x-part) and all CQ rows with
    /// beta > 0.
    pub fn objective(&self, x: &[f64], z: &[f64]) -> f64 {
        use rayon::prelude::*;
        let al = crate::scalar::Alpha::new(self.alpha);
        let nn = self.entries();
        (0..nn)
            .into_par_iter()
            .with_min_len(4096)
            .map(|k| {
                let mut f = 0.0;
                if self.is_active(k) {
                    f += self.w[k] * al.utility(x[k]);
                    let zk = z[k];
                    f -= self.beta / (zk * zk);
                }
                f
            })
            .sum()
    }
}

/// The coupling z = P x (and link loads R x) as "pairs": one pair per non-zero of the stacked
/// matrix [P; R], stored sender-major, with the transposed (row-major) index.
#[derive(Clone, Debug)]
pub struct Layout {
    pub n: usize,
    pub m: usize,
    /// number of rows: N CQ rows followed by the link rows
    pub rows: usize,
    /// true when P = diag(a) and there are no links: pair k = entry k = row k
    pub diag: bool,
    pub send_ptr: Vec<u64>, // len N+1
    pub pair_row: Vec<u32>,
    pub pair_coef: Vec<f64>,
    /// sender entry of each pair (empty when diag)
    pub pair_sender: Vec<u32>,
    pub row_ptr: Vec<u64>,  // len rows+1
    pub row_pair: Vec<u64>, // pair index per row slot
    /// sum over the pairs of an entry of coef^2
    pub sum_p2: Vec<f64>,
    /// link capacities (rows N..)
    pub link_cap: Vec<f64>,
    /// senders per row over all ranks, for the rows a shard owns (empty: the local count, which
    /// is the whole count outside sharded runs)
    pub row_n: Vec<u32>,
    /// the pair passes may run in application tiles ([`crate::tiles`]): coupled (not diag), no
    /// rows but the n·m CQ rows, and every pair's row is of its sender's application
    pub app_tiled: bool,
}

impl Layout {
    pub fn build(p: &Problem) -> Layout {
        let (n, m) = (p.n, p.m);
        let nn = n * m;
        let nl = p.links.as_ref().map(|l| l.cap.len()).unwrap_or(0);
        let rows = nn + nl;
        let use_b = p.two_sided;
        let diag = !use_b && p.links.is_none();
        // link membership: for each (src, dst) the links it crosses
        let mut pair_links: std::collections::HashMap<(u32, u32), Vec<u32>> = Default::default();
        if let Some(lk) = &p.links {
            for &(s, d, e) in &lk.paths {
                pair_links.entry((s, d)).or_default().push(e);
            }
        }
        let mut send_ptr = Vec::with_capacity(nn + 1);
        let mut pair_row: Vec<u32> = Vec::with_capacity(nn);
        let mut pair_coef: Vec<f64> = Vec::with_capacity(nn);
        send_ptr.push(0u64);
        let mut link_acc: Vec<(u32, f64)> = Vec::new();
        for k in 0..nn {
            let (l, j) = (k / m, k % m);
            pair_row.push(k as u32);
            pair_coef.push(p.a[k]);
            if let Some(t) = &p.traffic {
                let (s, e) = (t.ptr[k] as usize, t.ptr[k + 1] as usize);
                if use_b {
                    for q in s..e {
                        let i = t.dst[q] as usize;
                        let f = t.frac[q];
                        if f > 0.0 && i != l {
                            let r = i * m + j;
                            pair_row.push(r as u32);
                            pair_coef.push(p.a[r] * f);
                        }
                    }
                }
                if let Some(lk) = &p.links {
                    link_acc.clear();
                    let sz = if lk.size.is_empty() { 1.0 } else { lk.size[k] };
                    for q in s..e {
                        let i = t.dst[q];
                        let f = t.frac[q];
                        if f > 0.0 {
                            if let Some(ls) = pair_links.get(&(l as u32, i)) {
                                for &e in ls {
                                    link_acc.push((e, f * sz));
                                }
                            }
                        }
                    }
                    link_acc.sort_by_key(|a| a.0);
                    let mut idx = 0;
                    while idx < link_acc.len() {
                        let e = link_acc[idx].0;
                        let mut c = 0.0;
                        while idx < link_acc.len() && link_acc[idx].0 == e {
                            c += link_acc[idx].1;
                            idx += 1;
                        }
                        pair_row.push((nn + e as usize) as u32);
                        pair_coef.push(c);
                    }
                }
            }
            send_ptr.push(pair_row.len() as u64);
        }
        let link_cap = p.links.as_ref().map(|l| l.cap.clone()).unwrap_or_default();
        Layout::from_pairs(n, m, rows, diag, send_ptr, pair_row, pair_coef, link_cap)
    }

    /// The layout from the pairs listed sender-major (`send_ptr` over the n*m sender entries):
    /// the row-major transpose, the pair senders and the per-entry sum of squared coefficients.
    #[allow(clippy::too_many_arguments)]
    pub fn from_pairs(
        n: usize,
        m: usize,
        rows: usize,
        diag: bool,
        send_ptr: Vec<u64>,
        pair_row: Vec<u32>,
        pair_coef: Vec<f64>,
        link_cap: Vec<f64>,
    ) -> Layout {
        let nn = n * m;
        let np = pair_row.len();
        let mut row_cnt = vec![0u64; rows + 1];
        for &r in &pair_row {
            row_cnt[r as usize + 1] += 1;
        }
        for r in 0..rows {
            row_cnt[r + 1] += row_cnt[r];
        }
        let row_ptr = row_cnt.clone();
        let mut fill = row_cnt;
        let mut row_pair = vec![0u64; np];
        for q in 0..np {
            let r = pair_row[q] as usize;
            row_pair[fill[r] as usize] = q as u64;
            fill[r] += 1;
        }
        let mut sum_p2 = vec![0.0; nn];
        for k in 0..nn {
            for q in send_ptr[k] as usize..send_ptr[k + 1] as usize {
                sum_p2[k] += pair_coef[q] * pair_coef[q];
            }
        }
        let app_tiled = !diag
            && rows == nn
            && (0..nn).all(|k| {
                (send_ptr[k] as usize..send_ptr[k + 1] as usize).all(|q| {
                    let r = pair_row[q] as usize;
                    r < nn && r % m == k % m
                })
            });
        // the tiled passes jump through these (`huge`)
        let (send_ptr, pair_row, pair_coef) = if app_tiled {
            (
                crate::huge::copy(&send_ptr),
                crate::huge::copy(&pair_row),
                crate::huge::copy(&pair_coef),
            )
        } else {
            (send_ptr, pair_row, pair_coef)
        };
        let mut pair_sender = Vec::new();
        if !diag {
            pair_sender.reserve(np);
            for k in 0..nn {
                for _ in send_ptr[k]..send_ptr[k + 1] {
                    pair_sender.push(k as u32);
                }
            }
        }
        Layout {
            n,
            m,
            rows,
            diag,
            send_ptr,
            pair_row,
            pair_coef,
            pair_sender,
            row_ptr,
            row_pair,
            sum_p2,
            link_cap,
            row_n: Vec::new(),
            app_tiled,
        }
    }

    pub fn pairs(&self) -> usize {
        self.pair_row.len()
    }

    /// Number of pairs in row r.
    #[inline]
    pub fn row_len(&self, r: usize) -> usize {
        (self.row_ptr[r + 1] - self.row_ptr[r]) as usize
    }

    /// Number of senders (pairs) of row r over the whole instance: n_e of the z- and dual
    /// updates. A shard holds only its own pairs, so it stores the count.
    #[inline]
    pub fn senders(&self, r: usize) -> usize {
        if self.row_n.is_empty() {
            self.row_len(r)
        } else {
            self.row_n[r] as usize
        }
    }

    /// [P; R] x
    pub fn row_sums(&self, x: &[f64]) -> Vec<f64> {
        use rayon::prelude::*;
        let mut out = vec![0.0; self.rows];
        if self.app_tiled {
            // same bits, without a cache miss per pair at scale
            crate::tiles::row_sums(self, x, &mut out);
            return out;
        }
        out.par_iter_mut()
            .with_min_len(4096)
            .enumerate()
            .for_each(|(r, o)| {
                let mut s = 0.0;
                for t in self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize {
                    let q = self.row_pair[t] as usize;
                    s += self.pair_coef[q] * x[self.sender_of(q)];
                }
                *o = s;
            });
        out
    }

    /// The sender entry of pair q (binary search in send_ptr).
    #[inline]
    pub fn sender_of(&self, q: usize) -> usize {
        if self.diag {
            q
        } else {
            self.pair_sender[q] as usize
        }
    }
}
