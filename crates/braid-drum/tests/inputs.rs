//! No silent NaN or infinity (issue 31, §1): every numeric input the solvers take either gives
//! a finite answer or an error naming its key.

use braid_drum::*;

fn gen(alpha: f64, units: f64) -> Problem {
    generate(&GenParams {
        n: 4,
        m: 3,
        alpha,
        units,
        seed: 1,
        ..Default::default()
    })
}

fn finite(r: &SolveResult) {
    assert!(
        r.x_feasible.iter().all(|v| v.is_finite()),
        "{:?}",
        r.x_feasible
    );
    assert!(r.objective_feasible.is_finite(), "{}", r.objective_feasible);
}

#[test]
fn alpha_beyond_the_representable_range_is_an_error_naming_alpha() {
    // the review: 1e300 gave NaN with "converged", 400 and 1000 NaN from the exact solver
    for alpha in [1e300, 1000.0, 400.0, 100.5] {
        let p = gen(alpha, 1.0);
        let e = solve_reference(&p).unwrap_err();
        assert_eq!(e.param, "alpha", "{e:?}");
        let e = solve_admm(&p, AdmmOptions::default()).unwrap_err();
        assert_eq!(e.param, "alpha", "{e:?}");
        let e = solve_dual(&p, &DualOptions::default()).unwrap_err();
        assert_eq!(e.param, "alpha", "{e:?}");
    }
    // up to the limit, finite answers from every method
    for alpha in [0.5, 20.0, 100.0] {
        let p = gen(alpha, 1.0);
        finite(&solve_reference(&p).unwrap());
        finite(&solve_admm(&p, AdmmOptions::default()).unwrap());
        finite(
            &solve_dual(
                &p,
                &DualOptions {
                    max_iter: 20,
                    ..Default::default()
                },
            )
            .unwrap(),
        );
    }
}

#[test]
fn units_that_leave_double_precision_are_an_error_naming_the_key() {
    // α = 50 in ops/s: sx^(1-α) ~ 1e-330 underflows (the agent's starving case)
    let e = solve_reference(&gen(50.0, 1e6)).unwrap_err();
    assert_eq!(e.param, "alpha", "{e:?}");
    // capacities of 1e-300: β/z² overflows (the review: −inf with "converged")
    let mut p = gen(1.0, 1.0);
    p.q_cap = vec![1e-300; 4];
    p.c_cap = vec![1e-300; 4];
    for e in [
        solve_reference(&p).unwrap_err(),
        solve_admm(&p, AdmmOptions::default()).unwrap_err(),
    ] {
        assert_eq!(e.param, "Q", "{e:?}");
    }
    // without the CQ utility the same capacities solve, finitely
    p.beta = 0.0;
    finite(&solve_reference(&p).unwrap());
    finite(&solve_admm(&p, AdmmOptions::default()).unwrap());
}

#[test]
fn non_finite_options_name_their_key() {
    let p = gen(1.0, 1.0);
    let cases: Vec<(&str, AdmmOptions)> = vec![
        (
            "eps_abs",
            AdmmOptions {
                eps_abs: f64::NAN,
                ..Default::default()
            },
        ),
        (
            "eps_rel",
            AdmmOptions {
                eps_rel: f64::INFINITY,
                ..Default::default()
            },
        ),
        (
            "eps_abs",
            AdmmOptions {
                eps_abs: -1.0,
                ..Default::default()
            },
        ),
        (
            "reference",
            AdmmOptions {
                reference: Some(f64::NAN),
                ..Default::default()
            },
        ),
        (
            "gap_tol",
            AdmmOptions {
                gap_tol: Some(f64::NAN),
                ..Default::default()
            },
        ),
    ];
    for (key, o) in cases {
        let e = solve_admm(&p, o).unwrap_err();
        assert_eq!(e.param, key, "{e:?}");
    }
}

/// Within the α limit an instance can still leave double precision (a host whose share is 10⁻⁵
/// of the mean at α = 100: `x^(−99)` overflows); the answer is then an error naming alpha,
/// never a NaN or −∞ with "converged".
#[test]
fn a_valid_alpha_whose_utility_overflows_is_an_error_not_a_nan() {
    let mut p = gen(100.0, 1.0);
    p.q_cap[0] = 1e-3;
    p.c_cap[0] = 1e-3;
    for r in [
        solve_reference(&p),
        solve_admm(
            &p,
            AdmmOptions {
                max_iter: 200,
                ..Default::default()
            },
        ),
    ] {
        match r {
            Ok(r) => finite(&r),
            Err(e) => assert_eq!(e.param, "alpha", "{e:?}"),
        }
    }
}
