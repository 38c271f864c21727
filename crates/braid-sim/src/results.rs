//! Turning a finished (or stopped) world into result tables and headline figures.

use crate::api::{Column, Results, Table};
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

    // Bytes each flow's receiving QPs (and the QPs a middleware made for them) delivered so far,
    // and the source ports each sending QP family put data on (several for multipath transports).
    let mut delivered_by_flow: BTreeMap<u32, u64> = BTreeMap::new();
    let mut sports_by_qp: BTreeMap<(u32, u32), std::collections::BTreeSet<u16>> = BTreeMap::new();
    for host in &world.hosts {
        for q in host.nic.qps() {
            let head = host.owners.family_head(q.qpn);
            if let Some(&flow) = log.rx_qp_flow.get(&(host.node, head)) {
                *delivered_by_flow.entry(flow).or_default() += q.rx_bytes;
            }
            let vps = q.t.vp_counters();
            let used = sports_by_qp.entry((host.node, head)).or_default();
            if vps.is_empty() {
                if q.tx_bytes > 0 {
                    used.insert(q.sport);
                }
            } else {
                used.extend(vps.iter().map(|&(vp, _, _)| vp));
            }
        }
    }
    let name_path = |p: Vec<u32>| {
        p.iter()
            .map(|&n| world.nodes[n as usize].name.as_str())
            .collect::<Vec<_>>()
            .join(">")
    };

    // Flows.
    let mut fl = FlowCols::default();
    let mut ideals = crate::world::ideal::Ideals::new(world);
    ideals.prepare(
        log.flows
            .iter()
            .filter(|f| f.kind == "flow")
            .map(|f| (f.src, f.dst)),
    );
    for f in &log.flows {
        let sport = f
            .src_qp
            .and_then(|(node, qpn)| {
                world.hosts[world.host_index[node as usize] as usize]
                    .nic
                    .qp(qpn)
                    .map(|q| q.sport)
            })
            .unwrap_or(0);
        let path = world.path_of(f.src, f.dst, sport);
        let fct = f.finish_ps.map(|t| t.saturating_sub(f.start_ps));
        let is_flow = f.kind == "flow";
        // The slowdown's denominator describes the fabric (the same for every scheme); the
        // flow's own path's standalone FCT is kept beside it (HPCC's notion, `compare-hpcc`).
        let (ideal, path_ideal) = if is_flow {
            (
                ideals.fct(f.src, f.dst, f.size),
                world.path_ideal_fct(f.src, f.dst, sport, f.size),
            )
        } else {
            (0, 0)
        };
        let bytes = if is_flow { f.size } else { f.bytes_done };
        let elapsed = fct.unwrap_or(now.saturating_sub(f.start_ps));
        fl.id.push(f.id as u64);
        fl.kind.push(f.kind.to_string());
        fl.src.push(f.src as u64);
        fl.dst.push(f.dst as u64);
        // `size` is what was asked for, finished or not (an app stopped halfway used to show the
        // bytes it had moved); an app that runs for a time rather than a count asked for none,
        // and shows what it moved.
        fl.size
            .push(if is_flow || f.size > 0 { f.size } else { bytes });
        fl.start.push(f.start_ps as i64);
        fl.finish.push(f.finish_ps.map_or(-1, |t| t as i64));
        fl.fct.push(fct.map_or(-1, |t| t as i64));
        fl.ideal.push(ideal as i64);
        fl.path_ideal.push(path_ideal as i64);
        // Not clamped: a value below 1 would mean a flow beat the idle fabric (a model bug).
        fl.slowdown.push(match (fct, is_flow) {
            (Some(t), true) if ideal > 0 => t as f64 / ideal as f64,
            _ => f64::NAN,
        });
        // An unfinished flow has the goodput of what it delivered so far (0 if stuck).
        let so_far = delivered_by_flow
            .get(&f.id)
            .copied()
            .unwrap_or(0)
            .min(f.size);
        let good = if is_flow && fct.is_none() {
            so_far
        } else {
            bytes
        };
        fl.goodput.push(if elapsed > 0 {
            good as f64 * 8.0 / (elapsed as f64 / S as f64) / 1e9
        } else {
            f64::NAN
        });
        fl.sport.push(sport as u64);
        fl.dport.push(f.dport as u64);
        let own = name_path(path);
        // Every distinct path the flow's data took: one per source port its sending QPs used.
        let mut set: Vec<String> = f
            .src_qp
            .and_then(|qp| sports_by_qp.get(&qp))
            .map(|ports| {
                ports
                    .iter()
                    .map(|&sp| name_path(world.path_of(f.src, f.dst, sp)))
                    .collect()
            })
            .unwrap_or_default();
        set.sort();
        set.dedup();
        if set.is_empty() {
            set.push(own.clone());
        }
        fl.n_paths.push(set.len() as u64);
        fl.path_set.push(set.join(" | "));
        fl.path.push(own);
        let mut lat: Vec<f64> = f.latencies.iter().map(|&x| x as f64).collect();
        lat.sort_by(f64::total_cmp);
        fl.lat_p50.push(quantile(&lat, 0.5));
        fl.lat_p99.push(quantile(&lat, 0.99));
    }
    r.flows.push("flow", Column::U64(fl.id));
    r.flows.push("kind", Column::Str(fl.kind));
    r.flows.push("src", Column::U64(fl.src));
    r.flows.push("dst", Column::U64(fl.dst));
    r.flows.push("size", Column::U64(fl.size));
    r.flows.push("start_ps", Column::I64(fl.start));
    r.flows.push("finish_ps", Column::I64(fl.finish.clone()));
    r.flows.push("fct_ps", Column::I64(fl.fct.clone()));
    r.flows.push("ideal_fct_ps", Column::I64(fl.ideal));
    r.flows
        .push("path_ideal_fct_ps", Column::I64(fl.path_ideal));
    r.flows.push("slowdown", Column::F64(fl.slowdown.clone()));
    r.flows
        .push("goodput_gbps", Column::F64(fl.goodput.clone()));
    r.flows.push("sport", Column::U64(fl.sport));
    r.flows.push("dport", Column::U64(fl.dport));
    r.flows.push("path", Column::Str(fl.path));
    r.flows.push("paths", Column::U64(fl.n_paths));
    r.flows.push("path_set", Column::Str(fl.path_set));
    r.flows.push("latency_p50_ps", Column::F64(fl.lat_p50));
    r.flows.push("latency_p99_ps", Column::F64(fl.lat_p99));

    // Messages.
    let mut m = MsgCols::default();
    for (h, rec) in &world.measure.messages {
        m.host.push(*h as u64);
        m.qpn.push(rec.qpn as u64);
        m.dst
            .push(world.host_of(rec.dst).map_or(u32::MAX as u64, |h| h as u64));
        m.op.push(rec.op.to_string());
        m.bytes.push(rec.bytes);
        m.post.push(rec.post_ps);
        m.complete.push(rec.complete_ps);
        m.wr_id.push(rec.wr_id);
    }
    r.messages.push("host", Column::U64(m.host));
    r.messages.push("qpn", Column::U64(m.qpn));
    r.messages.push("dst", Column::U64(m.dst));
    r.messages.push("op", Column::Str(m.op));
    r.messages.push("bytes", Column::U64(m.bytes));
    r.messages.push("post_ps", Column::U64(m.post.clone()));
    r.messages
        .push("complete_ps", Column::U64(m.complete.clone()));
    r.messages.push(
        "latency_ps",
        Column::U64(m.complete.iter().zip(&m.post).map(|(c, p)| c - p).collect()),
    );
    r.messages.push("wr_id", Column::U64(m.wr_id));

    // Goodput series, per flow: one row per sampling interval of the flow's life, zero
    // intervals included (a stall shows as zeros, not as a line bridging it).
    let mut series: BTreeMap<(Time, u32), (u64, Time)> = BTreeMap::new();
    for &(t, node, qpn, bytes, dt) in &world.measure.tput {
        // A middleware's QP counts for the application QP it serves (world::facing).
        let host = &world.hosts[node as usize];
        let head = host.owners.family_head(qpn);
        let Some(&flow) = log.rx_qp_flow.get(&(host.node, head)) else {
            continue;
        };
        let e = series.entry((t, flow)).or_insert((0, dt));
        e.0 += bytes;
    }
    let iv = world.measure.interval;
    if let Some(k) = now.checked_div(iv) {
        let last = k * iv;
        for f in &log.flows {
            if f.start_ps >= last {
                continue;
            }
            // Samples end intervals: the first after the start, through the one holding the end.
            let end = f.finish_ps.unwrap_or(now).min(now);
            let hi = end.div_ceil(iv).saturating_mul(iv).min(last);
            let mut t = (f.start_ps / iv + 1) * iv;
            while t <= hi {
                series.entry((t, f.id)).or_insert((0, iv));
                t += iv;
            }
        }
    }
    let (mut tt, mut tf, mut tb, mut tg) = (vec![], vec![], vec![], vec![]);
    for (&(t, flow), &(bytes, dt)) in &series {
        tt.push(t);
        tf.push(flow as u64);
        tb.push(bytes);
        tg.push(bytes as f64 * 8.0 / (dt as f64 / S as f64) / 1e9);
    }
    r.throughput.push("time_ps", Column::U64(tt));
    r.throughput.push("flow", Column::U64(tf));
    r.throughput.push("bytes", Column::U64(tb));
    r.throughput.push("gbps", Column::F64(tg));

    // Queue series.
    let (mut qt, mut qn, mut qb) = (vec![], vec![], vec![]);
    for &(t, i, b) in &world.measure.queues {
        qt.push(t);
        qn.push(world.measure.queue_names[i as usize].clone());
        qb.push(b);
    }
    r.queues.push("time_ps", Column::U64(qt));
    r.queues.push("port", Column::Str(qn));
    r.queues.push("bytes", Column::U64(qb));

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
    r.layer_tables = layer_tables;
    if refused > 0 {
        k.insert("layer_tables_refused".into(), refused);
    }
    r.counters = k;
    r.transport = crate::transport_report::table(world);
    r.tenants = crate::tenants::table(world, log, now);
    r.ports = port_map(world);
    r.pfc = pfc_table(world);
    r.cc = world
        .measure
        .cc
        .as_ref()
        .map_or_else(crate::trace::cc::empty_table, |c| c.table());
    if let Some(t) = &world.measure.pcap {
        r.pcap = t.file();
    }

    // Headline.
    let mut h = BTreeMap::new();
    let flows: Vec<usize> = (0..log.flows.len())
        .filter(|&i| log.flows[i].kind == "flow")
        .collect();
    let done: Vec<usize> = flows.iter().copied().filter(|&i| fl.fct[i] >= 0).collect();
    h.insert("flows".into(), flows.len() as f64);
    h.insert("flows_completed".into(), done.len() as f64);
    if !done.is_empty() {
        let mut fct: Vec<f64> = done.iter().map(|&i| fl.fct[i] as f64 / 1e6).collect();
        fct.sort_by(f64::total_cmp);
        h.insert(
            "fct_mean_us".into(),
            fct.iter().sum::<f64>() / fct.len() as f64,
        );
        h.insert("fct_p50_us".into(), quantile(&fct, 0.5));
        h.insert("fct_p99_us".into(), quantile(&fct, 0.99));
        let mut sd: Vec<f64> = done
            .iter()
            .map(|&i| fl.slowdown[i])
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
        .map(|&i| fl.goodput[i])
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
            .map(|&i| fl.goodput[i])
            .filter(|x| x.is_finite())
            .collect();
        h.insert("app_goodput_sum_gbps".into(), gp.iter().sum());
        h.insert("apps".into(), apps.len() as f64);
        h.insert(
            "apps_completed".into(),
            apps.iter().filter(|&&i| fl.fct[i] >= 0).count() as f64,
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

/// The port map: which neighbour each port index faces, so that "tor0:4" in queue names and
/// counters can be read without re-deriving the topology builder's numbering.
fn port_map(world: &World) -> Table {
    let (mut node, mut name, mut port, mut peer, mut peer_name, mut peer_port) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut rate, mut delay, mut role, mut host) = (vec![], vec![], vec![], vec![]);
    for (ni, n) in world.nodes.iter().enumerate() {
        // Flows name hosts by host index; exports (HPCC's addresses) need the node behind it.
        let (r, h) = match n.role {
            crate::world::Role::Host(h) => ("host", h as i64),
            crate::world::Role::Switch(_) => ("switch", -1),
        };
        for (pi, p) in world.node_ports(ni as u32).iter().enumerate() {
            node.push(ni as u64);
            name.push(n.name.clone());
            role.push(r.to_string());
            host.push(h);
            port.push(pi as u64);
            peer.push(p.peer_node as u64);
            peer_name.push(world.nodes[p.peer_node as usize].name.clone());
            peer_port.push(p.peer_port as u64);
            rate.push(p.rate);
            delay.push(p.delay);
        }
    }
    let mut t = Table::default();
    t.push("node", Column::U64(node));
    t.push("node_name", Column::Str(name));
    t.push("role", Column::Str(role));
    t.push("host", Column::I64(host));
    t.push("port", Column::U64(port));
    t.push("peer", Column::U64(peer));
    t.push("peer_name", Column::Str(peer_name));
    t.push("peer_port", Column::U64(peer_port));
    t.push("rate_bps", Column::U64(rate));
    t.push("delay_ps", Column::U64(delay));
    t
}

/// PFC frames in the order they happened (HPCC ns-3's `pfc.txt` records the receiving side).
fn pfc_table(world: &World) -> Table {
    let recs = &world.measure.pfc;
    let mut t = Table::default();
    t.push(
        "time_ps",
        Column::U64(recs.iter().map(|r| r.time).collect()),
    );
    t.push(
        "node",
        Column::U64(recs.iter().map(|r| r.node as u64).collect()),
    );
    t.push(
        "node_name",
        Column::Str(
            recs.iter()
                .map(|r| world.nodes[r.node as usize].name.clone())
                .collect(),
        ),
    );
    t.push(
        "port",
        Column::U64(recs.iter().map(|r| r.port as u64).collect()),
    );
    t.push(
        "priority",
        Column::U64(recs.iter().map(|r| r.prio as u64).collect()),
    );
    let ty = |r: &crate::measure::PfcRecord| if r.pause { "pause" } else { "resume" };
    t.push(
        "type",
        Column::Str(recs.iter().map(|r| ty(r).to_string()).collect()),
    );
    let dir = |r: &crate::measure::PfcRecord| if r.received { "received" } else { "sent" };
    t.push(
        "direction",
        Column::Str(recs.iter().map(|r| dir(r).to_string()).collect()),
    );
    t
}

#[derive(Default)]
struct FlowCols {
    id: Vec<u64>,
    kind: Vec<String>,
    src: Vec<u64>,
    dst: Vec<u64>,
    size: Vec<u64>,
    start: Vec<i64>,
    finish: Vec<i64>,
    fct: Vec<i64>,
    ideal: Vec<i64>,
    path_ideal: Vec<i64>,
    slowdown: Vec<f64>,
    goodput: Vec<f64>,
    sport: Vec<u64>,
    dport: Vec<u64>,
    path: Vec<String>,
    n_paths: Vec<u64>,
    path_set: Vec<String>,
    lat_p50: Vec<f64>,
    lat_p99: Vec<f64>,
}

#[derive(Default)]
struct MsgCols {
    host: Vec<u64>,
    qpn: Vec<u64>,
    dst: Vec<u64>,
    op: Vec<String>,
    bytes: Vec<u64>,
    post: Vec<u64>,
    complete: Vec<u64>,
    wr_id: Vec<u64>,
}
