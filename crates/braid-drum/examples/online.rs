//! The online solver on the paper's instances over the in-process test network, against the
//! offline ADMM: `cargo run --release --example online -- n m one|two loss [seed]`
use braid_drum::online::build::{feasible_objective, instances};
use braid_drum::online::net::{NetConfig, TestNet};
use braid_drum::online::OnlineConfig;
use braid_drum::*;
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: usize = a.get(1).map(|s| s.parse().unwrap()).unwrap_or(64);
    let m: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(100);
    let two = a.get(3).map(|s| s == "two").unwrap_or(true);
    let loss: f64 = a.get(4).map(|s| s.parse().unwrap()).unwrap_or(0.0);
    let seed: u64 = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(1);
    let p = generate(&GenParams {
        n,
        m,
        two_sided: two,
        seed,
        ..Default::default()
    });
    let t = Instant::now();
    let off = if two {
        solve_admm(
            &p,
            AdmmOptions {
                eps_abs: 1e-9,
                eps_rel: 1e-9,
                max_iter: 20000,
                trace: false,
                ..Default::default()
            },
        )
        .unwrap()
    } else {
        solve_reference(&p).unwrap()
    };
    let cert = off
        .dual_bound
        .map(|b| (b - off.objective_feasible) / p.weight_sum());
    println!(
        "offline: {} iterations, {:.3} s, certified gap {cert:?}",
        off.iterations,
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let mut net = TestNet::new(
        instances(&p).unwrap(),
        OnlineConfig::default(),
        NetConfig {
            loss,
            seed,
            ..Default::default()
        },
    )
    .unwrap();
    let rep = net.run(u64::MAX);
    let wall = t.elapsed().as_secs_f64();
    let x = net.x().unwrap();
    let gap = (off.objective_feasible - feasible_objective(&p, &x)) / p.weight_sum();
    let nbrs: f64 = rep.messages as f64 / (rep.iterations.max(1) * n as u64) as f64;
    println!(
        "online: {} rounds, {} messages ({:.1} per host per round), {} bytes ({:.0} per host per round), {} lost, simulated {:.3} ms, wall {:.3} s, settled {}, gap {:.2e}",
        rep.iterations,
        rep.messages,
        nbrs,
        rep.bytes,
        rep.bytes as f64 / (rep.iterations.max(1) * n as u64) as f64,
        rep.lost,
        rep.time_ns as f64 * 1e-6,
        wall,
        rep.settled,
        gap
    );
}
