//! DRUM: the RDMA network-utility-maximisation model and its solvers.
//!
//! * [`problem`]: the model (weighted alpha-fair WQE utility, CQ utility -beta/z^2, linear
//!   capacities, top-k active sets, guarantees and the preemption SOC constraint, one- and
//!   two-sided coupling with a sparse traffic matrix, optional fabric links);
//! * [`exact`]: the exact per-host solve of the one-sided problem (the reference);
//! * [`admm`]: Algorithms 1 and 2 of the paper with scaling, residual balancing,
//!   over-relaxation, Boyd and paper stopping rules and lossy result delivery;
//! * [`dual`]: the dual bound (duality-gap certificate) and the dual-decomposition baseline;
//! * [`select`]: the top-k selection step with anti-starvation aging;
//! * [`gen`]: the paper's random instances;
//! * [`shard`], [`piece`], [`comm`]: the ADMM sharded over ranks that hold only their own hosts
//!   (MPI through the Python package; threads in the tests);
//! * [`online`]: the same ADMM as one sans-IO state machine per host exchanging control
//!   messages over the fabric (the DRUM agent's solver), with a deterministic test network.
//!
//! See `docs/drum.md` for what is sound and what differs from the paper.

pub mod admm;
pub mod bound;
pub mod capacity;
pub mod comm;
pub mod dual;
pub mod exact;
pub mod footprint;
pub mod gen;
pub mod host;
pub mod huge;
pub mod online;
pub mod piece;
pub mod problem;
pub mod scalar;
pub mod scaled;
pub mod select;
pub mod shard;
pub mod tiles;

pub use admm::{Admm, AdmmOptions, Global, SolveResult, StopRule, Trace};
pub use dual::{dual_decomposition, DualOptions};
pub use exact::solve_exact;
pub use gen::{generate, generate_range, GenParams};
pub use piece::Piece;
pub use problem::{DrumError, Layout, Links, Problem, Traffic};
pub use shard::{solve_sharded, ShardResult};

/// Solve with ADMM (validates, builds the layout).
pub fn solve_admm(p: &Problem, opt: AdmmOptions) -> problem::Result<SolveResult> {
    solve_admm_arc(std::sync::Arc::new(p.clone()), opt)
}

/// Solve with ADMM without copying the problem.
pub fn solve_admm_arc(
    p: std::sync::Arc<Problem>,
    opt: AdmmOptions,
) -> problem::Result<SolveResult> {
    p.validate()?;
    check_admm_options(&opt)?;
    let t0 = std::time::Instant::now();
    let lay = std::sync::Arc::new(Layout::build(&p));
    let st = Admm::new(p.clone(), lay, opt);
    let setup = t0.elapsed().as_secs_f64();
    let mut r = st.run();
    check_finite(&p, &r)?;
    r.setup_time = setup;
    r.method = if p.two_sided {
        "admm2".into()
    } else {
        "admm1".into()
    };
    Ok(r)
}

pub fn check_admm_options(o: &AdmmOptions) -> problem::Result<()> {
    if !(o.relax >= 1.0 && o.relax < 2.0) {
        return Err(DrumError::new(
            "relax",
            format!("over-relaxation must be in [1, 2), got {}", o.relax),
        ));
    }
    if !(o.rho.is_finite()) || o.rho < 0.0 {
        return Err(DrumError::new(
            "rho",
            format!("must be > 0 (or 0 for automatic), got {}", o.rho),
        ));
    }
    if !(o.loss_prob >= 0.0 && o.loss_prob < 1.0) {
        return Err(DrumError::new(
            "loss",
            format!("loss probability must be in [0, 1), got {}", o.loss_prob),
        ));
    }
    for (key, v) in [("eps_abs", o.eps_abs), ("eps_rel", o.eps_rel)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(DrumError::new(
                key,
                format!("tolerance must be a finite number >= 0, got {v}"),
            ));
        }
    }
    if let Some(r) = o.reference {
        if !r.is_finite() {
            return Err(DrumError::new(
                "reference",
                format!("the known optimum must be a finite number, got {r}"),
            ));
        }
    }
    if let Some(t) = o.gap_tol {
        if !(t.is_finite() && t >= 0.0) {
            return Err(DrumError::new(
                "gap_tol",
                format!("must be a finite number >= 0, got {t}"),
            ));
        }
    }
    for (key, t) in [
        ("certified_gap_tol", o.certified_gap_tol),
        ("certified_rel_gap_tol", o.certified_rel_gap_tol),
    ] {
        if let Some(t) = t {
            if !(t > 0.0 && t.is_finite()) {
                return Err(DrumError::new(
                    key,
                    format!("must be a number > 0, got {t}"),
                ));
            }
        }
    }
    if !(o.balance_mu > 1.0 && o.balance_tau > 1.0) {
        return Err(DrumError::new(
            "balance",
            "residual balancing needs mu > 1 and tau > 1",
        ));
    }
    Ok(())
}

/// Dual decomposition baseline (validates).
pub fn solve_dual(p: &Problem, opt: &DualOptions) -> problem::Result<SolveResult> {
    p.validate()?;
    if !(opt.step > 0.0 && opt.step.is_finite()) {
        return Err(DrumError::new(
            "step",
            format!("subgradient step must be > 0, got {}", opt.step),
        ));
    }
    let lay = Layout::build(p);
    let r = dual_decomposition(p, &lay, opt);
    check_finite(p, &r)?;
    Ok(r)
}

/// Exact one-sided solve (validates).
pub fn solve_reference(p: &Problem) -> problem::Result<SolveResult> {
    p.validate()?;
    let r = solve_exact(p)?;
    check_finite(p, &r)?;
    Ok(r)
}

/// No solver returns a non-finite rate or objective as an answer: an instance the checks let
/// through but the arithmetic cannot carry is an error naming alpha (the exponent decides the
/// range of `x^(1−alpha)`), never NaN with `converged`.
pub fn check_finite(p: &Problem, r: &SolveResult) -> problem::Result<()> {
    let bad_x = r
        .x_feasible
        .iter()
        .chain(&r.z_feasible)
        .any(|v| !v.is_finite());
    if bad_x || !r.objective_feasible.is_finite() || r.dual_bound.is_some_and(|b| b.is_nan()) {
        return Err(DrumError::new(
            "alpha",
            format!(
                "the solve left double precision at alpha = {} (objective {}, non-finite rates: \
                 {bad_x}): use a smaller alpha or rates in units near the equal share",
                p.alpha, r.objective_feasible
            ),
        ));
    }
    Ok(())
}
