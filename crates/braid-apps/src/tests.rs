//! The applications run unchanged over another verbs backend: the in-process fake NIC.
use crate::*;
use braid_verbs::testing::FakeNet;
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Default)]
pub(crate) struct Log {
    pub bytes: u64,
    pub lat: Vec<u64>,
    pub finished: Option<u64>,
    pub started: Option<u64>,
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
}

fn run(kind: PerfKind, size: u64, iterations: u64) -> Log {
    run_on(kind, size, iterations, QpType::Rc)
}

pub(crate) fn run_on(kind: PerfKind, size: u64, iterations: u64, t: QpType) -> Log {
    let log = Rc::new(RefCell::new(Log::default()));
    let meter: SharedMeter = log.clone();
    let rdv = braid_verbs::rendezvous::board();
    let spec = PerfSpec {
        kind,
        size,
        qps: 2,
        tx_depth: 4,
        iterations: Some(iterations),
        duration: None,
        start: 0,
        cq_mod: 1,
        post_list: 1,
        priority: None,
    };
    let mut net = FakeNet::new(2);
    let h = net.hosts();
    net.add_tenant(
        h[1],
        Box::new(
            PerfServer::new(spec.clone(), 0, 0, meter.clone(), rdv.clone(), 1 << 40)
                .with_qp_type(t),
        ),
        vec![],
    );
    net.add_tenant(
        h[0],
        Box::new(PerfClient::new(spec, 0, 0, meter, rdv, 1 << 40, None).with_qp_type(t)),
        vec![],
    );
    net.run();
    let out = std::mem::take(&mut *log.borrow_mut());
    out
}

#[test]
fn perftest_apps_run_on_the_fake_nic() {
    for kind in [PerfKind::WriteBw, PerfKind::SendBw, PerfKind::ReadBw] {
        let l = run(kind, 4096, 50);
        assert_eq!(l.bytes, 2 * 50 * 4096, "{kind:?}");
        assert!(l.finished.is_some() && l.started.is_some(), "{kind:?}");
    }
    // kv: GETs (READs) and PUTs (WRITEs) of drawn sizes, every request a latency sample.
    {
        let log = Rc::new(RefCell::new(Log::default()));
        let meter: SharedMeter = log.clone();
        let rdv = braid_verbs::rendezvous::board();
        let spec = PerfSpec {
            kind: PerfKind::ReadBw,
            size: 4096,
            qps: 3,
            tx_depth: 2,
            iterations: Some(10),
            duration: None,
            start: 0,
            cq_mod: 1,
            post_list: 1,
            priority: None,
        };
        let mut net = FakeNet::new(2);
        let h = net.hosts();
        net.add_tenant(
            h[1],
            Box::new(PerfServer::new(
                spec.clone(),
                0,
                0,
                meter.clone(),
                rdv.clone(),
                1 << 40,
            )),
            vec![],
        );
        let mut k = 0u64;
        let mut want = 0u64;
        let sizes: Vec<(bool, u64)> = (0..30).map(|j| (j % 3 != 0, 32 + 100 * j as u64)).collect();
        for s in &sizes {
            want += s.1;
        }
        let draw: KvDraw = Box::new(move || {
            let s = sizes[k as usize % sizes.len()];
            k += 1;
            s
        });
        net.add_tenant(
            h[0],
            Box::new(KvClient::new(spec, 0, 0, meter, rdv, 1 << 40, draw)),
            vec![],
        );
        net.run();
        let l = log.borrow();
        assert_eq!(l.lat.len(), 30);
        assert_eq!(l.bytes, want);
        assert!(l.finished.is_some());
        assert!(l.lat.iter().all(|&x| x >= 4_000_000));
    }
    // wqe_lat: every WRITE's post-to-completion time, at least the fake's round trip.
    let l = run(PerfKind::WqeLat, 32, 25);
    assert_eq!(l.lat.len(), 2 * 25);
    assert_eq!(l.bytes, 2 * 25 * 32);
    assert!(l.lat.iter().all(|&x| x >= 4_000_000), "{:?}", &l.lat[..4]);
    // read_lat: every READ's round trip, bytes read back.
    let l = run(PerfKind::ReadLat, 64, 10);
    assert_eq!(l.lat.len(), 2 * 10);
    assert_eq!(l.bytes, 2 * 10 * 64);
    assert!(l.lat.iter().all(|&x| x >= 4_000_000), "{:?}", &l.lat[..4]);
    let l = run(PerfKind::WriteLat, 16, 20);
    assert_eq!(l.lat.len(), 2 * 20);
    // Two one-way latencies of the fake (2 µs each) per round trip, at least.
    assert!(l.lat.iter().all(|&x| x >= 4_000_000), "{:?}", &l.lat[..4]);
}

