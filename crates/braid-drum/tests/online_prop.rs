//! Property tests of the online solver: no input panics it, and a run is a function of its seed.

use braid_drum::online::build::instances;
use braid_drum::online::net::{NetConfig, TestNet};
use braid_drum::online::wire::{Body, Header, Kind, Message};
use braid_drum::online::{HostSolver, OnlineConfig};
use braid_drum::*;
use proptest::prelude::*;

fn small() -> Vec<braid_drum::online::LocalInstance> {
    let p = generate(&GenParams {
        n: 3,
        m: 3,
        two_sided: true,
        seed: 2,
        ..Default::default()
    });
    instances(&p).unwrap()
}

/// Every message a solver sends decodes and holds finite values.
fn drain_checked(h: &mut HostSolver) {
    while let Some((to, b)) = h.poll_transmit() {
        assert!(to != h.host());
        Message::decode(&b).expect("a solver sends well-formed messages");
    }
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        0.0..10.0f64,
        Just(0.0),
        Just(1e300),
        Just(f64::MIN_POSITIVE),
        (0.0..1.0f64).prop_map(|v| v * 1e200),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    let key = (0u32..4, 0u32..4);
    (
        0u8..3,
        any::<bool>(),
        any::<u32>(),
        prop_oneof![0u64..50, Just(u64::MAX)],
        prop::collection::vec((key, value(), value()), 0..8),
    )
        .prop_map(|(k, settled, epoch, round, items)| {
            let (kind, body) = match k {
                0 => (
                    Kind::Contrib,
                    Body::Contrib(items.iter().map(|(p, v, _)| (*p, *v)).collect()),
                ),
                1 => (
                    Kind::Reply,
                    Body::Reply(items.iter().map(|(p, a, b)| (*p, *a, *b - 5.0)).collect()),
                ),
                _ => (Kind::Idle, Body::Idle),
            };
            Message {
                header: Header {
                    kind,
                    settled,
                    epoch,
                    round,
                },
                body,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Arbitrary bytes: an error value or an accepted message, never a panic; the solver then
    /// still runs and sends only well-formed messages.
    #[test]
    fn arbitrary_bytes_never_panic(msgs in prop::collection::vec((0u32..4, prop::collection::vec(any::<u8>(), 0..80)), 1..12)) {
        let mut h = HostSolver::new(1, small().remove(1), OnlineConfig::default()).unwrap();
        h.handle_timeout(0);
        drain_checked(&mut h);
        for (t, (from, b)) in msgs.iter().enumerate() {
            let _ = h.handle_message(t as u64, *from, b);
            drain_checked(&mut h);
        }
        h.handle_timeout(1_000_000_000);
        drain_checked(&mut h);
    }

    /// Well-formed messages with any header and absurd (finite) values, including pairs the
    /// host knows: no panic, only finite rates and well-formed messages out.
    #[test]
    fn hostile_messages_never_panic(msgs in prop::collection::vec((0u32..3, message()), 1..16)) {
        let mut h = HostSolver::new(1, small().remove(1), OnlineConfig::default()).unwrap();
        h.handle_timeout(0);
        let mut now = 0;
        for (from, m) in &msgs {
            now += 50_000;
            let r = h.handle_message(now, *from, &m.encode());
            prop_assert!(r.is_ok() || *from == 1);
            drain_checked(&mut h);
            if let Some(t) = h.poll_timeout() {
                if t <= now { h.handle_timeout(now); drain_checked(&mut h); }
            }
        }
        for k in 0..20u64 {
            h.handle_timeout(now + (k + 1) * 1_000_000);
            drain_checked(&mut h);
        }
        if let Some(r) = h.rates() {
            prop_assert!(r.conns.iter().all(|c| c.x.is_finite() && c.z.is_finite() && c.x >= 0.0));
        }
    }

    /// The same scenario and seed give the same run, bit for bit.
    #[test]
    fn deterministic_for_any_seed(seed in any::<u64>(), loss in 0.0..0.3f64) {
        let run = || {
            let mut t = TestNet::new(small(), OnlineConfig::default(), NetConfig { loss, seed, jitter_ns: 6_000, ..Default::default() }).unwrap();
            let rep = t.run(5_000_000);
            let x: Vec<u64> = t.x().unwrap().iter().map(|v| v.to_bits()).collect();
            let s: Vec<_> = t.hosts.iter().map(|h| h.stats().clone()).collect();
            (rep, x, s)
        };
        let a = run();
        prop_assert!(a.0.quiescent);
        prop_assert_eq!(a, run());
    }
}
