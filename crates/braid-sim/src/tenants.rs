//! The per-tenant results table: what each tenant ran, what it cost the host's CPU, and how it
//! fared. One row per tenant of every host (the agent slot only where it runs layers).

use crate::api::{Column, ColumnType as T, Table};
use crate::measure::FlowLog;
use crate::results::quantile;
use crate::tables::{col, nullable, Col, Extra, Null, Source, TableSpec};
use crate::world::World;
use braid_engine::time::{Time, S};
use std::collections::BTreeSet;

pub const SPEC: TableSpec = TableSpec {
    name: "tenants",
    doc: "per tenant (each `[[apps]]` side and `[[traffic]]` table on a host, and host agents): its middleware stack, CPU time (`cpu_ns`, by layer, per message), verbs calls, its layers' counters, and for perftest clients latency p50/p99, goodput and message rate ([docs/middleware.md](docs/middleware.md))",
    columns: COLUMNS,
    extra: Some(Extra {
        ty: None,
        doc: "`cpu_ns_<layer>` (f64) after `cpu_ns`, the CPU time each layer of the stack took; with attackers, `attack_tries`, `attack_refused`, `attack_succeeded` (i64, null for a tenant that is not an attacker); last, `<layer>_<counter>` (f64) for every counter of every layer in the run, 0 for a tenant whose stack lacks the layer",
    }),
    build,
};

const COLUMNS: &[Col] = &[
    col("host", T::U64, "host index"),
    col(
        "tenant",
        T::U64,
        "tenant slot on the host (0: the host agent)",
    ),
    col(
        "label",
        T::Str,
        "which `[[apps]]` side or `[[traffic]]` table it is",
    ),
    col(
        "stack",
        T::Str,
        "its middleware layers, top first, joined by `,`",
    ),
    nullable(
        "flow",
        T::I64,
        Null::Negative,
        "its flow id (`flows.parquet`); null for a tenant without one (an agent)",
    ),
    col("cpu_ns", T::F64, "host CPU time it took"),
    col("posts", T::U64, "verbs post calls"),
    col("polls", T::U64, "verbs poll calls"),
    nullable(
        "lat_p50_us",
        T::F64,
        Null::Nan,
        "a perftest client's median latency; null for other tenants",
    ),
    nullable("lat_p80_us", T::F64, Null::Nan, "80th-percentile latency"),
    nullable("lat_p99_us", T::F64, Null::Nan, "99th-percentile latency"),
    nullable(
        "lat_mean_us",
        T::F64,
        Null::Nan,
        "mean latency; null without samples",
    ),
    nullable("lat_samples", T::F64, Null::Nan, "latency samples"),
    nullable(
        "goodput_gbps",
        T::F64,
        Null::Nan,
        "a client's goodput over its life (so far); null for other tenants",
    ),
    nullable(
        "msg_rate_mps",
        T::F64,
        Null::Nan,
        "a client's message rate, millions per second",
    ),
    nullable(
        "cpu_ns_per_msg",
        T::F64,
        Null::Nan,
        "CPU time per message; null before the first message",
    ),
];

fn build(src: &Source) -> Table {
    table(src.world, src.log, src.now)
}

/// `now`: the run's end; a tenant still running then is measured up to it (as the flows table
/// does), so an unfinished app that moved data has a goodput and a message rate.
fn table(world: &World, log: &FlowLog, now: Time) -> Table {
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

fn layer_column(c: &braid_verbs::LayerColumn) -> Column {
    use braid_verbs::LayerColumn as L;
    match c {
        L::U64(v) => Column::U64(v.clone()),
        L::I64(v) => Column::I64(v.clone()),
        L::F64(v) => Column::F64(v.clone()),
        L::Str(v) => Column::Str(v.clone()),
    }
}

/// `n` placeholders of the kind of `c` under nulls (`append` marks them): NaN, -1 for integers,
/// "" for text.
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
/// null). Tables without rows are left out; a name that is not a valid file name
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
                        || crate::tables::reserved(&lt.name)
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
    for t in out.values_mut() {
        nan_is_null(t);
    }
    (out, refused)
}

/// Appends `b`'s rows to `a`, matching columns by name; the rows of a column a side lacks are
/// null (their placeholder: `filler`).
fn append(a: &mut Table, mut b: Table) {
    let (na, nb) = (a.rows(), b.rows());
    let mask = |t: &Table, name: &str, n: usize| {
        t.validity(name)
            .map_or_else(|| vec![true; n], <[bool]>::to_vec)
    };
    let mut cols = std::mem::take(&mut a.columns);
    let mut valid: Vec<(String, Vec<bool>)> = Vec::new();
    for (name, col) in cols.iter_mut() {
        let mut v = mask(a, name, na);
        let tail = match b.columns.iter().position(|(n, _)| n == name) {
            Some(k) => {
                v.extend(mask(&b, name, nb));
                b.columns.remove(k).1
            }
            None => {
                v.extend(vec![false; nb]);
                filler(col, nb)
            }
        };
        let head = std::mem::replace(col, Column::U64(Vec::new()));
        *col = concat(head, tail);
        valid.push((name.clone(), v));
    }
    for (name, col) in std::mem::take(&mut b.columns) {
        let head = filler(&col, na);
        let mut v = vec![false; na];
        v.extend(mask(&b, &name, nb));
        cols.push((name.clone(), concat(head, col)));
        valid.push((name, v));
    }
    a.columns = cols;
    a.valid.clear();
    for (name, v) in valid {
        a.set_validity(&name, v);
    }
}

/// A layer's NaN is "not measured" (a gap a layer did not report, a column it lacks): null.
fn nan_is_null(t: &mut Table) {
    let masks: Vec<(String, Vec<bool>)> = t
        .columns
        .iter()
        .filter_map(|(name, c)| match c {
            Column::F64(x) => Some((
                name.clone(),
                x.iter()
                    .zip(
                        t.validity(name)
                            .map_or_else(|| vec![true; x.len()], <[bool]>::to_vec),
                    )
                    .map(|(x, v)| v && !x.is_nan())
                    .collect(),
            )),
            _ => None,
        })
        .collect();
    for (name, v) in masks {
        t.set_validity(&name, v);
    }
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
        // The rows a side lacks are null, whatever their placeholder.
        assert_eq!(a.validity("n"), Some(&[true, false, false][..]));
        assert_eq!(a.validity("s"), Some(&[false, true, true][..]));
        assert_eq!(a.validity("x"), None);
        let mut c = Table::default();
        c.push("host", Column::U64(vec![2]));
        c.push("n", Column::U64(vec![5]));
        append(&mut a, c);
        assert_eq!(a.validity("n"), Some(&[true, false, false, true][..]));
        assert_eq!(a.validity("x"), Some(&[true, true, true, false][..]));
    }
}
