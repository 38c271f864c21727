//! Time per ADMM iteration: `cargo run --release --example iter_time -- n m one|two iters`
use braid_drum::*;
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: usize = a.get(1).map(|s| s.parse().unwrap()).unwrap_or(1000);
    let m: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(500);
    let two = a.get(3).map(|s| s == "two").unwrap_or(false);
    let iters: usize = a.get(4).map(|s| s.parse().unwrap()).unwrap_or(20);
    let t = Instant::now();
    let p = generate(&GenParams {
        n,
        m,
        two_sided: two,
        seed: 1,
        ..Default::default()
    });
    println!("generate {:.3}s", t.elapsed().as_secs_f64());
    let o = AdmmOptions {
        stop: StopRule::None,
        max_iter: iters,
        trace: false,
        dual_bound: false,
        ..Default::default()
    };
    let r = solve_admm(&p, o).unwrap();
    let per = r.solve_time / r.iterations as f64;
    println!(
        "setup {:.3}s, {:.1} ms/iter, {:.1} ns/var/iter",
        r.setup_time,
        per * 1e3,
        per * 1e9 / (n * m) as f64
    );
}
