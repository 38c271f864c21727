//! Peak resident memory of one ADMM solve against the bytes of its state (`footprint::admm`),
//! for the memory goal of issue 31 §3 (5·10⁷ one-sided in ≤ 8 GB), measured at a scaled-down
//! size and extrapolated per variable (docs/drum.md, "Scale benchmark"). Linux (VmHWM).
//! `cargo run --release -p braid-drum --example peak_mem -- one|two n m [iterations]`
use braid_drum::*;
use std::sync::Arc;

fn vm_hwm() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb * 1024.0)
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let two = a[0] == "two";
    let (n, m): (usize, usize) = (a[1].parse().unwrap(), a[2].parse().unwrap());
    let iters: usize = a.get(3).map_or(5, |s| s.parse().unwrap());
    let p = Arc::new(generate(&GenParams {
        n,
        m,
        two_sided: two,
        seed: 7,
        ..Default::default()
    }));
    let lay = Arc::new(Layout::build(&p));
    let state = footprint::admm(&Admm::new(p.clone(), lay.clone(), AdmmOptions::default()));
    drop(lay);
    let before = vm_hwm();
    let opt = AdmmOptions {
        stop: StopRule::None,
        max_iter: iters,
        trace: false,
        dual_bound: false,
        ..Default::default()
    };
    let r = solve_admm_arc(p, opt).unwrap();
    let vars = (n * m) as f64;
    let goal = if two { 1e7 } else { 5e7 };
    let peak = vm_hwm();
    println!(
        "{} n={n} m={m}: state {:.3} GB ({:.0} B/var), peak RSS {:.3} GB ({:.0} B/var; {:.3} GB \
         before the solve), {} iterations; per variable at {goal:.0e}: state {:.2} GB, peak {:.2} GB",
        a[0],
        state as f64 / 1e9,
        state as f64 / vars,
        peak / 1e9,
        peak / vars,
        before / 1e9,
        r.iterations,
        state as f64 / vars * goal / 1e9,
        peak / vars * goal / 1e9,
    );
}
