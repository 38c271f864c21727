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
    let mut b = Admm::new(p.clone(), lay.clone(), o.clone());
    let mut c = Admm::new(p.clone(), lay, o);
    for k in 1..=15 {
        // every third iteration a few hosts lose their x-update
        let lost: Vec<bool> = if k % 3 == 0 {
            (0..p.n).map(|i| i % 7 == k % 7).collect()
        } else {
            Vec::new()
        };
        a.x_step_fused(&lost);
        let sa = a.zy_step_diag();
        b.x_step(&lost);
        b.gather_rows();
        b.z_step();
        let sb = b.y_step();
        // the whole iteration in one pass per host
        let sc = c.step_diag(&lost);
        for (name, s) in [("x", &a.x), ("z", &a.z), ("v", &a.v), ("y", &a.y)] {
            let (sb_, sc_) = match name {
                "x" => (&b.x, &c.x),
                "z" => (&b.z, &c.z),
                "v" => (&b.v, &c.v),
                _ => (&b.y, &c.y),
            };
            assert_eq!(s, sb_, "{name}, iteration {k}: fused vs separate");
            assert_eq!(
                s, sc_,
                "{name}, iteration {k}: one pass per host vs separate"
            );
        }
        assert_eq!(a.lam, c.lam, "lambda, iteration {k}");
        assert_eq!(a.mu, c.mu, "mu, iteration {k}");
        // the residual sums agree up to the order of addition
        for (x, y, z) in [
            (sa.r2, sb.r2, sc.r2),
            (sa.s2, sb.s2, sc.s2),
            (sa.atv2, sb.atv2, sc.atv2),
        ] {
            assert!((x - z).abs() <= 1e-12 * x.abs().max(1e-300), "{x} vs {z}");
            assert!((y - z).abs() <= 1e-12 * y.abs().max(1e-300), "{y} vs {z}");
        }
    }
}

/// Two-sided feasible recovery: each host over its CQE capacity pulls in only its own entries
/// (`admm::own_theta`). The point is feasible (Q, C, the guarantees), and on unconverged
/// iterates it is no worse than one global theta, usually far better.
#[test]
fn two_sided_recovery_per_host_is_feasible_and_beats_the_global_theta() {
    use braid_drum::admm::{recover, recover_apply, recover_theta};
    use std::sync::Arc;
    let p = Arc::new(generate(&gp(40, 300, true, 1.0, 5)));
    let lay = Arc::new(Layout::build(&p));
    let mut better = 0;
    for iters in [5, 20, 60] {
        let o = AdmmOptions {
            stop: StopRule::None,
            max_iter: iters,
            trace: false,
            dual_bound: false,
            ..Default::default()
        };
        let st = {
            let mut st = Admm::new(p.clone(), lay.clone(), o);
            for _ in 0..iters {
                st.x_step(&[]);
                st.gather_rows();
                st.z_step();
                let s = st.y_step();
                st.adapt(&s);
            }
            st
        };
        let sc = &st.sc;
        let (xf, zf) = recover(sc, &lay, &st.x);
        let m = p.m;
        for i in 0..p.n {
            let (xs, zs) = (&xf[i * m..(i + 1) * m], &zf[i * m..(i + 1) * m]);
            let qx: f64 = xs.iter().sum();
            let cz: f64 = zs.iter().sum();
            assert!(
                qx <= sc.q[i] * (1.0 + 1e-6),
                "{iters} iterations, host {i}: Q {qx} > {}",
                sc.q[i]
            );
            assert!(
                cz <= sc.c[i] * (1.0 + 1e-12),
                "{iters} iterations, host {i}: C {cz} > {}",
                sc.c[i]
            );
        }
        assert!(xf.iter().zip(&sc.lo).all(|(x, l)| x >= l));
        // the global theta of the same iterate
        let pg = lay.row_sums(&sc.lo);
        let px = lay.row_sums(&st.x);
        let (_, global) = recover_theta(sc, &pg, &px);
        let xg = recover_apply(sc, None, global, &st.x);
        let zg = lay.row_sums(&xg);
        let (f_host, f_glob) = (sc.objective(&xf, &zf), sc.objective(&xg, &zg));
        assert!(
            f_host >= f_glob - 1e-12 * f_glob.abs(),
            "{iters}: {f_host} < {f_glob}"
        );
        if global < 1.0 && f_host > f_glob + 1e-9 * f_glob.abs() {
            better += 1;
        }
    }
    assert!(
        better >= 2,
        "per-host recovery better than global in only {better} of 3"
    );
}

