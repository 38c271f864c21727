//! `braid-perftest TEST [options] [SERVER]`: perftest's benchmarks on a real RDMA device, run by
//! braid's own portable applications (`braid_apps::PerfClient`/`PerfServer`) through any braid
//! middleware stack. Server without SERVER, client with it; endpoints are exchanged over TCP on
//! perftest's port with braid's own exchange, which is not perftest's wire format: it cannot
//! pair with `ib_write_bw` and friends, only with another braid-perftest. Defaults are
//! perftest's: 2-byte messages for latency tests, 65536 for bandwidth tests, and perftest's CQ
//! moderation for bandwidth tests (a signaled completion every 100 messages up to 8 KiB, every
//! message above on RC/UC, at most the TX depth). Output: perftest's table, or one JSON object with `--json`.

use std::process::exit;

const USAGE: &str = "usage: braid-perftest write_bw|write_lat|send_bw|send_lat|read_bw|read_lat [-d DEV] [-x GID_INDEX] [-s BYTES] [-n ITERS] [-D SECONDS] [-q QPS] [-t TX_DEPTH] [-Q CQ_MOD] [-c RC|UC|UD] [-p PORT] [--busy-poll] [--report_gbits] [--middleware NAME[:KEY=VALUE...][,NAME...]] [--verify] [--json] [SERVER_ADDR]";

/// The tests this binary runs: perftest's, each braid's [`braid_apps::PerfKind`] of that name,
/// built by the same config (`braid_apps::PerfApp::new` over the keys every kind takes,
/// `braid_apps::AppCommon`) as a scenario's `[[apps]]` entry of the kind.
const TESTS: &[&str] = &[
    "write_bw",
    "write_lat",
    "send_bw",
    "send_lat",
    "read_bw",
    "read_lat",
];

#[derive(Debug, Clone)]
pub struct Opts {
    test: String,
    device: Option<String>,
    gid: Option<u8>,
    size: u64,
    cq_mod: Option<u32>,
    iters: Option<u64>,
    duration_s: Option<u64>,
    qps: u32,
    tx_depth: u32,
    port: u16,
    gbits: bool,
    middleware: Vec<String>,
    json: bool,
    busy_poll: bool,
    verify: bool,
    uc: bool,
    ud: bool,
    server: Option<String>,
}

fn bad(msg: String) -> ! {
    eprintln!("braid-perftest: {msg}");
    eprintln!("{USAGE}");
    exit(2)
}

