//! The scale benchmark of issue 31 §3 (not a timed test): the ADMM's warm time per iteration
//! at a given size beside the memory-bandwidth bound of this machine.
//!
//! * **Bandwidth**: a STREAM-style triad `a = b + s·c` over three 128 MiB arrays on all rayon
//!   threads, best of 5 (bytes counted: 3 × 8 per element, no write-allocate).
//! * **Solver**: `Problem.random`'s instance (seed 7), warm time per iteration =
//!   (time of 1 + K iterations − time of 1) / K, `stop = none`, no trace, no dual bound, as the
//!   review measured it.
//! * **Bound**: the bytes of the solver's state (`footprint::admm`: problem, layout, scaled copy,
//!   iterates) over the triad's bandwidth, i.e. the time if every byte were read once per
//!   iteration. The passes read most arrays more than once, so this is a floor, not a target.
//!
//! Sizes: `DRUM_BENCH_SIZES="two:1000x1000,one:2000x2500"` (op:n×m, comma-separated; the
//! default), iterations `DRUM_BENCH_ITERS` (default 10). The goals are at 10⁷
//! two-sided (≤ 0.6 s per iteration) and 5·10⁷ one-sided (≤ 0.5 s, ≤ 8 GB); each line also
//! prints the per-variable time extrapolated linearly to those sizes.
use braid_drum::*;
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

fn triad_gbps() -> f64 {
    let n = 16 << 20; // 128 MiB per array
    let b = vec![1.0f64; n];
    let c = vec![2.0f64; n];
    let mut a = vec![0.0f64; n];
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        a.par_chunks_mut(1 << 16)
            .zip(b.par_chunks(1 << 16))
            .zip(c.par_chunks(1 << 16))
            .for_each(|((a, b), c)| {
                for i in 0..a.len() {
                    a[i] = b[i] + 3.0 * c[i];
                }
            });
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&a);
    (3 * 8 * n) as f64 / best / 1e9
}

fn run(p: &Arc<Problem>, iters: usize) -> f64 {
    let opt = AdmmOptions {
        stop: StopRule::None,
        max_iter: iters,
        trace: false,
        dual_bound: false,
        ..Default::default()
    };
    solve_admm_arc(p.clone(), opt).unwrap().solve_time
}

fn main() {
    let sizes =
        std::env::var("DRUM_BENCH_SIZES").unwrap_or_else(|_| "two:1000x1000,one:2000x2500".into());
    let iters: usize = std::env::var("DRUM_BENCH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let bw = triad_gbps();
    println!(
        "triad bandwidth: {bw:.1} GB/s on {} threads",
        rayon::current_num_threads()
    );
    for spec in sizes.split(',') {
        let (op, nm) = spec.split_once(':').expect("op:NxM");
        let (n, m) = nm.split_once('x').expect("NxM");
        let (n, m): (usize, usize) = (n.parse().unwrap(), m.parse().unwrap());
        let p = Arc::new(generate(&GenParams {
            n,
            m,
            two_sided: op == "two",
            seed: 7,
            ..Default::default()
        }));
        let lay = Arc::new(Layout::build(&p));
        let bytes = footprint::admm(&Admm::new(p.clone(), lay, AdmmOptions::default()));
        let t1 = run(&p, 1);
        let tk = run(&p, 1 + iters);
        let warm = (tk - t1) / iters as f64;
        let vars = (n * m) as f64;
        let floor = bytes as f64 / (bw * 1e9);
        let goal_vars = if op == "two" { 1e7 } else { 5e7 };
        println!(
            "{op}-sided n={n} m={m} ({vars:.1e} variables): warm {:.3} s/iteration ({:.0} ns/var), \
             state {:.2} GB, bandwidth floor {:.3} s ({:.1}x above it); linear at {goal_vars:.0e}: \
             {:.2} s/iteration, {:.1} GB",
            warm,
            warm / vars * 1e9,
            bytes as f64 / 1e9,
            floor,
            warm / floor,
            warm / vars * goal_vars,
            bytes as f64 / vars * goal_vars / 1e9,
        );
    }
}