/// `certified_gap_tol` stops at the first check whose certified gap (the duality gap of the
/// feasible recovery, no f* needed) is below the tolerance, and that gap bounds the true one.
#[test]
fn certified_gap_stop_bounds_the_true_gap() {
    let p = generate(&gp(20, 12, true, 1.0, 9));
    // a tight run: its dual bound is an upper bound on f*, its feasible objective a lower one
    let tight = solve_admm(
        &p,
        AdmmOptions {
            eps_abs: 1e-10,
            eps_rel: 1e-10,
            max_iter: 50000,
            trace: false,
            ..Default::default()
        },
    )
    .unwrap();
    let (lo, hi) = (tight.objective_feasible, tight.dual_bound.unwrap());
    assert!(
        norm_gap(&p, hi, lo) < 1e-7,
        "reference not tight: {}",
        norm_gap(&p, hi, lo)
    );
    let r = solve_admm(
        &p,
        AdmmOptions {
            stop: StopRule::None,
            max_iter: 5000,
            trace: false,
            certified_gap_tol: Some(1e-4),
            certify_every: 5,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(r.converged);
    let tr = &r.trace;
    assert_eq!(tr.certified_iter.len(), tr.certified_gap.len());
    assert_eq!(*tr.certified_iter.last().unwrap() as usize, r.iterations);
    assert!(r.iterations.is_multiple_of(5));
    let last = *tr.certified_gap.last().unwrap();
    assert!(last <= 1e-4, "{last}");
    // the checks before did not meet the tolerance
    assert!(tr.certified_gap[..tr.certified_gap.len() - 1]
        .iter()
        .all(|&g| g > 1e-4));
    // the result's own duality gap is the last check's
    let dg = norm_gap(&p, r.dual_bound.unwrap(), r.objective_feasible);
    assert!(
        (dg - last).abs() <= 1e-9 * (1.0 + last.abs()),
        "{dg} vs {last}"
    );
    // and it bounds the true gap from above, which is >= 0
    let true_gap = norm_gap(&p, hi, r.objective_feasible);
    assert!(
        true_gap <= last + 1e-9,
        "true {true_gap} > certified {last}"
    );
    assert!(norm_gap(&p, lo, r.objective_feasible) >= -1e-7);
}

/// Two-sided, the automatic penalty includes the CQ utility's curvature (`admm::curvature`):
/// where that side is the stiffer one (many applications per host, small per-application
/// rates), it takes far fewer iterations than the utility's curvature alone (the old start,
/// 20.7 on this instance in scaled units).
#[test]
fn two_sided_penalty_sees_the_cq_curvature() {
    let p = generate(&gp(10, 2000, true, 1.0, 3));
    let run = |rho: f64| {
        solve_admm(
            &p,
            AdmmOptions {
                rho,
                stop: StopRule::None,
                max_iter: 3000,
                trace: false,
                certified_gap_tol: Some(1e-3),
                certify_every: 5,
                ..Default::default()
            },
        )
        .unwrap()
    };
    let new = run(0.0);
    let old = run(20.7);
    assert!(new.converged && old.converged);
    assert!(new.trace.rho[0] > 5.0 * 20.7, "rho0 {}", new.trace.rho[0]);
    assert!(
        (new.iterations as f64) * 1.5 <= old.iterations as f64,
        "{} vs {} iterations",
        new.iterations,
        old.iterations
    );
}
