//! Swift's equations (module docs of `swift.rs`), each checked against a value computed by hand
//! from them.

use super::*;

const LINE: u64 = 100_000_000_000;
const US: Time = S / 1_000_000;
const MSS: u32 = 1048;

fn ack(newly: u32, rtt: Option<Time>, endpoint: Time) -> AckSignal {
    AckSignal {
        cum: 0,
        newly_acked: newly,
        ece: false,
        rtt,
        endpoint,
        snd_nxt: 0,
        mss: MSS,
    }
}

/// A Swift whose packet size is known and whose windows are both `c` packets.
fn at(c: f64, cfg: SwiftConfig) -> Swift {
    let mut x = Swift::new(LINE, &cfg);
    x.resolve_max(MSS as f64);
    x.fabric.cwnd = c;
    x.endpoint.cwnd = c;
    x
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
}

#[test]
fn the_target_grows_by_hop_scale_per_hop() {
    let c = SwiftConfig::default();
    // At fs_max_cwnd or above flow scaling adds nothing: the target is base + hops·h.
    assert!(close(c.fabric_target(1000.0), 15e-6));
    let three = SwiftConfig {
        hops: 3,
        ..c.clone()
    };
    assert!(close(three.fabric_target(1000.0), 15e-6 + 3.0 * 1e-6));
}

#[test]
fn the_target_grows_as_the_window_shrinks_up_to_fs_range() {
    let c = SwiftConfig::default();
    // α = 20 µs / (1/√0.1 − 1/√100), β′ = −α/10; at 1 packet the flow term is α + β′.
    let alpha = 20e-6 / (1.0 / 0.1f64.sqrt() - 0.1);
    let at_one = alpha * (1.0 - 0.1);
    assert!(close(c.fabric_target(1.0), 15e-6 + at_one));
    // At 25 packets: α/5 + β′.
    assert!(close(c.fabric_target(25.0), 15e-6 + alpha * (0.2 - 0.1)));
    // The ends of the range: all of fs_range at fs_min_cwnd (and below), nothing at fs_max.
    assert!(close(c.fabric_target(0.1), 35e-6));
    assert!(close(c.fabric_target(0.001), 35e-6));
    assert!(close(c.fabric_target(100.0), 15e-6));
}

#[test]
fn below_target_each_ack_adds_ai_over_cwnd_per_packet() {
    let mut x = at(10.0, SwiftConfig::default());
    x.on_ack(0, &ack(1, Some(5 * US), 0), &mut vec![]);
    // 10 + 1/10 in both windows.
    assert!(close(x.windows().0, 10.1), "{:?}", x.windows());
    assert!(close(x.windows().1, 10.1));
    // Two packets in one ACK: + 2·ai/cwnd.
    x.on_ack(0, &ack(2, Some(5 * US), 0), &mut vec![]);
    assert!(close(x.windows().0, 10.1 + 2.0 / 10.1));
    // Below one packet the increase is ai per packet acknowledged.
    let mut y = at(0.25, SwiftConfig::default());
    y.on_ack(0, &ack(1, Some(5 * US), 0), &mut vec![]);
    assert!(close(y.windows().0, 1.25));
}

#[test]
fn above_target_the_cut_is_beta_times_the_excess_bounded_by_max_mdf() {
    let c = SwiftConfig::default();
    // At 200 packets the target is the base, 15 µs; a 30 µs delay cuts by β·(30 − 15)/30.
    let mut x = at(200.0, c.clone());
    x.on_ack(0, &ack(1, Some(30 * US), 0), &mut vec![]);
    assert!(close(x.windows().0, 200.0 * (1.0 - 0.8 * 0.5)));
    // The endpoint window saw no endpoint delay: it grew.
    assert!(x.windows().1 > 200.0);
    // 150 µs: β·(150 − 15)/150 = 0.72 > max_mdf: the cut is max_mdf, a halving.
    let mut y = at(200.0, c);
    y.on_ack(0, &ack(1, Some(150 * US), 0), &mut vec![]);
    assert!(close(y.windows().0, 100.0));
}

