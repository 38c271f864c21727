//! Per-iteration time of the ADMM with and without the preemption (SOC) constraint.
//! `cargo run --release -p braid-drum --example soc_time -- [n] [m] [iters]`
use braid_drum::*;

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap())
        .collect();
    let (n, m, it) = (
        *a.first().unwrap_or(&10),
        *a.get(1).unwrap_or(&100),
        *a.get(2).unwrap_or(&200),
    );
    let base = generate(&GenParams {
        n,
        m,
        seed: 1,
        ..Default::default()
    });
    let mut soc = base.clone();
    soc.preempt = (0..soc.entries())
        .map(|k| if k % 2 == 0 { 0.3 } else { 0.0 })
        .collect();
    for (name, p) in [("plain", &base), ("preempt", &soc)] {
        let opt = AdmmOptions {
            stop: StopRule::None,
            max_iter: it,
            trace: false,
            dual_bound: false,
            ..Default::default()
        };
        let r = solve_admm(p, opt).unwrap();
        println!(
            "{name}: n={n} m={m} {} iterations, {:.3} ms per iteration",
            r.iterations,
            1e3 * r.solve_time / r.iterations as f64
        );
    }
}
