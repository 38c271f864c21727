//! What one round of the online solver costs on test case 3's shape (issue 31 §2): host 0 a
//! client of six servers over 300 two-sided connections (each with an outbound pair toward its
//! server's row and an inbound pair from its server's reply) beside 50 one-sided ones; each
//! server 50 two-sided connections back. `print_round_cost` prints wall time per host-round
//! (release: the `online.cpu` constants of the agent) and, run under callgrind, gives the
//! instruction counts:
//!
//! ```text
//! cargo test --release -p braid-drum --lib print_round_cost -- --ignored --nocapture
//! valgrind --tool=callgrind <the lib test binary> print_round_cost --ignored --exact ...
//! ```

use super::net::{NetConfig, TestNet};
use super::{Connection, Inbound, LocalInstance, OnlineConfig, Outbound};

/// Test case 3's instances: host 0 with `clients` two-sided connections spread over `servers`
/// hosts and `batch` one-sided ones; every server the other ends.
pub(crate) fn tc3_instances(clients: u32, servers: u32, batch: u32) -> Vec<LocalInstance> {
    let base = |conns, inbound| LocalInstance {
        alpha: 1.0,
        beta: 1e-3,
        q_cap: 20.0,
        c_cap: 20.0,
        conns,
        inbound,
        links: vec![],
    };
    let conn = |id, out| Connection {
        id,
        weight: 1.0,
        a: 1.0,
        demand: f64::INFINITY,
        out,
        links: vec![],
    };
    let server_of = |i: u32| 1 + i % servers;
    let mut h0 = Vec::new();
    let mut in0 = Vec::new();
    for i in 1..=clients {
        let s = server_of(i);
        h0.push(conn(
            i,
            vec![Outbound {
                host: s,
                conn: i,
                frac: 1.0,
            }],
        ));
        in0.push(Inbound {
            host: s,
            conn: i,
            row: i,
        });
    }
    for j in 0..batch {
        h0.push(conn(clients + 1 + j, vec![]));
    }
    let mut out = vec![base(h0, in0)];
    for s in 1..=servers {
        let mut cs = Vec::new();
        let mut ins = Vec::new();
        for i in (1..=clients).filter(|&i| server_of(i) == s) {
            cs.push(conn(
                i,
                vec![Outbound {
                    host: 0,
                    conn: i,
                    frac: 1.0,
                }],
            ));
            ins.push(Inbound {
                host: 0,
                conn: i,
                row: i,
            });
        }
        out.push(base(cs, ins));
    }
    out
}

/// Runs test case 3's instances to settling: (host-rounds, host 0's rounds, messages).
pub(crate) fn run_tc3(clients: u32) -> (u64, u64, u64) {
    let mut t = TestNet::new(
        tc3_instances(clients, 6, 50),
        OnlineConfig::default(),
        NetConfig::default(),
    )
    .expect("valid instances");
    let rep = t.run(50_000_000);
    assert!(rep.settled, "test case 3's instance settles");
    let rounds = t.hosts.iter().map(|h| h.stats().rounds).sum::<u64>();
    (rounds, t.hosts[0].stats().rounds, rep.messages)
}

#[test]
#[ignore]
fn print_round_cost() {
    for clients in [60u32, 300] {
        let mut best = f64::INFINITY;
        let mut r = (0, 0, 0);
        for _ in 0..5 {
            let t0 = std::time::Instant::now();
            r = run_tc3(clients);
            best = best.min(t0.elapsed().as_secs_f64() * 1e9);
        }
        println!(
            "tc3 {clients} clients: {} host-rounds ({} on host 0), {} messages: {:.0} ns per host-round, {:.1} ns per remote pair (host 0 has {} pairs of {} in all)",
            r.0,
            r.1,
            r.2,
            best / r.0 as f64,
            best / r.0 as f64 / (4.0 * clients as f64 / 7.0),
            2 * clients,
            4 * clients
        );
    }
}

#[test]
fn test_case_3s_instance_settles_and_every_host_runs_rounds() {
    let (all, h0, msgs) = run_tc3(60);
    assert!(h0 > 0 && all >= 7 * h0 / 2, "{all} {h0}");
    assert!(msgs > 0);
}

#[test]
fn with_a_round_gap_a_one_sided_host_runs_one_round_per_timeout() {
    use super::HostSolver;
    // A host without two-sided traffic runs its whole solve inside one timeout; with
    // `round_gap_ns` (the agent's round cost) one round per timeout, the next due that long
    // after, and the rates change round by round — to the same settled answer.
    let inst = tc3_instances(6, 1, 4).swap_remove(0);
    let one_sided = LocalInstance {
        conns: inst
            .conns
            .iter()
            .map(|c| Connection {
                out: vec![],
                ..c.clone()
            })
            .collect(),
        inbound: vec![],
        ..inst
    };
    let mut free = HostSolver::new(0, one_sided.clone(), OnlineConfig::default()).unwrap();
    free.handle_timeout(0);
    assert!(free.is_idle());
    let n = free.stats().rounds;
    assert!(n >= 2, "a solve of several rounds: {n}");
    let cfg = OnlineConfig {
        round_gap_ns: 700,
        ..OnlineConfig::default()
    };
    let mut paced = HostSolver::new(0, one_sided, cfg).unwrap();
    let mut now = 0;
    for k in 1..=n {
        paced.handle_timeout(now);
        assert_eq!(paced.stats().rounds, k, "one round at {now} ns");
        assert_eq!(
            paced.rates().unwrap().round,
            free.rates().unwrap().round - n + k
        );
        if k < n {
            assert_eq!(paced.poll_timeout(), Some(now + 700));
            // Early: nothing happens.
            paced.handle_timeout(now + 699);
            assert_eq!(paced.stats().rounds, k);
            now += 700;
        }
    }
    assert!(paced.is_idle());
    assert_eq!(paced.rates().unwrap().conns, free.rates().unwrap().conns);
}
