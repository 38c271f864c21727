//! Time of each ADMM step:
//! `cargo run --release --example step_time -- n m one|two iters [generic]`
//! Two-sided instances take the tiled passes of `run` (`braid_drum::tiles`) unless `generic`
//! is given (the host-major passes with the row-major gather, as the sharded solve runs them).
use braid_drum::*;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: usize = a.get(1).map(|s| s.parse().unwrap()).unwrap_or(1000);
    let m: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(500);
    let two = a.get(3).map(|s| s == "two").unwrap_or(false);
    let iters: usize = a.get(4).map(|s| s.parse().unwrap()).unwrap_or(20);
    let generic = a.get(5).map(|s| s == "generic").unwrap_or(false);
    let p = Arc::new(generate(&GenParams {
        n,
        m,
        two_sided: two,
        seed: 1,
        ..Default::default()
    }));
    let lay = Arc::new(Layout::build(&p));
    let tiled = lay.app_tiled && !generic;
    let mut st = Admm::new(p.clone(), lay, AdmmOptions::default());
    let mut t = [0.0f64; 4];
    for _ in 0..iters {
        let c = Instant::now();
        if tiled {
            st.x_step_tiled(&[]);
        } else {
            st.x_step(&[]);
        }
        t[0] += c.elapsed().as_secs_f64();
        let c = Instant::now();
        if tiled {
            st.rows_tiled();
        } else {
            st.gather_rows();
        }
        t[1] += c.elapsed().as_secs_f64();
        let c = Instant::now();
        st.z_step();
        t[2] += c.elapsed().as_secs_f64();
        let c = Instant::now();
        let s = if tiled {
            st.y_step_tiled()
        } else {
            st.y_step()
        };
        st.adapt(&s);
        t[3] += c.elapsed().as_secs_f64();
    }
    let nv = (n * m * iters) as f64;
    println!(
        "{} ns/var: x {:.1} gather {:.1} z {:.1} y {:.1} total {:.1}",
        if tiled { "tiled" } else { "generic" },
        t[0] * 1e9 / nv,
        t[1] * 1e9 / nv,
        t[2] * 1e9 / nv,
        t[3] * 1e9 / nv,
        t.iter().sum::<f64>() * 1e9 / nv
    );
}