fn parse(args: &[String]) -> Opts {
    let mut o = Opts {
        test: String::new(),
        device: None,
        gid: None,
        size: 0,
        cq_mod: None,
        iters: None,
        duration_s: None,
        qps: 1,
        tx_depth: 128,
        port: 18515,
        gbits: false,
        middleware: Vec::new(),
        json: false,
        busy_poll: false,
        verify: false,
        uc: false,
        ud: false,
        server: None,
    };
    let mut i = 0;
    fn num<T: std::str::FromStr>(flag: &str, v: Option<&String>, what: &str) -> T {
        match v.map(|s| s.parse::<T>()) {
            Some(Ok(x)) => x,
            _ => bad(format!(
                "{flag} expects {what}, got {:?}",
                v.map(String::as_str).unwrap_or("nothing")
            )),
        }
    }
    while i < args.len() {
        let a = args[i].as_str();
        let v = args.get(i + 1);
        let mut took = 2;
        match a {
            "-d" | "--ib-dev" => {
                o.device = Some(
                    v.cloned()
                        .unwrap_or_else(|| bad("-d expects a device name".into())),
                )
            }
            "-x" | "--gid-index" => o.gid = Some(num("-x", v, "a GID index (0-255)")),
            "-s" | "--size" => o.size = num("-s", v, "a message size in bytes (1 or more)"),
            "-Q" | "--cq-mod" => o.cq_mod = Some(num("-Q", v, "a CQ moderation (1 or more)")),
            "-n" | "--iters" => o.iters = Some(num("-n", v, "a number of iterations")),
            "-D" | "--duration" => o.duration_s = Some(num("-D", v, "a duration in whole seconds")),
            "-q" | "--qp" => o.qps = num("-q", v, "a number of QPs (1 or more)"),
            "-t" | "--tx-depth" => o.tx_depth = num("-t", v, "a send queue depth (1 or more)"),
            "-p" | "--port" => o.port = num("-p", v, "a TCP port"),
            "-c" | "--connection" => match v.map(String::as_str).unwrap_or("") {
                "RC" => (o.uc, o.ud) = (false, false),
                "UC" => (o.uc, o.ud) = (true, false),
                "UD" => (o.uc, o.ud) = (false, true),
                c => bad(format!("-c expects RC, UC or UD, got {c:?}")),
            },
            "--middleware" => {
                o.middleware = v
                    .unwrap_or_else(|| bad("--middleware expects NAME[,NAME]".into()))
                    .split(',')
                    .map(str::to_string)
                    .collect()
            }
            "--report_gbits" => {
                o.gbits = true;
                took = 1
            }
            "--json" => {
                o.json = true;
                took = 1
            }
            "--busy-poll" => {
                o.busy_poll = true;
                took = 1
            }
            "--verify" => {
                o.verify = true;
                took = 1
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                exit(0)
            }
            s if s.starts_with('-') => bad(format!("unknown option {s:?}")),
            s if o.test.is_empty() => {
                o.test = s.to_string();
                took = 1
            }
            s if o.server.is_none() => {
                o.server = Some(s.to_string());
                took = 1
            }
            s => bad(format!("unexpected argument {s:?}")),
        }
        i += took;
    }
    if o.test.is_empty() {
        bad("no test given".into());
    }
    if !TESTS.contains(&o.test.as_str()) {
        let (last, rest) = TESTS.split_last().expect("tests listed");
        bad(format!(
            "unknown test {:?} (expected {} or {last})",
            o.test,
            rest.join(", ")
        ));
    }
    if o.uc && o.test.starts_with("read") {
        bad(format!(
            "-c UC: {} needs RC (UC has no RDMA READ); UC runs write_bw, write_lat, send_bw and send_lat",
            o.test
        ));
    }
    if o.ud && !o.test.starts_with("send") {
        bad(format!(
            "-c UD: {} needs a connected QP; UD runs send_bw and send_lat",
            o.test
        ));
    }
    let lat = o.test.ends_with("_lat");
    if !args.iter().any(|a| a == "-s" || a == "--size") {
        // perftest's DEF_SIZE_LAT and DEF_SIZE_BW (perftest_parameters.h).
        o.size = if lat { 2 } else { 65536 };
    }
    if o.qps == 0 || o.tx_depth == 0 || o.size == 0 || o.cq_mod == Some(0) {
        bad("-q, -t, -s and -Q must be at least 1".into());
    }
    if lat && o.cq_mod.is_some_and(|m| m > 1) {
        bad("-Q: latency tests signal every message (perftest's CQ moderation is for bandwidth tests)".into());
    }
    if o.iters.is_some() && o.duration_s.is_some() {
        bad("-n and -D exclude each other".into());
    }
    o
}

/// A signaled completion every this many messages, as perftest chooses it
/// (`perftest_parameters.c`): `-Q`, else `DEF_CQ_MOD` (100) for bandwidth tests, but 1
/// (`DISABLED_CQ_MOD_VALUE`) for messages above `MSG_SIZE_CQ_MOD_LIMIT` (8192 B) on a connected
/// QP; at most the TX depth; latency tests signal every message.
// Used by the rdma backend's runner (and the tests) only.
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
fn cq_mod(o: &Opts) -> u32 {
    if o.test.ends_with("_lat") {
        return 1;
    }
    let default = if o.size > 8192 && !o.ud { 1 } else { 100 };
    o.cq_mod.unwrap_or(default).min(o.tx_depth)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = parse(&args);
    if let Some(why) = braid_rdma::unavailable() {
        eprintln!("braid-perftest: {why}");
        exit(1);
    }
    #[cfg(feature = "rdma")]
    exit(run::run(&o));
    #[cfg(not(feature = "rdma"))]
    let _ = o;
}

#[cfg(feature = "rdma")]
mod run {
    use super::Opts;
    use braid_apps::{
        peak_bandwidth, AppCommon, AppEnds, AppFactory, Meter, PerfApp, PerfKind, SplitMixDraws,
    };
    use braid_middleware::MiddlewareEntry;
    use braid_rdma::oob::{NetBoard, Oob, TcpBoard};
    use braid_rdma::real::{host::Host, nic::Nic};
    use braid_verbs::*;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;

