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
