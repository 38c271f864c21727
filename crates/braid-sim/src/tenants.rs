//! The per-tenant results table: what each tenant ran, what it cost the host's CPU, and how it
//! fared. One row per tenant of every host (the agent slot only where it runs layers).

use crate::api::{Column, Table};
use crate::measure::FlowLog;
use crate::results::quantile;
use crate::world::World;
use braid_engine::time::S;
use std::collections::BTreeSet;

pub fn table(world: &World, log: &FlowLog) -> Table {
    // Which slots get a row, and the union of layer names and counter names for the columns.
    let rows: Vec<(usize, usize)> = world
        .hosts
        .iter()
        .enumerate()
        .flat_map(|(h, host)| {
            host.apps
                .iter()
                .enumerate()
                .filter(|(i, a)| *i > 0 || !a.stack.is_empty())
                .map(move |(i, _)| (h, i))
        })
        .collect();
    let mut layers: BTreeSet<&'static str> = BTreeSet::new();
    let mut counters: BTreeSet<String> = BTreeSet::new();
    for &(h, i) in &rows {
        let a = &world.hosts[h].apps[i];
        layers.extend(a.cpu.by_layer.keys().copied());
        for l in &a.stack {
            for (k, _) in l.counters() {
                counters.insert(format!("{}_{k}", l.name()));
            }
        }
    }
    let mut t = Table::default();
    let col_u = |f: &dyn Fn(usize, usize) -> u64| -> Column {
        Column::U64(rows.iter().map(|&(h, i)| f(h, i)).collect())
    };
    let slot = |h: usize, i: usize| &world.hosts[h].apps[i];
    t.push("host", col_u(&|h, _| h as u64));
    t.push("tenant", col_u(&|_, i| i as u64));
    t.push(
        "label",
        Column::Str(
            rows.iter()
                .map(|&(h, i)| slot(h, i).label.clone())
                .collect(),
        ),
    );
    t.push(
        "stack",
        Column::Str(
            rows.iter()
                .map(|&(h, i)| {
                    let names: Vec<&str> = slot(h, i).stack.iter().map(|l| l.name()).collect();
                    names.join(",")
                })
                .collect(),
        ),
    );
    t.push(
        "flow",
        Column::I64(
            rows.iter()
                .map(|&(h, i)| slot(h, i).flow.map_or(-1, |f| f as i64))
                .collect(),
        ),
    );
    t.push(
        "cpu_ns",
        Column::F64(
            rows.iter()
                .map(|&(h, i)| slot(h, i).cpu.total_ps as f64 / 1e3)
                .collect(),
        ),
    );
    for l in &layers {
        t.push(
            &format!("cpu_ns_{l}"),
            Column::F64(
                rows.iter()
                    .map(|&(h, i)| {
                        slot(h, i).cpu.by_layer.get(l).copied().unwrap_or(0) as f64 / 1e3
                    })
                    .collect(),
            ),
        );
    }
    t.push("posts", col_u(&|h, i| slot(h, i).cpu.posts));
    t.push("polls", col_u(&|h, i| slot(h, i).cpu.polls));
    // How the tenant fared: its flow record (perftest clients measure; servers share the record).
    let rec = |h: usize, i: usize| {
        let a = slot(h, i);
        a.flow
            .filter(|_| a.label.ends_with(".client"))
            .map(|f| &log.flows[f as usize])
    };
    let lat = |h: usize, i: usize, q: f64| -> f64 {
        rec(h, i).map_or(f64::NAN, |f| {
            let mut v: Vec<f64> = f.latencies.iter().map(|&x| x as f64 / 1e6).collect();
            v.sort_by(f64::total_cmp);
            quantile(&v, q)
        })
    };
    let elapsed = |h: usize, i: usize| -> Option<f64> {
        let f = rec(h, i)?;
        let end = f.finish_ps?;
        (end > f.start_ps).then(|| (end - f.start_ps) as f64 / S as f64)
    };
    t.push(
        "lat_p50_us",
        Column::F64(rows.iter().map(|&(h, i)| lat(h, i, 0.5)).collect()),
    );
    t.push(
        "lat_p80_us",
        Column::F64(rows.iter().map(|&(h, i)| lat(h, i, 0.8)).collect()),
    );
    t.push(
        "lat_p99_us",
        Column::F64(rows.iter().map(|&(h, i)| lat(h, i, 0.99)).collect()),
    );
    // Request apps (kv, redis) compare mean latencies and request rates (DRUM §V).
    t.push(
        "lat_mean_us",
        Column::F64(
            rows.iter()
                .map(|&(h, i)| {
                    rec(h, i)
                        .filter(|f| !f.latencies.is_empty())
                        .map_or(f64::NAN, |f| {
                            f.latencies.iter().sum::<u64>() as f64 / f.latencies.len() as f64 / 1e6
                        })
                })
                .collect(),
        ),
    );
    t.push(
        "lat_samples",
        Column::F64(
            rows.iter()
                .map(|&(h, i)| rec(h, i).map_or(f64::NAN, |f| f.latencies.len() as f64))
                .collect(),
        ),
    );
    t.push(
        "goodput_gbps",
        Column::F64(
            rows.iter()
                .map(|&(h, i)| match (rec(h, i), elapsed(h, i)) {
                    (Some(f), Some(s)) => f.bytes_done as f64 * 8.0 / s / 1e9,
                    _ => f64::NAN,
                })
                .collect(),
        ),
    );
    t.push(
        "msg_rate_mps",
        Column::F64(
            rows.iter()
                .map(|&(h, i)| match (rec(h, i), elapsed(h, i)) {
                    (Some(f), Some(s)) if f.msg_bytes > 0 => {
                        (f.bytes_done / f.msg_bytes) as f64 / s / 1e6
                    }
                    _ => f64::NAN,
                })
                .collect(),
        ),
    );
    t.push(
        "cpu_ns_per_msg",
        Column::F64(
            rows.iter()
                .map(|&(h, i)| match rec(h, i) {
                    Some(f) if f.msg_bytes > 0 && f.bytes_done >= f.msg_bytes => {
                        slot(h, i).cpu.total_ps as f64 / 1e3 / (f.bytes_done / f.msg_bytes) as f64
                    }
                    _ => f64::NAN,
                })
                .collect(),
        ),
    );
    for c in &counters {
        t.push(
            c,
            Column::F64(
                rows.iter()
                    .map(|&(h, i)| {
                        slot(h, i)
                            .stack
                            .iter()
                            .flat_map(|l| {
                                let n = l.name();
                                l.counters()
                                    .into_iter()
                                    .filter(move |(k, _)| format!("{n}_{k}") == *c)
                            })
                            .map(|(_, v)| v)
                            .sum::<f64>()
                    })
                    .collect(),
            ),
        );
    }
    t
}
