//! Per-pair penalties for the two-sided ADMM (`AdmmOptions::pair_penalty`): one penalty per
//! (row, sender) pair, the sender's, re-estimated from the iterate's curvatures
//! (docs/drum.md, "Per-pair penalties").

use super::{median_rho, Admm};

/// Largest ratio of a pair's penalty to the median's (and its inverse): the curvatures of the
/// α = 5 binding-C instance span 10⁷ (docs/drum.md); the span keeps a rate near 0 from
/// freezing its pairs.
const PAIR_SPAN: f64 = 1e6;
/// The per-pair penalties are re-estimated at PAIR_EVERY · 2^j iterations.
pub(super) const PAIR_EVERY: usize = 25;

impl Admm {
    /// Per-pair penalties: every pair of sender entry k gets `rho_q = rho sig[k]` (in place of
    /// its row's `rho rs_e`). Two-sided, the senders of a row are other hosts' entries whose
    /// curvatures `αw x^{−α−1}` can lie decades apart (a binding CQE capacity at α = 5), and
    /// one penalty per row cannot match them all (docs/drum.md, "Per-pair penalties").
    ///
    /// ADMM on the same splitting with a penalty per pair: the y-block (the y's of a row given
    /// z_e) is `min Σ_q ρ_q/2 (y_q − t_q)²` on `Σ_q y_q = z_e`, whose value is
    /// `(z_e − Σt)²/(2 S_e)` with `S_e = Σ_q 1/ρ_q`; its multiplier makes the unscaled duals
    /// of all pairs of a row equal, `ν_e`. Writing `ν_e = ρ rs_e v_e` with
    /// `rs_e = n_e / Σ_q (1/sig_q)` (the harmonic mean of the pairs' scales) the z- and dual
    /// updates are exactly the per-row ones with that `rs_e`; what changes is per pair:
    /// `y_q = h_q − dv_e rs_e/sig_q`, the x-update's linear term `ρ Σ_q p (rs_e v_e − sig_q
    /// y_q)`, its quadratic one `ρ Σ_q sig_q p²` and the dual residual `ρ Σ_q sig_q p Δy_q`.
    /// With `sig` equal to the row scales this is the per-row method. Call before the first
    /// iteration (y and v are still the start's).
    pub fn set_pair_penalties(&mut self, sig: Vec<f64>) {
        let lay = &*self.lay;
        assert!(!lay.diag && sig.len() == self.x.len());
        for r in 0..lay.rows {
            let (a, b) = (lay.row_ptr[r] as usize, lay.row_ptr[r + 1] as usize);
            if a == b {
                continue;
            }
            let inv: f64 = (a..b)
                .map(|t| 1.0 / sig[lay.sender_of(lay.row_pair[t] as usize)])
                .sum();
            self.rs[r] = (b - a) as f64 / inv;
        }
        for (k, r) in self.rp2.iter_mut().enumerate() {
            *r = sig[k] * lay.sum_p2[k];
        }
        self.rs_unit = false;
        self.base_ok = false;
        self.sig = sig;
    }

    /// Per-pair scales from the curvature of each sender entry's utility at `x` (scaled units),
    /// `αw x^{−α−1} / Σ_q p_q²`, relative to their median, which is returned too (the penalty
    /// they call for). Inactive entries take 1.
    pub fn pair_scales_at(&self, x: &[f64]) -> (Vec<f64>, f64) {
        let sc = &self.sc;
        let c: Vec<f64> = (0..x.len())
            .map(|k| {
                let xk = x[k];
                if sc.w[k] > 0.0 && xk > 0.0 {
                    sc.al.a * sc.w[k] * sc.al.inv_pow(xk) / xk / self.lay.sum_p2[k].max(1e-300)
                } else {
                    f64::NAN
                }
            })
            .collect();
        let fin: Vec<f64> = c
            .iter()
            .copied()
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        let med = median_rho(&fin);
        let sig = c
            .iter()
            .map(|&v| {
                if v.is_finite() && v > 0.0 {
                    (v / med).clamp(1.0 / PAIR_SPAN, PAIR_SPAN)
                } else {
                    1.0
                }
            })
            .collect();
        (sig, med)
    }

    /// New per-pair scales and penalty keeping the unscaled duals `ν = ρ rs v` (and y): a
    /// change of the penalties between iterations, as residual balancing makes.
    pub fn rescale_pairs(&mut self, sig: Vec<f64>, rho: f64) {
        let (old, rho_old) = (self.rs.clone(), self.rho);
        self.set_pair_penalties(sig);
        for (e, v) in self.v.iter_mut().enumerate() {
            *v *= rho_old * old[e] / (rho * self.rs[e]);
        }
        self.rho = rho;
        self.base_ok = false;
    }
}
