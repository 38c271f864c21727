//! Iterations to a 1e-4 gap on a spread of instances (docs/drum.md, "Convergence on a spread of
//! instances"): the generator's and harder ones (large α, wide weights, binding CQE capacities,
//! strong CQ utility, large batches, two-sided with wide fan-out, top-k).
//! `cargo run --release -p braid-drum --example spread -- [n] [m] [max_iter]`
use braid_drum::*;

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap())
        .collect();
    let (n, m, max_iter) = (
        *a.first().unwrap_or(&50),
        *a.get(1).unwrap_or(&20),
        *a.get(2).unwrap_or(&3000),
    );
    let base = GenParams {
        n,
        m,
        seed: 5,
        ..Default::default()
    };
    let cases: Vec<(&str, GenParams)> = vec![
        ("generator, α = 1", base.clone()),
        (
            "α = 0.5",
            GenParams {
                alpha: 0.5,
                ..base.clone()
            },
        ),
        (
            "α = 2",
            GenParams {
                alpha: 2.0,
                ..base.clone()
            },
        ),
        (
            "α = 5",
            GenParams {
                alpha: 5.0,
                ..base.clone()
            },
        ),
        (
            "α = 20",
            GenParams {
                alpha: 20.0,
                ..base.clone()
            },
        ),
        (
            "α = 100",
            GenParams {
                alpha: 100.0,
                ..base.clone()
            },
        ),
        (
            "weights 0.01–100",
            GenParams {
                w_range: (0.01, 100.0),
                ..base.clone()
            },
        ),
        (
            "CQE binds: C ~ U[2, 6]",
            GenParams {
                c_range: (2.0, 6.0),
                ..base.clone()
            },
        ),
        (
            "β = 0.1",
            GenParams {
                beta: 0.1,
                ..base.clone()
            },
        ),
        (
            "β = 10, C ~ U[2, 6]",
            GenParams {
                beta: 10.0,
                c_range: (2.0, 6.0),
                ..base.clone()
            },
        ),
        (
            "batch ≤ 64",
            GenParams {
                batch_max: 64,
                ..base.clone()
            },
        ),
        (
            "top-k, k = m/4",
            GenParams {
                k: Some((m / 4).max(1)),
                ..base.clone()
            },
        ),
        (
            "two-sided, fan-out 2",
            GenParams {
                two_sided: true,
                ..base.clone()
            },
        ),
        (
            "two-sided, fan-out 8",
            GenParams {
                two_sided: true,
                fanout: 8.min(n - 1),
                ..base.clone()
            },
        ),
        (
            "two-sided, α = 5, C ~ U[2, 6]",
            GenParams {
                two_sided: true,
                alpha: 5.0,
                c_range: (2.0, 6.0),
                ..base.clone()
            },
        ),
        (
            "two-sided, weights 0.01–100",
            GenParams {
                two_sided: true,
                w_range: (0.01, 100.0),
                ..base.clone()
            },
        ),
    ];
    println!("| instance (n = {n}, m = {m}) | iterations to a true gap 1e-4 | to a certified gap 1e-4 | Boyd 1e-6 stop |");
    println!("|---|---|---|---|");
    for (name, g) in cases {
        let p = generate(&g);
        let fstar = if p.two_sided {
            None
        } else {
            Some(solve_reference(&p).unwrap().objective)
        };
        let opt = AdmmOptions {
            certify_every: 5,
            stop: StopRule::None,
            max_iter,
            reference: fstar,
            certified_gap_tol: Some(1e-4),
            ..Default::default()
        };
        let r = solve_admm(&p, opt).unwrap();
        let true_it = r
            .trace
            .gap
            .iter()
            .position(|&g| g <= 1e-4)
            .map(|i| (i + 1).to_string());
        let cert = if r.converged {
            r.iterations.to_string()
        } else {
            format!("> {max_iter}")
        };
        let b = solve_admm(
            &p,
            AdmmOptions {
                max_iter,
                trace: false,
                dual_bound: false,
                ..Default::default()
            },
        )
        .unwrap();
        let boyd = if b.converged {
            b.iterations.to_string()
        } else {
            format!("> {max_iter}")
        };
        println!(
            "| {name} | {} | {cert} | {boyd} |",
            true_it.unwrap_or_else(|| if p.two_sided {
                "–".into()
            } else {
                "(not within the certified run)".into()
            })
        );
    }
}
