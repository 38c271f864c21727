//! Iterations to a certified 1e-4 gap over α ∈ {0.5, 1, 2, 5, 10, 20, 50, 100} on a spread of
//! instances (docs/drum.md, "Large α"), seeds 1..=S: the normalized gap `(UB − f(x̃))/Σw`
//! (`certified_gap_tol`, the only stop on main) and the relative one `(UB − f(x̃))/|f(x̃)|`
//! (`certified_rel_gap_tol`), per-row penalties (default) and, two-sided, per-pair ones.
//! Prints one line per (instance, α, seed, variant): iterations (or "-" past max_iter).
//! `cargo run --release -p braid-drum --example alpha_sweep -- [n] [m] [max_iter] [seeds]`
use braid_drum::*;

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap())
        .collect();
    let (n, m, max_iter, seeds) = (
        *a.first().unwrap_or(&50),
        *a.get(1).unwrap_or(&20),
        *a.get(2).unwrap_or(&1000),
        *a.get(3).unwrap_or(&3) as u64,
    );
    let cases: Vec<(&str, GenParams)> = vec![
        ("one-sided generator", GenParams::default()),
        (
            "one-sided, C ~ U[2, 6] (binds)",
            GenParams {
                c_range: (2.0, 6.0),
                ..Default::default()
            },
        ),
        (
            "two-sided generator (fan-out 2)",
            GenParams {
                two_sided: true,
                ..Default::default()
            },
        ),
        (
            "two-sided, fan-out 8",
            GenParams {
                two_sided: true,
                fanout: 8,
                ..Default::default()
            },
        ),
        (
            "two-sided, C ~ U[2, 6] (binds)",
            GenParams {
                two_sided: true,
                c_range: (2.0, 6.0),
                ..Default::default()
            },
        ),
    ];
    // exploration knobs: DRUM_SWEEP_CASE (substring of the instance name), DRUM_SWEEP_ALPHAS
    // (comma-separated), DRUM_SWEEP_MU / DRUM_SWEEP_RELAX (residual balancing's μ, relaxation)
    let env = |k: &str| std::env::var(k).ok();
    let only = env("DRUM_SWEEP_CASE");
    let alphas: Vec<f64> = env("DRUM_SWEEP_ALPHAS")
        .map(|s| s.split(',').map(|a| a.parse().unwrap()).collect())
        .unwrap_or_else(|| vec![0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
    let d = AdmmOptions::default();
    let mu: f64 = env("DRUM_SWEEP_MU").map_or(d.balance_mu, |s| s.parse().unwrap());
    let relax: f64 = env("DRUM_SWEEP_RELAX").map_or(d.relax, |s| s.parse().unwrap());
    for (name, g0) in cases {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        for &alpha in &alphas {
            for seed in 1..=seeds {
                let g = GenParams {
                    n,
                    m,
                    alpha,
                    seed,
                    ..g0.clone()
                };
                let p = generate(&g);
                let mut variants = vec![("abs", false, false), ("rel", true, false)];
                if p.two_sided {
                    variants.push(("rel-pair", true, true));
                }
                for (tag, rel, pair) in variants {
                    let opt = AdmmOptions {
                        certify_every: 5,
                        stop: StopRule::None,
                        max_iter,
                        certified_gap_tol: (!rel).then_some(1e-4),
                        certified_rel_gap_tol: rel.then_some(1e-4),
                        trace: false,
                        pair_penalty: pair,
                        balance_mu: mu,
                        relax,
                        ..Default::default()
                    };
                    let r = match solve_admm(&p, opt) {
                        Ok(r) => r,
                        Err(e) => {
                            println!("{name}\t{alpha}\t{seed}\t{tag}\terr {e}");
                            continue;
                        }
                    };
                    let it = if r.converged {
                        r.iterations.to_string()
                    } else {
                        "-".into()
                    };
                    let last_abs = r.trace.certified_gap.last().copied().unwrap_or(f64::NAN);
                    let last_rel = r
                        .trace
                        .certified_rel_gap
                        .last()
                        .copied()
                        .unwrap_or(f64::NAN);
                    println!(
                        "{name}\t{alpha}\t{seed}\t{tag}\t{it}\t{last_abs:.2e}\t{last_rel:.2e}\t{:.2}",
                        r.solve_time
                    );
                }
            }
        }
    }
}
