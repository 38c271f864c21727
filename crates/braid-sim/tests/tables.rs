//! The table registry (`braid_sim::tables`): a run's tables are the registry's, in its order and
//! each as declared (columns, order, types), and a missing value is a null, whatever placeholder
//! the producer keeps under it.

mod common;
use braid_sim::tables::{Null, REGISTRY};
use braid_sim::{Column, Table};
use common::*;
use serde_json::json;

/// Two flows into host 2: the 6 MB one cannot finish in 300 us at 40 Gbit/s (1.2 ms alone), the
/// 10 KB one does. DCQCN's state sampled, a switch port's queue sampled.
fn scenario() -> serde_json::Value {
    json!({
        "duration": "300us",
        "topology": dumbbell(2, 1, link("40Gbps", "1us"), link("40Gbps", "1us")),
        "traffic": flows(&[(0, 2, "6MB"), (1, 2, "10KB")]),
        "measure": {"interval": "50us", "queues": ["swR:0"], "cc": {"qps": [0, 1], "interval": "10us"}},
    })
}

#[test]
fn a_run_has_every_registered_table_as_declared() {
    let (_, r) = run(&scenario());
    let names: Vec<&str> = r.tables.names().collect();
    let want: Vec<&str> = REGISTRY.iter().map(|s| s.name).collect();
    assert_eq!(
        names, want,
        "no layer tables in this run, so exactly the registry's"
    );
    for spec in REGISTRY {
        let t = &r.tables[spec.name];
        assert_eq!(spec.conforms(t), Ok(()), "{}", spec.name);
        // Only declared nullable columns (and run-time extras) have nulls.
        for (name, _) in &t.columns {
            if let Some(c) = spec.columns.iter().find(|c| c.name == name) {
                if c.null == Null::Never {
                    assert!(t.validity(name).is_none(), "{}.{name}", spec.name);
                }
            }
        }
    }
    for name in [
        "flows",
        "throughput",
        "queues",
        "cc",
        "ports",
        "transport",
        "tenants",
    ] {
        assert!(r.tables[name].rows() > 0, "{name} has rows in this run");
    }
}

fn validity(t: &Table, name: &str) -> Vec<bool> {
    t.validity(name)
        .map_or_else(|| vec![true; t.rows()], <[bool]>::to_vec)
}

#[test]
fn missing_values_are_nulls_over_their_placeholders() {
    let (_, r) = run(&scenario());
    let f = &r.tables["flows"];
    // Flow 0 is unfinished: no finish, no FCT, no slowdown; flow 1 finished.
    assert_eq!(validity(f, "finish_ps"), [false, true]);
    assert_eq!(validity(f, "fct_ps"), [false, true]);
    assert_eq!(validity(f, "slowdown"), [false, true]);
    // The values under the nulls are the producer's placeholders, unchanged (digests pin them).
    assert_eq!(ints(f, "finish_ps")[0], -1);
    assert!(numbers(f, "slowdown")[0].is_nan());
    // Traffic flows carry no application latency.
    assert_eq!(validity(f, "latency_p50_ps"), [false, false]);

    // A switch has no host index; every host has one.
    let p = &r.tables["ports"];
    let roles = match p.get("role") {
        Some(Column::Str(v)) => v.clone(),
        _ => panic!("role"),
    };
    let hosts = validity(p, "host");
    for (role, ok) in roles.iter().zip(&hosts) {
        assert_eq!(*ok, role == "host", "{role}");
    }

    // DCQCN has a rate and no window.
    let cc = &r.tables["cc"];
    assert!(cc.rows() > 0);
    assert!(validity(cc, "rate_bps").iter().all(|&v| v));
    assert!(validity(cc, "cwnd").iter().all(|&v| !v));
    assert!(
        validity(cc, "flow").iter().all(|&v| v),
        "both QPs carry a flow"
    );
}

/// The check every built table passes (`TableSpec::conforms`, asserted in debug builds) catches
/// a table that strays from its declaration.
#[test]
fn a_table_unlike_its_declaration_is_caught() {
    let spec = &braid_sim::tables::queues::SPEC;
    let make = |cols: &[(&str, Column)]| {
        let mut t = Table::default();
        for (n, c) in cols {
            t.push(n, c.clone());
        }
        t
    };
    let (time, port, bytes) = (
        Column::U64(vec![1]),
        Column::Str(vec!["s:0".into()]),
        Column::U64(vec![5]),
    );
    let good = make(&[
        ("time_ps", time.clone()),
        ("port", port.clone()),
        ("bytes", bytes.clone()),
    ]);
    assert_eq!(spec.conforms(&good), Ok(()));
    let wrong_type = make(&[
        ("time_ps", time.clone()),
        ("port", port.clone()),
        ("bytes", Column::F64(vec![5.0])),
    ]);
    assert!(spec.conforms(&wrong_type).is_err());
    let swapped = make(&[
        ("port", port.clone()),
        ("time_ps", time.clone()),
        ("bytes", bytes.clone()),
    ]);
    assert!(spec.conforms(&swapped).is_err());
    let missing = make(&[("time_ps", time.clone()), ("port", port.clone())]);
    assert!(spec.conforms(&missing).is_err());
    let extra = make(&[
        ("time_ps", time),
        ("port", port),
        ("bytes", bytes),
        ("more", Column::U64(vec![0])),
    ]);
    assert!(spec.conforms(&extra).is_err(), "queues declares no extras");
}
