//! The per-tenant results table: what each tenant ran, what it cost the host's CPU, and how it
//! fared. One row per tenant of every host (the agent slot only where it runs layers).

use crate::api::{Column, Table};
use crate::measure::FlowLog;
use crate::results::quantile;
use crate::world::World;
use braid_engine::time::{Time, S};
use std::collections::BTreeSet;

/// `now`: the run's end; a tenant still running then is measured up to it (as the flows table
/// does), so an unfinished app that moved data has a goodput and a message rate.
pub fn table(world: &World, log: &FlowLog, now: Time) -> Table {
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
        let end = f.finish_ps.unwrap_or(now).min(now);
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
    // Attackers' counts (columns only in runs that have attackers).
    if log.flows.iter().any(|f| f.attack.is_some()) {
        type Pick = fn(&braid_apps::attack::Tally) -> u64;
        let picks: [(&str, Pick); 3] = [
            ("attack_tries", |t| t.tries),
            ("attack_refused", |t| t.refused),
            ("attack_succeeded", |t| t.succeeded),
        ];
        for (name, pick) in picks {
            t.push(
                name,
                Column::I64(
                    rows.iter()
                        .map(|&(h, i)| {
                            rec(h, i)
                                .and_then(|f| f.attack.as_ref())
                                .map_or(-1, |a| pick(a) as i64)
                        })
                        .collect(),
                ),
            );
        }
    }
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
                            // From +0.0: a counter of a layer this tenant's stack lacks counts
                            // nothing, 0 (f64's `sum` of nothing is -0.0). Not NaN: tests and
                            // reproductions add a counter up over every tenant.
                            .fold(0.0, |a, v| a + v)
                    })
                    .collect(),
            ),
        );
    }
    t
}

/// Names of the simulator's own tables: a layer's table may not take one.
const RESERVED: &[&str] = &[
    "messages",
    "flows",
    "throughput",
    "queues",
    "transport",
    "tenants",
    "ports",
    "pfc",
    "cc",
    "summary",
    "trace",
];

fn layer_column(c: &braid_verbs::LayerColumn) -> Column {
    use braid_verbs::LayerColumn as L;
    match c {
        L::U64(v) => Column::U64(v.clone()),
        L::I64(v) => Column::I64(v.clone()),
        L::F64(v) => Column::F64(v.clone()),
        L::Str(v) => Column::Str(v.clone()),
    }
}

/// `n` missing values of the kind of `c`: NaN, -1 for integers (as the flows table's unset
/// times), "" for text.
fn filler(c: &Column, n: usize) -> Column {
    match c {
        Column::U64(_) | Column::I64(_) => Column::I64(vec![-1; n]),
        Column::F64(_) => Column::F64(vec![f64::NAN; n]),
        Column::Str(_) => Column::Str(vec![String::new(); n]),
    }
}

/// `a` followed by `b`; a U64 column meeting an I64 one (a filler) becomes I64.
fn concat(a: Column, b: Column) -> Column {
    match (a, b) {
        (Column::U64(mut x), Column::U64(y)) => {
            x.extend(y);
            Column::U64(x)
        }
        (Column::F64(mut x), Column::F64(y)) => {
            x.extend(y);
            Column::F64(x)
        }
        (Column::Str(mut x), Column::Str(y)) => {
            x.extend(y);
            Column::Str(x)
        }
        (a, b) => {
            let ints = |c: Column| -> Vec<i64> {
                match c {
                    Column::U64(v) => v.into_iter().map(|x| x as i64).collect(),
                    Column::I64(v) => v,
                    Column::F64(v) => v.into_iter().map(|x| x as i64).collect(),
                    Column::Str(v) => vec![-1; v.len()],
                }
            };
            let mut x = ints(a);
            x.extend(ints(b));
            Column::I64(x)
        }
    }
}

/// The tables the middleware layers handed over (`Middleware::tables`), by name: the rows of
/// every host and tenant with the same name in one table, `host` (index) and `tenant` first,
/// then the union of the layers' columns in the order first seen (a column a layer lacks is
/// filled: NaN, -1, ""). Tables without rows are left out; a name that is not a valid file name
/// or that one of the simulator's tables has is refused (counted in `refused`).
pub fn layer_tables(world: &World) -> (std::collections::BTreeMap<String, Table>, u64) {
    use std::collections::BTreeMap;
    let mut out: BTreeMap<String, Table> = BTreeMap::new();
    let mut refused = 0;
    for (h, host) in world.hosts.iter().enumerate() {
        for (i, a) in host.apps.iter().enumerate() {
            for l in &a.stack {
                for lt in l.tables() {
                    if !braid_verbs::LayerTable::valid_name(&lt.name)
                        || RESERVED.contains(&lt.name.as_str())
                    {
                        refused += 1;
                        continue;
                    }
                    let n = lt.rows();
                    if n == 0 {
                        continue;
                    }
                    let mut add = Table::default();
                    add.push("host", Column::U64(vec![h as u64; n]));
                    add.push("tenant", Column::U64(vec![i as u64; n]));
                    for (c, col) in &lt.columns {
                        if c != "host" && c != "tenant" {
                            add.push(c, layer_column(col));
                        }
                    }
                    match out.get_mut(&lt.name) {
                        None => {
                            out.insert(lt.name.clone(), add);
                        }
                        Some(t) => append(t, add),
                    }
                }
            }
        }
    }
    (out, refused)
}

/// Appends `b`'s rows to `a`, matching columns by name.
fn append(a: &mut Table, mut b: Table) {
    let (na, nb) = (a.rows(), b.rows());
    let mut cols = std::mem::take(&mut a.columns);
    for (name, col) in cols.iter_mut() {
        let tail = match b.columns.iter().position(|(n, _)| n == name) {
            Some(k) => b.columns.remove(k).1,
            None => filler(col, nb),
        };
        let head = std::mem::replace(col, Column::U64(Vec::new()));
        *col = concat(head, tail);
    }
    for (name, col) in b.columns {
        let head = filler(&col, na);
        cols.push((name, concat(head, col)));
    }
    a.columns = cols;
}

#[cfg(test)]
mod layer_table_tests {
    use super::*;

    #[test]
    fn rows_of_different_layers_are_joined_by_column_name() {
        let mut a = Table::default();
        a.push("host", Column::U64(vec![0]));
        a.push("x", Column::F64(vec![1.0]));
        a.push("n", Column::U64(vec![7]));
        let mut b = Table::default();
        b.push("host", Column::U64(vec![1, 1]));
        b.push("x", Column::F64(vec![2.0, 3.0]));
        b.push("s", Column::Str(vec!["a".into(), "b".into()]));
        append(&mut a, b);
        assert_eq!(a.rows(), 3);
        assert_eq!(a.get("host"), Some(&Column::U64(vec![0, 1, 1])));
        assert_eq!(a.get("x"), Some(&Column::F64(vec![1.0, 2.0, 3.0])));
        assert_eq!(a.get("n"), Some(&Column::I64(vec![7, -1, -1])));
        assert_eq!(
            a.get("s"),
            Some(&Column::Str(vec!["".into(), "a".into(), "b".into()]))
        );
    }
}
