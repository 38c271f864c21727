//! The preload's counters: what proves the data path went through braid. Printed as one JSON
//! line at exit, to the file `BRAID_PRELOAD_STATS` names (`{pid}` replaced by the process id)
//! or, when it is unset, to stderr.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// One counter per event the preload sees.
        #[allow(non_upper_case_globals)]
        pub mod c {
            use std::sync::atomic::AtomicU64;
            $(pub static $name: AtomicU64 = AtomicU64::new(0);)*
        }
        /// (name, value) of every counter, in declaration order.
        pub fn snapshot() -> Vec<(&'static str, u64)> {
            vec![$((stringify!($name), c::$name.load(Ordering::Relaxed)),)*]
        }
    };
}

counters!(
    contexts,
    contexts_not_swapped,
    qps_adopted,
    qps_connected,
    qps_refused_ext_api,
    cqs_adopted,
    cqs_ex,
    srqs,
    mrs,
    pds,
    modify_qp,
    comp_channels,
    cq_events,
    post_send_calls,
    send_wrs_braid,
    send_wrs_passthrough,
    post_recv_calls,
    recv_wrs_braid,
    recv_wrs_passthrough,
    srq_recv_wrs_passthrough,
    poll_cq_calls,
    cqes_braid,
    cqes_synthesized,
    cqes_passthrough,
    req_notify_braid,
    req_notify_passthrough,
    mlx5dv_calls,
);

pub fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// The counters as one JSON object, with the mechanism's name and the pid.
pub fn json(middleware: &str, layers: &[(String, f64)]) -> String {
    let mut m = serde_json::Map::new();
    m.insert("pid".into(), std::process::id().into());
    m.insert("middleware".into(), middleware.into());
    for (k, v) in snapshot() {
        m.insert(k.into(), v.into());
    }
    // The layers' own counters (`justitia.chunks`, `agent.justitia.capacity_gbps`, ...).
    for (k, v) in layers {
        let n = serde_json::Number::from_f64(*v).map_or(serde_json::Value::Null, Into::into);
        m.insert(k.clone(), n);
    }
    serde_json::Value::Object(m).to_string()
}

/// Where `BRAID_PRELOAD_STATS` asks the counters to go.
pub fn stats_path(var: Option<&str>, pid: u32) -> Option<String> {
    var.filter(|v| !v.is_empty())
        .map(|v| v.replace("{pid}", &pid.to_string()))
}

pub fn dump(middleware: &str, layers: &[(String, f64)]) {
    let line = json(middleware, layers);
    let var = std::env::var("BRAID_PRELOAD_STATS").ok();
    match stats_path(var.as_deref(), std::process::id()) {
        Some(p) => {
            if let Err(e) = std::fs::write(&p, format!("{line}\n")) {
                eprintln!("braid-preload: cannot write BRAID_PRELOAD_STATS={p}: {e}");
            }
        }
        None => eprintln!("braid-preload: {line}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stats_path_takes_the_pid_and_counters_are_json() {
        assert_eq!(
            stats_path(Some("/tmp/s-{pid}.json"), 7).unwrap(),
            "/tmp/s-7.json"
        );
        assert_eq!(stats_path(Some(""), 7), None);
        add(&c::mlx5dv_calls, 2);
        let v: serde_json::Value =
            serde_json::from_str(&json("raw", &[("raw.x".into(), 3.0)])).unwrap();
        assert_eq!(v["middleware"], "raw");
        assert_eq!(v["raw.x"], 3.0);
        assert!(v["mlx5dv_calls"].as_u64().unwrap() >= 2);
    }
}
