//! Turning a finished (or stopped) world into result tables and headline figures.

use crate::api::{Column, Results};
use crate::measure::FlowLog;
use crate::world::World;
use braid_engine::time::S;
use braid_engine::Time;
use std::collections::BTreeMap;

/// Quantile by linear interpolation between order statistics (numpy's default).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Jain's fairness index of a set of allocations.
pub fn jain(x: &[f64]) -> f64 {
    if x.is_empty() {
        return f64::NAN;
    }
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if s2 == 0.0 {
        return f64::NAN;
    }
    s * s / (x.len() as f64 * s2)
}

pub fn assemble(
    world: &World,
    log: &FlowLog,
    now: Time,
    events: u64,
    wall: std::time::Duration,
    finished: bool,
    transport_base: Option<&crate::transport_report::TransportTotals>,
) -> Results {
    let mut r = Results::default();
    let src = crate::tables::Source {
        world,
        log,
        now,
        transport_base,
    };
    for spec in crate::tables::REGISTRY {
        r.tables.insert(spec.name, spec.make(&src));
    }

    // Counters.
    let c = &world.counters;
    let mut k = BTreeMap::new();
    k.insert("drops_buffer".into(), c.drops_buffer);
    k.insert("drops_loss".into(), c.drops_loss);
    for (name, &n) in crate::packet::LOSS_CLASSES
        .iter()
        .zip(&c.drops_loss_by_class)
    {
        k.insert(format!("drops_loss_{name}"), n);
    }
    k.insert("drops_link_down".into(), c.drops_link_down);
    k.insert("drops_no_route".into(), c.drops_no_route);
    k.insert(
        "drops".into(),
        c.drops_buffer + c.drops_loss + c.drops_link_down + c.drops_no_route,
    );
    k.insert("pfc_pauses".into(), c.pfc_pauses);
    k.insert("pfc_resumes".into(), c.pfc_resumes);
    k.insert("ecn_marks".into(), c.ecn_marks);
    k.insert("packets_forwarded".into(), c.packets_forwarded);
    if world.sw.failover.is_some() {
        // (Only with failover on, so that the counters of every other run stay as they were.)
        k.insert("reroutes".into(), c.reroutes);
    }
    let mut sum = |name: &str, f: &dyn Fn(&crate::nic::NicStats) -> u64| {
        k.insert(
            name.to_string(),
            world.hosts.iter().map(|h| f(&h.nic.stats)).sum(),
        );
    };
    sum("data_packets", &|s| s.data_pkts);
    sum("retransmissions", &|s| s.retx_pkts);
    sum("timeouts", &|s| s.timeouts);
    sum("acks", &|s| s.acks);
    sum("naks", &|s| s.naks);
    sum("rnr_naks", &|s| s.rnr_naks);
    sum("cnps", &|s| s.cnps_sent);
    sum("cnps_received", &|s| s.cnps_recv);
    sum("out_of_order_drops", &|s| s.ooo_drops);
    sum("foreign_source_drops", &|s| s.foreign_drops);
    sum("stale_feedback_drops", &|s| s.stale_feedback_drops);
    sum("qp_cache_misses", &|s| s.cache_misses);
    sum("qp_cache_hits", &|s| s.cache_hits);
    sum("remote_access_errors", &|s| s.access_errors);
    sum("cq_overruns", &|s| s.cq_overruns);
    // The translation cache's counters only where it is modelled (`nic.mtt.entries` > 0): a run
    // without it reports the same counters as before.
    if world.hosts.iter().any(|h| h.nic.mtt.enabled()) {
        let mtt = |f: &dyn Fn(&crate::nic::mtt::MttCache) -> u64| -> u64 {
            world.hosts.iter().map(|h| f(&h.nic.mtt)).sum()
        };
        k.insert("mtt_cache_misses".into(), mtt(&|c| c.misses));
        k.insert("mtt_cache_hits".into(), mtt(&|c| c.hits));
    }
    k.insert(
        "mr_refused".into(),
        world.hosts.iter().map(|h| h.nic.mem.refused).sum(),
    );
    let paused: u64 = world.all_ports().iter().map(|p| p.paused_ps).sum();
    k.insert("pfc_paused_ps".into(), paused);
    // QPs created on all NICs (applications', middleware's and agents'): what a multipath layer
    // multiplies, and the QP-context cache has to hold.
    k.insert(
        "qps_created".into(),
        world.hosts.iter().map(|h| h.nic.qps_created()).sum(),
    );
    // Per-port ECN marks and packets sent, for every switch port that marked anything
    // ("ecn_marks:<node>:<port>", "tx_pkts:<node>:<port>"; marking ratio = the first / the second).
    for (ni, n) in world.nodes.iter().enumerate() {
        for (pi, p) in world.node_ports(ni as u32).iter().enumerate() {
            if p.ecn_marks > 0 {
                k.insert(format!("ecn_marks:{}:{}", n.name, pi), p.ecn_marks);
                k.insert(format!("tx_pkts:{}:{}", n.name, pi), p.tx_pkts);
            }
        }
    }
    crate::transport_report::add_counters(world, transport_base, &mut k);
    let (layer_tables, refused) = crate::tenants::layer_tables(world);
    for (name, t) in layer_tables {
        r.tables.insert(&name, t);
    }
    if refused > 0 {
        k.insert("layer_tables_refused".into(), refused);
    }
    r.counters = k;
    if let Some(t) = &world.measure.pcap {
        r.pcap = t.file();
    }

    // Headline, from the flows table (under a null, its placeholder: -1, NaN).
    let flows_t = &r.tables["flows"];
    let (fct_col, slowdown_col, goodput_col) = (
        flows_t.get("fct_ps"),
        flows_t.get("slowdown"),
        flows_t.get("goodput_gbps"),
    );
    let (Some(Column::I64(fct)), Some(Column::F64(slowdown)), Some(Column::F64(goodput))) =
        (fct_col, slowdown_col, goodput_col)
    else {
        unreachable!("the flows table is declared with these columns (tables::flows::SPEC)")
    };
    let mut h = BTreeMap::new();
    let flows: Vec<usize> = (0..log.flows.len())
        .filter(|&i| log.flows[i].kind == "flow")
        .collect();
    let done: Vec<usize> = flows.iter().copied().filter(|&i| fct[i] >= 0).collect();
    h.insert("flows".into(), flows.len() as f64);
    h.insert("flows_completed".into(), done.len() as f64);
    if !done.is_empty() {
        let mut fct: Vec<f64> = done.iter().map(|&i| fct[i] as f64 / 1e6).collect();
        fct.sort_by(f64::total_cmp);
        h.insert(
            "fct_mean_us".into(),
            fct.iter().sum::<f64>() / fct.len() as f64,
        );
        h.insert("fct_p50_us".into(), quantile(&fct, 0.5));
        h.insert("fct_p99_us".into(), quantile(&fct, 0.99));
        let mut sd: Vec<f64> = done
            .iter()
            .map(|&i| slowdown[i])
            .filter(|x| x.is_finite())
            .collect();
        sd.sort_by(f64::total_cmp);
        h.insert(
            "slowdown_mean".into(),
            sd.iter().sum::<f64>() / sd.len().max(1) as f64,
        );
        h.insert("slowdown_p50".into(), quantile(&sd, 0.5));
        h.insert("slowdown_p99".into(), quantile(&sd, 0.99));
        // No sum of the flows' goodputs: flows that never overlapped add up to a rate nothing
        // achieved (the review's 3,058 Gbps on a 16-host 100G fabric). The rate the fabric
        // carried is `aggregate_goodput_gbps`.
    }
    // Fairness over every flow that started: an unfinished one counts with its goodput so far,
    // so a flow stuck at 0 pulls the index down instead of dropping out of it.
    let all: Vec<f64> = flows
        .iter()
        .map(|&i| goodput[i])
        .filter(|x| x.is_finite())
        .collect();
    if !all.is_empty() {
        h.insert("flow_goodput_jain".into(), jain(&all));
    }
    let apps: Vec<usize> = (0..log.flows.len())
        .filter(|&i| log.flows[i].kind != "flow")
        .collect();
    if !apps.is_empty() {
        let gp: Vec<f64> = apps
            .iter()
            .map(|&i| goodput[i])
            .filter(|x| x.is_finite())
            .collect();
        h.insert("app_goodput_sum_gbps".into(), gp.iter().sum());
        h.insert("apps".into(), apps.len() as f64);
        h.insert(
            "apps_completed".into(),
            apps.iter().filter(|&&i| fct[i] >= 0).count() as f64,
        );
        // Fairness only among apps of one kind: a bandwidth app beside a latency app differ by
        // design (the review's 0.50 for 86 Gbps beside 0.012 Gbps is not unfairness).
        let kind = &log.flows[apps[0]].kind;
        if apps.iter().all(|&i| &log.flows[i].kind == kind) {
            h.insert("app_goodput_jain".into(), jain(&gp));
        }
    }
    let delivered: u64 = world
        .hosts
        .iter()
        .flat_map(|h| h.nic.qps())
        .map(|q| q.rx_bytes)
        .sum();
    h.insert("delivered_bytes".into(), delivered as f64);
    // Over the time traffic was present: from the first flow's start to the last one's end (or
    // now, if one is unfinished), not from time 0 (imported traces often start late).
    let first = log
        .flows
        .iter()
        .map(|f| f.start_ps)
        .min()
        .unwrap_or(0)
        .min(now);
    let last = log
        .flows
        .iter()
        .map(|f| f.finish_ps.unwrap_or(now).min(now))
        .max()
        .unwrap_or(now);
    if last > first {
        h.insert(
            "aggregate_goodput_gbps".into(),
            delivered as f64 * 8.0 / ((last - first) as f64 / S as f64) / 1e9,
        );
    }
    h.insert("traffic_start_ms".into(), first as f64 / 1e9);
    h.insert("traffic_end_ms".into(), last as f64 / 1e9);
    h.insert("sim_time_ms".into(), now as f64 / 1e9);
    r.headline = h;

    // Run statistics.
    let mut s = BTreeMap::new();
    let wall_s = wall.as_secs_f64();
    s.insert("events".into(), events as f64);
    s.insert("packets".into(), world.pool.created as f64);
    s.insert("sim_time_ps".into(), now as f64);
    s.insert("wall_s".into(), wall_s);
    s.insert(
        "events_per_s".into(),
        if wall_s > 0.0 {
            events as f64 / wall_s
        } else {
            0.0
        },
    );
    s.insert(
        "sim_s_per_wall_s".into(),
        if wall_s > 0.0 {
            now as f64 / S as f64 / wall_s
        } else {
            0.0
        },
    );
    s.insert("finished".into(), finished as u8 as f64);
    s.insert("hosts".into(), world.hosts.len() as f64);
    for (k, n) in crate::world::Ev::KINDS.iter().zip(world.ev_counts) {
        s.insert(format!("events_{k}"), n as f64);
    }
    s.insert("switches".into(), world.switches.len() as f64);
    // The capture's size, and the frames beyond `measure.pcap.max_packets` it left out.
    if let Some(t) = &world.measure.pcap {
        s.insert("pcap_packets".into(), t.packets as f64);
        s.insert("pcap_missed".into(), t.missed as f64);
    }
    r.stats = s;
    r
}