    #[derive(Default)]
    struct Log {
        started: Option<u64>,
        finished: Option<u64>,
        bytes: u64,
        lat: Vec<u64>,
        /// Each message's post and completion times (bandwidth tests), for the peak.
        posted: Vec<u64>,
        completed: Vec<u64>,
    }
    impl Meter for Log {
        fn sending_qp(&mut self, _: u32, _: u32, _: QpNum) {}
        fn receiving_qp(&mut self, _: u32, _: u32, _: QpNum) {}
        fn landing_at(&mut self, _: u32, _: u32, _: u64) {}
        fn started(&mut self, _: u32, at: u64) {
            self.started = Some(at);
        }
        fn progress(&mut self, _: u32, b: u64) {
            self.bytes += b;
        }
        fn latency(&mut self, _: u32, ps: u64) {
            self.lat.push(ps);
        }
        fn finished(&mut self, _: u32, at: u64) {
            self.finished = Some(at);
        }
        fn message(&mut self, _: u32, posted: u64, completed: u64) {
            self.posted.push(posted);
            self.completed.push(completed);
        }
    }

    fn fail(msg: String) -> i32 {
        eprintln!("braid-perftest: {msg}");
        1
    }

    const BASE: u64 = 0x4000_0000;
    const LINE: &str =
        "---------------------------------------------------------------------------------------";

