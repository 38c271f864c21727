//! Runs scenarios and prints events/s: the Rust side of `braid bench`, for profiling without
//! Python. `simbench FILE.json [FILE.json ...]` runs scenario files (JSON, as the front end hands
//! them to the core); `simbench --a2a N [SIZE]` runs an all-to-all of SIZE-byte flows (default
//! 1KB) among N hosts on one switch (100G links, 1 us, DCQCN). `--repeat R` runs each R times and
//! reports the median wall time. `SIMBENCH_RSS=1` prints the resident memory (now and peak, from
//! /proc/self/status) after the build, the run and the results, to tell which stage holds it.
//! `SIMBENCH_EAGER=1` creates every traffic flow's QP when its sender starts (as before lazy flow
//! generation, `braid_sim::lazy_flows`), for comparing memory; results are the same.

use braid_sim::Simulation;
use std::path::Path;

fn a2a(n: u32, size: &str) -> String {
    let links: Vec<String> = (1..=n)
        .map(|h| format!(r#"{{"a":{h},"b":0,"rate":"100Gbps","delay":"1us"}}"#))
        .collect();
    format!(
        r#"{{"duration":"1s","topology":{{"kind":"edges","nodes":{},"switches":[0],"links":[{}]}},
        "traffic":[{{"pattern":"all-to-all","size":"{size}"}}],
        "measure":{{"interval":"0us","messages":false}}}}"#,
        n + 1,
        links.join(",")
    )
}

fn main() {
    if std::env::var_os("SIMBENCH_SIZES").is_some() {
        sizes();
    }
    if std::env::var_os("SIMBENCH_EAGER").is_some() {
        braid_sim::lazy_flows::set_eager(true);
    }
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut repeat = 1;
    if let Some(i) = args.iter().position(|a| a == "--repeat") {
        repeat = args[i + 1].parse().expect("--repeat N");
        args.drain(i..i + 2);
    }
    let mut jobs: Vec<(String, String)> = Vec::new();
    if args.first().map(|s| s.as_str()) == Some("--a2a") {
        let n: u32 = args[1].parse().expect("--a2a N");
        let size = args.get(2).cloned().unwrap_or_else(|| "1KB".into());
        jobs.push((format!("a2a-{n}-{size}"), a2a(n, &size)));
    } else {
        for f in &args {
            jobs.push((
                f.clone(),
                std::fs::read_to_string(f).expect("read scenario"),
            ));
        }
    }
    for (name, json) in jobs {
        let mut walls = Vec::new();
        let mut line = String::new();
        for _ in 0..repeat {
            let t0 = std::time::Instant::now();
            let mut sim = Simulation::from_json(&json, Path::new("."), None)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let built = t0.elapsed().as_secs_f64();
            rss("built");
            sim.run();
            rss("ran");
            let wall = t0.elapsed().as_secs_f64();
            let ev = sim.events();
            let r = sim.results();
            rss("results");
            walls.push(wall);
            // A digest of every flow's completion time: equal digests = identical results.
            let mut digest: u64 = 0xcbf29ce484222325;
            if let Some(braid_sim::Column::U64(v)) = r.tables["flows"].get("fct_ps") {
                for x in v {
                    digest = (digest ^ x).wrapping_mul(0x100000001b3);
                }
            }
            if let Some(braid_sim::Column::I64(v)) = r.tables["flows"].get("fct_ps") {
                for x in v {
                    digest = (digest ^ *x as u64).wrapping_mul(0x100000001b3);
                }
            }
            line = format!(
                "{name}: digest {digest:016x}, {ev} events, build {built:.2} s, run {:.2} s, {:.3} Mev/s (run only), flows {}/{}, sim {} ps",
                wall - built,
                ev as f64 / (wall - built) / 1e6,
                r.headline.get("flows_completed").copied().unwrap_or(0.0),
                r.headline.get("flows").copied().unwrap_or(0.0),
                sim.now_ps(),
            );
            println!("{line}");
            if std::env::var_os("SIMBENCH_COUNTERS").is_some() {
                for k in [
                    "drops",
                    "pfc_pauses",
                    "timeouts",
                    "cnps",
                    "ecn_marks",
                    "retransmissions",
                ] {
                    print!(" {k}={}", r.counters.get(k).copied().unwrap_or(0));
                }
                println!();
                let mut kinds: Vec<_> = r
                    .stats
                    .iter()
                    .filter(|(k, _)| k.starts_with("events_"))
                    .collect();
                kinds.sort_by(|a, b| a.0.cmp(b.0));
                for (k, v) in kinds {
                    print!(" {k}={v}");
                }
                println!();
            }
            if std::env::var_os("SIMBENCH_FLOWS").is_some() {
                for f in sim.flows() {
                    let mut l = f.latencies.clone();
                    l.sort();
                    let q = |x: f64| {
                        l.get(((l.len() as f64 - 1.0) * x) as usize)
                            .copied()
                            .unwrap_or(0)
                    };
                    println!(
                        "  flow {} {} {}->{} bytes {} start {} finish {:?} lat n={} p50={} p99={} max={}",
                        f.id, f.kind, f.src, f.dst, f.bytes_done, f.start_ps, f.finish_ps,
                        l.len(), q(0.5), q(0.99), q(1.0)
                    );
                }
            }
        }
        if repeat > 1 {
            walls.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!("{name}: median wall {:.3} s of {repeat}", walls[repeat / 2]);
        }
        let _ = line;
    }
}

/// With `SIMBENCH_RSS`: `rss <stage>: now X MB, peak Y MB` (VmRSS, VmHWM).
fn rss(stage: &str) {
    if std::env::var_os("SIMBENCH_RSS").is_none() {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    eprintln!(
        "rss {stage}: now {:.1} MB, peak {:.1} MB",
        kb("VmRSS:") / 1e3,
        kb("VmHWM:") / 1e3
    );
}

#[allow(dead_code)]
fn sizes() {
    eprintln!(
        "Qp {} RcTransport {} RcConfig {} Dcqcn {}",
        std::mem::size_of::<braid_sim::nic::Qp>(),
        std::mem::size_of::<braid_sim::transport::rc::RcTransport>(),
        std::mem::size_of::<braid_sim::transport::rc::RcConfig>(),
        std::mem::size_of::<braid_sim::dcqcn::Dcqcn>()
    );
}
