//! Time of each ADMM step: `cargo run --release --example step_time -- n m one|two iters`
use braid_drum::*;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: usize = a.get(1).map(|s| s.parse().unwrap()).unwrap_or(1000);
    let m: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(500);
    let two = a.get(3).map(|s| s == "two").unwrap_or(false);
    let iters: usize = a.get(4).map(|s| s.parse().unwrap()).unwrap_or(20);
    let p = Arc::new(generate(&GenParams {
        n,
        m,
        two_sided: two,
        seed: 1,
        ..Default::default()
    }));
    let lay = Arc::new(Layout::build(&p));
    let mut st = Admm::new(p.clone(), lay, AdmmOptions::default());
    let mut t = [0.0f64; 4];
    for _ in 0..iters {
        let c = Instant::now();
        st.x_step(&[]);
        t[0] += c.elapsed().as_secs_f64();
        let c = Instant::now();
        st.gather_rows();
        t[1] += c.elapsed().as_secs_f64();
        let c = Instant::now();
        st.z_step();
        t[2] += c.elapsed().as_secs_f64();
        let c = Instant::now();
        let s = st.y_step();
        st.adapt(&s);
        t[3] += c.elapsed().as_secs_f64();
    }
    let nv = (n * m * iters) as f64;
    println!(
        "ns/var: x {:.1} gather {:.1} z {:.1} y {:.1}",
        t[0] * 1e9 / nv,
        t[1] * 1e9 / nv,
        t[2] * 1e9 / nv,
        t[3] * 1e9 / nv
    );
}
