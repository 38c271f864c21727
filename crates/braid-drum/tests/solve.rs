use braid_drum::*;

fn gp(n: usize, m: usize, two: bool, alpha: f64, seed: u64) -> GenParams {
    GenParams {
        n,
        m,
        two_sided: two,
        alpha,
        seed,
        ..Default::default()
    }
}

fn norm_gap(p: &Problem, fs: f64, f: f64) -> f64 {
    (fs - f) / p.weight_sum()
}

#[test]
fn admm1_matches_exact() {
    for &alpha in &[0.5, 1.0, 2.0, 4.0] {
        let p = generate(&gp(20, 10, false, alpha, 7));
        let ex = solve_reference(&p).unwrap();
        // exact: feasible and dual gap ~ 0
        let dg = norm_gap(&p, ex.dual_bound.unwrap(), ex.objective);
        assert!(dg.abs() < 1e-9, "alpha {alpha}: exact duality gap {dg}");
        let opt = AdmmOptions {
            eps_abs: 1e-9,
            eps_rel: 1e-9,
            max_iter: 20000,
            ..Default::default()
        };
        let r = solve_admm(&p, opt).unwrap();
        let g = norm_gap(&p, ex.objective, r.objective_feasible);
        println!(
            "alpha {alpha}: iters {} gap {g:e} converged {}",
            r.iterations, r.converged
        );
        assert!(g < 1e-6 && g > -1e-9, "alpha {alpha}: gap {g}");
        let ub = norm_gap(&p, r.dual_bound.unwrap(), r.objective_feasible);
        assert!(ub > -1e-9 && ub < 1e-5, "alpha {alpha}: dual gap {ub}");
    }
}

#[test]
fn admm2_converges_and_bounds() {
    for &alpha in &[0.5, 1.0, 2.0, 4.0] {
        let p = generate(&gp(20, 10, true, alpha, 11));
        let opt = AdmmOptions {
            eps_abs: 1e-9,
            eps_rel: 1e-9,
            max_iter: 20000,
            ..Default::default()
        };
        let r = solve_admm(&p, opt).unwrap();
        let ub = norm_gap(&p, r.dual_bound.unwrap(), r.objective_feasible);
        println!(
            "alpha {alpha}: iters {} dual gap {ub:e} converged {}",
            r.iterations, r.converged
        );
        assert!(r.converged);
        assert!(ub > -1e-9 && ub < 1e-5, "alpha {alpha}: dual gap {ub}");
    }
}

#[test]
fn deterministic() {
    let p1 = generate(&gp(30, 8, true, 1.0, 3));
    let p2 = generate(&gp(30, 8, true, 1.0, 3));
    assert_eq!(p1.w, p2.w);
    let o = AdmmOptions {
        loss_prob: 0.1,
        loss_seed: 5,
        ..Default::default()
    };
    let r1 = solve_admm(&p1, o.clone()).unwrap();
    let r2 = solve_admm(&p2, o).unwrap();
    assert_eq!(r1.x, r2.x);
    assert_eq!(r1.iterations, r2.iterations);
}

/// One-sided, the fused iteration of `run` (the x-step leaves h to the fused z/dual/y pass,
/// which recomputes it) gives the step-by-step API's iterates bit for bit.
#[test]
fn fused_one_sided_steps_equal_the_separate_steps() {
    use std::sync::Arc;
    let p = Arc::new(generate(&GenParams {
        n: 30,
        m: 9,
        k: Some(6),
        seed: 11,
        ..Default::default()
    }));
    let lay = Arc::new(Layout::build(&p));
    let o = AdmmOptions {
        adaptive: false,
        ..Default::default()
    };
    let mut a = Admm::new(p.clone(), lay.clone(), o.clone());
    let mut b = Admm::new(p, lay, o);
    for k in 1..=15 {
        a.x_step_fused(&[]);
        a.zy_step_diag();
        b.x_step(&[]);
        b.gather_rows();
        b.z_step();
        b.y_step();
        assert_eq!(a.x, b.x, "x, iteration {k}");
        assert_eq!(a.z, b.z, "z, iteration {k}");
        assert_eq!(a.v, b.v, "v, iteration {k}");
        assert_eq!(a.y, b.y, "y, iteration {k}");
    }
}
