//! Iterations to a certified 1e-4 gap on the paper's generator (`Problem.random`):
//! `cargo run --release -p braid-drum --example cert_iters -- n m one|two alpha seed [norows|pair]`
//! (`norows`: `row_scaling = false`; `pair`: `pair_penalty = true`)
use braid_drum::*;
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = a[0].parse().unwrap();
    let m: usize = a[1].parse().unwrap();
    let two = a[2] == "two";
    let alpha: f64 = a[3].parse().unwrap();
    let seed: u64 = a.get(4).map(|s| s.parse().unwrap()).unwrap_or(1);
    let p = generate(&GenParams {
        n,
        m,
        two_sided: two,
        alpha,
        seed,
        ..Default::default()
    });
    let opt = AdmmOptions {
        certify_every: 5,
        stop: StopRule::None,
        max_iter: 2000,
        certified_gap_tol: Some(1e-4),
        trace: false,
        row_scaling: a.get(5).map(|s| s != "norows").unwrap_or(true),
        pair_penalty: a.get(5).is_some_and(|s| s == "pair"),
        ..Default::default()
    };
    let r = solve_admm(&p, opt).unwrap();
    println!(
        "n={n} m={m} {} alpha={alpha} seed={seed}: certified 1e-4 at {} (converged {}), {:.2} s",
        a[2], r.iterations, r.converged, r.solve_time
    );
}
