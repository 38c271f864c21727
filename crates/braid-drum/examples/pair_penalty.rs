//! Per-row against per-pair penalties on the two-sided instances of the spread (docs/drum.md,
//! "Per-pair penalties"): iterations to a certified 1e-4 gap (checked every 5) and the last
//! certified gap. `cargo run --release -p braid-drum --example pair_penalty -- [n] [m] [max_iter]`
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
        two_sided: true,
        ..Default::default()
    };
    let cases: Vec<(&str, GenParams)> = vec![
        ("fan-out 2", base.clone()),
        (
            "fan-out 8",
            GenParams {
                fanout: 8.min(n - 1),
                ..base.clone()
            },
        ),
        (
            "α = 5, C ~ U[2, 6]",
            GenParams {
                alpha: 5.0,
                c_range: (2.0, 6.0),
                ..base.clone()
            },
        ),
        (
            "α = 2, C ~ U[2, 6]",
            GenParams {
                alpha: 2.0,
                c_range: (2.0, 6.0),
                ..base.clone()
            },
        ),
        (
            "α = 20, C ~ U[2, 6]",
            GenParams {
                alpha: 20.0,
                c_range: (2.0, 6.0),
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
            "α = 5",
            GenParams {
                alpha: 5.0,
                ..base.clone()
            },
        ),
    ];
    println!("| two-sided instance (n = {n}, m = {m}) | per row: iterations, last gap | per pair: iterations, last gap |");
    println!("|---|---|---|");
    for (name, g) in cases {
        let p = generate(&g);
        let mut cols = Vec::new();
        for pair in [false, true] {
            let opt = AdmmOptions {
                certify_every: 5,
                stop: StopRule::None,
                max_iter,
                certified_gap_tol: Some(1e-4),
                trace: false,
                pair_penalty: pair,
                ..Default::default()
            };
            let r = solve_admm(&p, opt).unwrap();
            let last = r.trace.certified_gap.last().copied().unwrap_or(f64::NAN);
            let it = if r.converged {
                format!("{}", r.iterations)
            } else {
                format!("> {max_iter}")
            };
            cols.push(format!("{it}, {last:.2e}"));
        }
        println!("| {name} | {} | {} |", cols[0], cols[1]);
    }
}