    pub fn run(o: &Opts) -> i32 {
        let kind = PerfKind::from_name(&o.test).expect("parse accepts only braid's perf kinds");
        let lat = matches!(
            kind,
            PerfKind::WriteLat | PerfKind::SendLat | PerfKind::ReadLat
        );
        // perftest reports half the round trip for WRITE and SEND latency, the whole one for READ.
        let lat_div = if kind == PerfKind::ReadLat { 1e6 } else { 2e6 };
        let qp_type = match (o.uc, o.ud) {
            (true, _) => QpType::Uc,
            (_, true) => QpType::Ud,
            _ => QpType::Rc,
        };
        // The keys every `[[apps]]` kind takes, from perftest's flags; the perftest kinds'
        // config (`PerfApp::new`, as a scenario's write_bw ... wqe_lat entries) checks them and
        // makes the factory.
        let common = AppCommon {
            size: o.size,
            qps: o.qps,
            tx_depth: if lat { 1 } else { o.tx_depth },
            iterations: o.iters.or(if o.duration_s.is_some() {
                None
            } else {
                Some(if lat { 1000 } else { 5000 })
            }),
            duration: o.duration_s.map(|s| s * 1_000_000_000_000),
            start: 0,
            cq_mod: super::cq_mod(o),
            priority: None,
        };
        let perf = match PerfApp::new(kind, &common, 1, 0.0) {
            Ok(p) => PerfApp { qp_type, ..p },
            Err(e) => return fail(format!("{}: {}", e.key, e.message)),
        };
        let nic = match Nic::open_with(o.device.as_deref(), o.gid) {
            Ok(n) => n,
            Err(e) => return fail(e.to_string()),
        };
        let (dev, gid, mtu) = (nic.name().to_string(), nic.gid_index(), nic.caps().mtu);
        if o.ud && o.size > mtu as u64 {
            eprintln!("braid-perftest: -s {}: a UD message must fit in one packet (the MTU of {dev} is {mtu} B)", o.size);
            return 2;
        }
        let mut host = Host::new(nic);
        let wait = Duration::from_secs(60);
        // Completion events by default; --busy-poll spins on the completion channel instead.
        host.busy_poll = o.busy_poll;
        // The run's board for host agents and layers that meet there (Justitia's pacer links,
        // partition's extra QPs): shared with the peer over TCP (port + 1), the server serving.
        let net_board = if o.middleware.is_empty() {
            None
        } else {
            let b = match &o.server {
                Some(addr) => NetBoard::join(addr, o.port + 1, Duration::from_secs(60)),
                None => NetBoard::serve(o.port + 1),
            };
            match b {
                Ok(b) => Some(b),
                Err(e) => {
                    return fail(format!("the agents' board on TCP port {}: {e}", o.port + 1))
                }
            }
        };
        let barrier = net_board.as_ref().map(|b| b.barrier_handle());
        // The middleware stack, built by each mechanism's config (its factory).
        let mut ctx = match net_board {
            Some(b) => host.ctx_with_board(b.shared()),
            None => host.ctx(),
        };
        let tenant = host.next_tenant();
        let mut layers: Vec<Box<dyn Middleware>> = Vec::new();
        for name in &o.middleware {
            let entry: MiddlewareEntry = match serde_json::from_value(middleware_json(name)) {
                Ok(e) => e,
                Err(e) => return fail(format!("--middleware {name:?}: {e}")),
            };
            match entry.0.factory().build(&mut ctx, tenant) {
                Ok(l) => layers.push(l),
                Err(e) => return fail(format!("--middleware {name}: {e}")),
            }
        }
        host.set_agent(ctx.take_agents());
        let board = Rc::new(RefCell::new(TcpBoard::default()));
        let log = Rc::new(RefCell::new(Log::default()));
        let settings = format!(
            "{} {} {} {} {}",
            o.test,
            o.size,
            o.qps,
            conn_type(o),
            o.middleware.join(",")
        );
        let is_client = o.server.is_some();
        // The app's config is its factory, as in a scenario; this process runs one of its ends.
        // No message is flagged, so nothing is drawn; the streams are there for the factory.
        let (server, client) = perf.build(AppEnds {
            index: 0,
            flow: 0,
            conn0: 0,
            meter: log.clone(),
            rdv: board.clone(),
            server_base: BASE,
            client_base: BASE,
            victim: None,
            draws: Rc::new(SplitMixDraws { seed: 0 }),
        });
        let app = if is_client { client } else { server };
        host.add_app(app, layers);
        let mut oob = match &o.server {
            Some(addr) => Oob::connect(addr, o.port, wait),
            None => Oob::accept(o.port, wait),
        }
        .unwrap_or_else(|e| {
            eprintln!(
                "braid-perftest: out-of-band connection on port {}: {e}",
                o.port
            );
            std::process::exit(1)
        });
        // Create and publish (start), exchange endpoints, then connect.
        host.start();
        // The data's source (the client, or the server for READ) fills its slots with a
        // pattern, for --verify.
        let region = o.size * o.qps as u64;
        let source = is_client != matches!(kind, PerfKind::ReadBw | PerfKind::ReadLat);
        if o.verify && source {
            if let Err(e) = host.nic.write_local(1, BASE, &pattern(region)) {
                return fail(format!("--verify: cannot fill the source buffer: {e}"));
            }
        }
        // What the layers published while starting is on the peer's board before it connects.
        if let Some(b) = &barrier {
            if !b.barrier(1, wait) {
                return fail(
                    "the peer's agents' board did not answer (does the peer run with --middleware too?)"
                        .into(),
                );
            }
        }
        let theirs = match oob.exchange(&mut board.borrow_mut(), &settings) {
            Ok(t) => t,
            Err(e) => return fail(format!("endpoint exchange: {e}")),
        };
        let (mine_t, their_t) = (
            settings.split(' ').take(4).collect::<Vec<_>>(),
            theirs.split(' ').take(4).collect::<Vec<_>>(),
        );
        if mine_t != their_t {
            return fail(format!(
                "the peer runs {theirs:?}, this side {settings:?}: test, size, QPs and connection type must match"
            ));
        }
        let limit = Duration::from_secs(o.duration_s.unwrap_or(0) + 600);
        if !is_client {
            // Connect (the app's first timer), tell the client, serve until it is done.
            host.run_until(Duration::from_secs(30), |h| h.events >= 1);
            if let Err(e) = oob.send("ready") {
                return fail(format!("out of band: {e}"));
            }
            host.run_until(limit, |_| oob_ready(&mut oob));
            let done = oob.recv().unwrap_or_default();
            // Let the last completions and the layers' bookkeeping settle.
            host.run_until(Duration::from_millis(200), |_| false);
            let mut rc = 0;
            if let Some(theirs) = done.strip_prefix("done ") {
                let mine = region_sum(&host, region);
                let ok = theirs == mine;
                let _ = oob.send(if ok { "verify ok" } else { "verify mismatch" });
                if !ok {
                    eprintln!("braid-perftest: --verify: the bytes here (fnv {mine}) differ from the source's (fnv {theirs})");
                    rc = 1;
                }
            }
            if !o.json {
                header(o, &dev, gid, mtu);
                print_counters(&host);
            }
            return rc;
        }
        match oob.recv() {
            Ok(l) if l == "ready" => {}
            r => return fail(format!("the server did not get ready: {r:?}")),
        }
        let end = host.run(limit);
        host.run_until(Duration::from_millis(200), |_| false);
        let verified = if o.verify {
            let _ = oob.send(&format!("done {}", region_sum(&host, region)));
            match oob.recv() {
                Ok(r) if r == "verify ok" => Some(true),
                r => {
                    eprintln!("braid-perftest: --verify: the receiver's bytes differ from the source's ({r:?})");
                    Some(false)
                }
            }
        } else {
            let _ = oob.send("done");
            None
        };
        let bad_bytes = i32::from(verified == Some(false));
        let mut l = log.borrow_mut();
        // perftest's peak: the k-th post against the k-th completion, both in time order.
        l.posted.sort_unstable();
        l.completed.sort_unstable();
        let peak = peak_bandwidth(&l.posted, &l.completed, o.size);
        let (Some(t0), Some(t1)) = (l.started, l.finished) else {
            // Say why: the device's error completions and the layers' counters.
            for e in host.nic.error_completions() {
                eprintln!("braid-perftest: error completion: {e}");
            }
            for (t, layer, k, x) in host.counters() {
                eprintln!("braid-perftest: counter {t}.{layer}.{k} = {x}");
            }
            return fail(format!(
                "the test did not finish ({end:?}; {} error completions, first: {})",
                host.nic.error_completions().len(),
                host.nic
                    .error_completions()
                    .first()
                    .map_or("none", String::as_str)
            ));
        };
        let secs = (t1 - t0) as f64 / 1e12;
        let msgs = l.bytes / o.size;
        if o.json {
            let mut j = serde_json::json!({"test": o.test, "device": dev, "gid_index": gid,
                "bytes": o.size, "qps": o.qps, "iterations": msgs / o.qps as u64,
                "middleware": o.middleware, "seconds": secs});
            if let Some(v) = verified {
                j["verified"] = v.into();
            }
            let mut c = serde_json::Map::new();
            for (t, layer, k, x) in host.counters() {
                c.insert(format!("{t}.{layer}.{k}"), x.into());
            }
            j["counters"] = c.into();
            if lat {
                let mut v: Vec<f64> = l.lat.iter().map(|&p| p as f64 / lat_div).collect();
                v.sort_by(f64::total_cmp);
                j["t_avg_usec"] = (v.iter().sum::<f64>() / v.len().max(1) as f64).into();
                j["t_min_usec"] = v.first().copied().unwrap_or(0.0).into();
                j["t_max_usec"] = v.last().copied().unwrap_or(0.0).into();
            } else {
                j["bw_avg_gbps"] = (l.bytes as f64 * 8.0 / secs / 1e9).into();
                j["bw_peak_gbps"] = (peak * 8.0 / 1e9).into();
                j["msg_rate_mpps"] = (msgs as f64 / secs / 1e6).into();
            }
            println!("{j}");
            return bad_bytes;
        }
        header(o, &dev, gid, mtu);
        if lat {
            // perftest reports half the round trip.
            let mut v: Vec<f64> = l.lat.iter().map(|&p| p as f64 / lat_div).collect();
            v.sort_by(f64::total_cmp);
            let n = v.len().max(1);
            let avg = v.iter().sum::<f64>() / n as f64;
            let sd = (v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / n as f64).sqrt();
            let pct = |p: f64| {
                v.get(((n as f64 * p) as usize).min(n - 1))
                    .copied()
                    .unwrap_or(0.0)
            };
            println!(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ");
            println!(
                " {:<7}{:<10}     {:<7.2}        {:<7.2}      {:<7.2}     \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2}  \t\t{:<7.2}",
                o.size, v.len(), v.first().unwrap_or(&0.0), v.last().unwrap_or(&0.0), pct(0.5), avg, sd, pct(0.99), pct(0.999)
            );
        } else {
            let unit_of = |bytes_per_s: f64| {
                if o.gbits {
                    bytes_per_s * 8.0 / 1e9
                } else {
                    bytes_per_s / (1 << 20) as f64
                }
            };
            let bw = unit_of(l.bytes as f64 / secs);
            let peak = unit_of(peak);
            let unit = if o.gbits { "Gb/sec" } else { "MB/sec" };
            println!(
                " #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]"
            );
            // Peak: the best run of consecutive messages (peak_bandwidth), as perftest's.
            println!(
                " {:<7}    {:<7}          {:<7.2}            {:<7.2}\t\t   {:<7.6}",
                o.size,
                msgs / o.qps as u64,
                peak,
                bw,
                msgs as f64 / secs / 1e6
            );
        }
        println!("{LINE}");
        if let Some(v) = verified {
            println!(
                " Verify          : {}",
                if v {
                    "byte-exact at the receiver"
                } else {
                    "MISMATCH"
                }
            );
        }
        print_counters(&host);
        bad_bytes
    }

    /// The source's pattern: xorshift bytes, so a misplaced or missing chunk shows.
    fn pattern(len: u64) -> Vec<u8> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    /// FNV-1a of the application's slots (tenant 1).
    fn region_sum(host: &Host, len: u64) -> String {
        match host.nic.read_local(1, BASE, len) {
            Ok(b) => {
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for x in b {
                    h = (h ^ x as u64).wrapping_mul(0x100_0000_01b3);
                }
                format!("{h:016x}")
            }
            Err(e) => format!("unreadable:{e}"),
        }
    }

    fn print_counters(host: &Host) {
        for (t, layer, k, x) in host.counters() {
            println!(" Counter         : {t}.{layer}.{k} = {x}");
        }
    }

    /// `NAME[:KEY=VALUE...]` as a scenario's middleware entry (values are JSON where they parse,
    /// strings otherwise: `partition:qps=2:chunk=16KiB`).
    fn middleware_json(spec: &str) -> serde_json::Value {
        let mut parts = spec.split(':');
        let mut m = serde_json::Map::new();
        m.insert("kind".into(), parts.next().unwrap_or_default().into());
        for kv in parts {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let v = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::from(v));
            m.insert(k.to_string(), v);
        }
        m.into()
    }

