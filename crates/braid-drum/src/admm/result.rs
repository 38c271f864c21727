//! The end of a solve: the certified gap of an iterate and the result in user units.

use super::{recover, Admm, SolveResult, Trace};

impl Admm {
    /// The duality gap of the current iterate, normalized: `(UB(ν) − f(x̃))/Σw` (user units)
    /// with the dual bound at the scaled duals' prices ν = ρ rs v and the feasible recovery x̃.
    /// Costs about one x- and one z-update plus the recovery.
    pub fn certified_gap(&self, wsum: f64) -> f64 {
        self.certified_gaps(wsum).0
    }

    /// The certified gap `(UB − f(x̃))/Σw` and the relative one `(UB − f(x̃))/|f(x̃)|`, from one
    /// bound and one recovery.
    pub fn certified_gaps(&self, wsum: f64) -> (f64, f64) {
        let sc = &self.sc;
        let nu: Vec<f64> = self
            .v
            .iter()
            .zip(&self.rs)
            .map(|(v, r)| self.rho * r * v)
            .collect();
        let ub = sc.to_user(crate::dual::upper_bound_at(sc, &self.lay, &nu, &self.x).0);
        let (xf, zf) = self.recover(&self.x);
        let ff = sc.to_user(sc.objective(&xf, &zf));
        (
            (ub - ff) / wsum,
            (ub - ff) / ff.abs().max(f64::MIN_POSITIVE),
        )
    }

    pub fn finish(
        self,
        method: &str,
        trace: Trace,
        converged: bool,
        solve_time: f64,
    ) -> SolveResult {
        let nn = self.p.entries();
        let dual_bound = if self.opt.dual_bound {
            let nu: Vec<f64> = self
                .v
                .iter()
                .zip(&self.rs)
                .map(|(v, r)| self.rho * r * v)
                .collect();
            let sc = &self.sc;
            Some(sc.to_user(crate::dual::upper_bound_at(sc, &self.lay, &nu, &self.x).0))
        } else {
            None
        };
        // the iterates the result does not carry are freed before the feasible point is made,
        // and the result's arrays are the state's, rescaled in place (same bits as a scaled
        // copy): the end of a solve no longer holds state and result at once (issue 31 §3)
        let Admm {
            sc,
            lay,
            mut x,
            mut z,
            lam,
            mu,
            iter,
            rho,
            v,
            dv,
            y,
            h,
            hsum,
            rs,
            rp2,
            base,
            sig,
            ..
        } = self;
        // (fields left in a destructured value would live to the end of the function)
        drop((v, dv, y, h, hsum, rs, rp2, base, sig));
        let (mut xf, mut zf) = recover(&sc, &lay, &x);
        drop(lay);
        let objective = sc.to_user(sc.objective(&x, &z));
        let objective_feasible = sc.to_user(sc.objective(&xf, &zf));
        let sx = sc.sx;
        let lf = sc.sf / sx;
        z.truncate(nn);
        zf.truncate(nn);
        for v in [&mut x, &mut z, &mut xf, &mut zf] {
            v.iter_mut().for_each(|e| *e *= sx);
        }
        SolveResult {
            method: method.to_string(),
            x,
            z,
            x_feasible: xf,
            z_feasible: zf,
            objective,
            objective_feasible,
            dual_bound,
            iterations: iter,
            converged,
            trace,
            setup_time: 0.0,
            solve_time,
            lambda: lam.iter().map(|l| l * lf).collect(),
            mu: mu.iter().map(|l| l * lf).collect(),
            rho_final: rho,
        }
    }
}