#[test]
fn at_most_one_decrease_per_rtt() {
    let mut x = at(200.0, SwiftConfig::default());
    x.on_ack(0, &ack(1, Some(30 * US), 0), &mut vec![]);
    let w1 = x.windows().0;
    // Another high-delay ACK within the RTT (30 µs) leaves the window alone.
    x.on_ack(29 * US, &ack(1, Some(30 * US), 0), &mut vec![]);
    assert_eq!(x.windows().0, w1);
    assert_eq!(x.state(0).cuts, Some(1));
    // One RTT after the first cut the next may come.
    x.on_ack(30 * US, &ack(1, Some(30 * US), 0), &mut vec![]);
    assert!(x.windows().0 < w1);
    // A loss within that RTT cuts nothing either; after it, by max_mdf.
    let w2 = x.windows().0;
    x.on_loss(31 * US, &mut vec![]);
    assert_eq!(x.windows().0, w2);
    x.on_loss(60 * US, &mut vec![]);
    assert!(close(x.windows().0, w2 * 0.5));
}

#[test]
fn endpoint_delay_is_kept_apart_from_the_fabric_delay() {
    // 30 µs round trip of which 20 µs in the NICs: the fabric saw 10 µs (below its 15 µs
    // target: it grows), the endpoint 20 µs (above its 10 µs: cut by β·(20 − 10)/20).
    let mut x = at(200.0, SwiftConfig::default());
    x.on_ack(0, &ack(1, Some(30 * US), 20 * US), &mut vec![]);
    let (f, e) = x.windows();
    assert!(close(f, 200.0 + 1.0 / 200.0));
    assert!(close(e, 200.0 * (1.0 - 0.8 * 0.5)));
    // The QP sends within the smaller.
    assert_eq!(x.cwnd(), e);
    assert!(close(x.window().unwrap(), e * MSS as f64));
}

#[test]
fn below_one_packet_one_packet_flies_paced_rtt_over_cwnd() {
    let mut x = at(0.25, SwiftConfig::default());
    // A high delay, so no increase: it cuts (bounded) and leaves the window below one.
    x.on_ack(0, &ack(1, Some(200 * US), 0), &mut vec![]);
    let c = x.cwnd();
    assert!(c < 1.0 && close(c, 0.125), "{c}");
    // One packet in flight; one packet every rtt/cwnd = 1.6 ms: 1048·8 bits / 1.6 ms.
    assert!(close(x.window().unwrap(), MSS as f64));
    assert!(close(x.rate(), MSS as f64 * 8.0 / (200e-6 / 0.125)));
    // At or above one packet the window alone limits it: line rate.
    let y = at(2.0, SwiftConfig::default());
    assert_eq!(y.rate(), LINE as f64);
}

#[test]
fn the_window_stays_between_min_and_max_cwnd() {
    let mut x = at(0.0011, SwiftConfig::default());
    x.on_ack(0, &ack(1, Some(10_000 * US), 0), &mut vec![]);
    assert_eq!(x.cwnd(), 0.001);
    // The automatic maximum: line rate × (15 + 20) µs in packets.
    let top = 100e9 * 35e-6 / 8.0 / MSS as f64;
    let mut y = at(top - 0.001, SwiftConfig::default());
    y.on_ack(0, &ack(100, Some(US), 0), &mut vec![]);
    assert!(close(y.cwnd(), top));
}

#[test]
fn bad_values_name_the_key() {
    let c = SwiftConfig {
        max_mdf: 1.0,
        ..Default::default()
    };
    assert_eq!(c.check().unwrap_err().0, "max_mdf");
    let c = SwiftConfig {
        fs_min_cwnd: 200.0,
        ..Default::default()
    };
    assert_eq!(c.check().unwrap_err().0, "fs_min_cwnd");
}