    fn conn_type(o: &Opts) -> &'static str {
        match (o.uc, o.ud) {
            (true, _) => "UC",
            (_, true) => "UD",
            _ => "RC",
        }
    }

    fn oob_ready(o: &mut Oob) -> bool {
        o.ready()
    }

    fn header(o: &Opts, dev: &str, gid: u8, mtu: u32) {
        let title = match o.test.as_str() {
            "write_bw" => "RDMA_Write BW Test",
            "write_lat" => "RDMA_Write Latency Test",
            "send_bw" => "Send BW Test",
            "send_lat" => "Send Latency Test",
            "read_lat" => "RDMA_Read Latency Test",
            _ => "RDMA_Read BW Test",
        };
        println!("{LINE}");
        println!("                    {title} (braid)");
        println!(" Number of qps   : {}\t\tTransport type : IB", o.qps);
        println!(
            " Connection type : {}\t\tDevice         : {dev}",
            conn_type(o)
        );
        let depth = if o.test.ends_with("_lat") {
            1
        } else {
            o.tx_depth
        };
        println!(" TX depth        : {depth}");
        println!(" CQ Moderation   : {}", super::cq_mod(o));
        println!(" Mtu             : {mtu}[B]");
        println!(" Link type       : Ethernet");
        println!(" GID index       : {gid}");
        println!(
            " Middleware      : {}",
            if o.middleware.is_empty() {
                "none".to_string()
            } else {
                o.middleware.join(",")
            }
        );
        println!("{LINE}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> Opts {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    /// perftest's defaults (perftest_parameters.h/.c): DEF_SIZE_LAT 2, DEF_SIZE_BW 65536,
    /// DEF_CQ_MOD 100, disabled (1) above MSG_SIZE_CQ_MOD_LIMIT 8192 on RC/UC, -Q wins, the TX
    /// depth caps it; what Debian's ib_write_bw printed beside braid-perftest on rxe0.
    #[test]
    fn defaults_are_perftests() {
        assert_eq!(opts(&["write_lat"]).size, 2);
        assert_eq!(opts(&["send_lat"]).size, 2);
        assert_eq!(opts(&["write_bw"]).size, 65536);
        assert_eq!(cq_mod(&opts(&["write_bw", "-s", "4096"])), 100);
        assert_eq!(cq_mod(&opts(&["write_bw"])), 1);
        assert_eq!(cq_mod(&opts(&["write_bw", "-s", "8192"])), 100);
        assert_eq!(cq_mod(&opts(&["write_bw", "-s", "8193", "-c", "UC"])), 1);
        assert_eq!(cq_mod(&opts(&["send_bw", "-s", "1024", "-c", "UD"])), 100);
        assert_eq!(cq_mod(&opts(&["write_bw", "-Q", "7"])), 7);
        assert_eq!(cq_mod(&opts(&["write_bw", "-s", "4096", "-t", "16"])), 16);
        assert_eq!(cq_mod(&opts(&["write_lat", "-s", "4096"])), 1);
    }
}