#[test]
fn uc_qps_carry_write_and_send_tests_and_ud_qps_send_bw() {
    for kind in [PerfKind::WriteBw, PerfKind::SendBw, PerfKind::WriteLat] {
        let l = run_on(kind, 4096, 20, QpType::Uc);
        assert_eq!(l.bytes, 2 * 20 * 4096, "{kind:?}");
        assert!(l.finished.is_some(), "{kind:?}");
    }
    let l = run_on(PerfKind::SendBw, 512, 20, QpType::Ud);
    assert_eq!(l.bytes, 2 * 20 * 512);
    assert!(l.finished.is_some());
}

#[test]
fn send_lat_ping_pongs_sends_over_rc_uc_and_ud() {
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        let l = run_on(PerfKind::SendLat, 64, 20, t);
        // One sample per round trip, on each of the two QPs.
        assert_eq!(l.lat.len(), 2 * 20, "{t:?}");
        assert_eq!(l.bytes, 2 * 20 * 64, "{t:?}");
        assert!(l.finished.is_some(), "{t:?}");
        // A round trip is two one-way latencies of the fake (2 µs each), at least.
        assert!(
            l.lat.iter().all(|&x| x >= 4_000_000),
            "{t:?} {:?}",
            &l.lat[..4]
        );
        // Deterministic: the same run gives the same samples.
        assert_eq!(run_on(PerfKind::SendLat, 64, 20, t).lat, l.lat, "{t:?}");
    }
}

#[test]
fn peak_bandwidth_is_the_best_run_of_consecutive_messages() {
    const US: u64 = 1_000_000;
    // A pipelined stream: message k posted at k*T, completed L later. The best run is the whole
    // stream, n messages in (n-1)*T + L (analytically: n*size/((n-1)T+L), below size/T).
    let (n, t, l, size) = (50u64, 2 * US, 7 * US, 4096u64);
    let posted: Vec<u64> = (0..n).map(|k| k * t).collect();
    let completed: Vec<u64> = posted.iter().map(|p| p + l).collect();
    let want = n as f64 * size as f64 / (((n - 1) * t + l) as f64 / 1e12);
    let got = peak_bandwidth(&posted, &completed, size);
    assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
    // Three messages posted together complete slowly, a fourth alone fast: its own interval
    // (1000 B in 1 µs) is the peak, above the run's average (4000 B in 11 µs).
    let posted = [0, 0, 0, 10 * US];
    let completed = [5 * US, 6 * US, 7 * US, 11 * US];
    let got = peak_bandwidth(&posted, &completed, 1000);
    assert!((got - 1e9).abs() < 1e-3, "{got}");
    // Past 10 000 messages only every 100th is tried; a steady stream still gives its rate.
    let posted: Vec<u64> = (0..20_000u64).map(|k| k * US).collect();
    let completed: Vec<u64> = posted.iter().map(|p| p + US).collect();
    let got = peak_bandwidth(&posted, &completed, 1000);
    assert!((got - 1e9).abs() < 1e-6 * 1e9, "{got}");
    assert_eq!(peak_bandwidth(&[], &[], 1000), 0.0);
}
