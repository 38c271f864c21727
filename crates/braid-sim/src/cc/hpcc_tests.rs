//! HPCC's equations (SIGCOMM'19, Algorithm 1), checked by hand-computed values.

use super::*;
use crate::net::int::IntHop;

const LINE: u64 = 100_000_000_000;
const US: Time = S / 1_000_000;
/// T = 10 µs at 100 Gbit/s: B·T = 125,000 bytes.
const BDP: f64 = 125_000.0;

fn cfg() -> HpccConfig {
    HpccConfig {
        base_rtt: Some(Duration(10 * US)),
        ..Default::default()
    }
}

fn ack(cum: u32, snd_nxt: u32) -> AckSignal {
    AckSignal {
        cum,
        newly_acked: 1,
        ece: false,
        rtt: None,
        snd_nxt,
        mss: 1048,
        endpoint: 0,
    }
}

fn hop(qlen: u64, tx_bytes: u64, ts: Time) -> IntHop {
    IntHop {
        qlen,
        tx_bytes,
        ts,
        rate_bps: LINE,
        port: 0,
    }
}

/// Feeds one ACK with the given records.
fn feed(h: &mut Hpcc, hops: &[IntHop], cum: u32, snd_nxt: u32) -> bool {
    h.on_int(0, &IntStack::from_hops(hops));
    h.on_ack(0, &ack(cum, snd_nxt), &mut vec![])
}

#[test]
fn u_is_the_busiest_links_queue_plus_tx_rate_folded_by_tau_over_t() {
    let mut h = Hpcc::new(LINE, &cfg());
    assert!((h.window().unwrap() - BDP).abs() < 1e-6);
    // First ACK: a snapshot to compare against, U unchanged.
    feed(&mut h, &[hop(50_000, 0, 0), hop(0, 0, 0)], 1, 1);
    assert_eq!(h.utilization(), 1.0);
    // 1 µs later. Hop 0: min(30,000, 50,000)/125,000 = 0.24 plus 11,875 B/µs over
    // 12.5 GB/s = 0.95: u = 1.19. Hop 1: idle, 5,000 B/µs = 0.4. The busiest is hop 0.
    feed(&mut h, &[hop(30_000, 11_875, US), hop(0, 5_000, US)], 1, 1);
    let want = (1.0 - 0.1) * 1.0 + 0.1 * 1.19;
    assert!((h.utilization() - want).abs() < 1e-9, "{}", h.utilization());
    // τ is capped at T: a record 20 µs later replaces U outright (τ/T = 1).
    feed(
        &mut h,
        &[hop(0, 11_875 + 125_000, 21 * US), hop(0, 5_000, 21 * US)],
        1,
        1,
    );
    // 125,000 B in 20 µs = 6.25 GB/s = 0.5 of the link.
    assert!((h.utilization() - 0.5).abs() < 1e-9, "{}", h.utilization());
}

#[test]
fn above_eta_the_window_is_cut_to_wc_over_u_over_eta_plus_w_ai() {
    let mut h = Hpcc::new(LINE, &cfg());
    feed(&mut h, &[hop(62_500, 0, 0)], 1, 1);
    // τ = T (10 µs): U becomes u. A 62,500-byte queue in both records (min: 0.5) and a full
    // link (1.0): u = 1.5.
    feed(&mut h, &[hop(62_500, 125_000, 10 * US)], 2, 10);
    let u = 1.5;
    assert!((h.utilization() - u).abs() < 1e-9);
    // W_AI = 50 Mbit/s × 10 µs = 62.5 bytes.
    let w = BDP / (u / 0.95) + 62.5;
    assert!((h.window().unwrap() - w).abs() < 1e-6, "{:?}", h.window());
    assert!(
        (h.reference_window() - w).abs() < 1e-6,
        "Wc updated: a new round"
    );
    assert!((h.rate() - w * 8.0 / 10e-6).abs() < 1.0, "R = W / T");
    assert_eq!(h.state(0).cuts, Some(1));
}

#[test]
fn below_eta_wc_grows_by_w_ai_per_round_for_max_stage_rounds_then_steps_multiplicatively() {
    let mut h = Hpcc::new(LINE, &cfg());
    let w_ai = 62.5;
    // Every round: 50% utilisation (τ = T, so U = 0.5 exactly), no queue.
    let mut ts = 0;
    let mut tx = 0;
    feed(&mut h, &[hop(0, tx, ts)], 0, 0);
    // Start from a window well below the cap so growth shows.
    h.wc = BDP / 4.0;
    h.w = h.wc;
    let mut wc = h.wc;
    for round in 1..=5u32 {
        ts += 10 * US;
        tx += 62_500;
        feed(&mut h, &[hop(0, tx, ts)], round * 10, round * 10 + 5);
        wc += w_ai;
        assert!((h.utilization() - 0.5).abs() < 1e-9);
        assert!(
            (h.reference_window() - wc).abs() < 1e-6,
            "round {round}: {} vs {wc}",
            h.reference_window()
        );
    }
    // Stage 5 = maxStage: the next round is multiplicative, Wc·η/U + W_AI.
    ts += 10 * US;
    tx += 62_500;
    feed(&mut h, &[hop(0, tx, ts)], 60, 65);
    let want = wc / (0.5 / 0.95) + w_ai;
    assert!((h.reference_window() - want).abs() < 1e-6);
    // And the stage starts again: the round after is additive.
    ts += 10 * US;
    tx += 62_500;
    feed(&mut h, &[hop(0, tx, ts)], 70, 75);
    assert!((h.reference_window() - (want + w_ai)).abs() < 1e-6);
}

#[test]
fn wc_is_updated_once_per_rtt_and_acks_within_it_start_from_the_same_wc() {
    let mut h = Hpcc::new(LINE, &cfg());
    h.wc = BDP / 4.0;
    h.w = h.wc;
    let wc0 = h.wc;
    feed(&mut h, &[hop(0, 0, 0)], 0, 0);
    // A new round (cum 5 > last update 0): Wc := Wc + W_AI; the round ends past PSN 50.
    feed(&mut h, &[hop(0, 62_500, 10 * US)], 5, 50);
    let wc1 = h.reference_window();
    assert!((wc1 - (wc0 + 62.5)).abs() < 1e-6);
    // Three more ACKs inside the round: W = Wc + W_AI each time, Wc unchanged.
    for (i, cum) in [10u32, 20, 50].into_iter().enumerate() {
        let t = (11 + i as u64) * US;
        feed(
            &mut h,
            &[hop(0, 62_500 + 6_250 * (i as u64 + 1), t)],
            cum,
            60,
        );
        assert_eq!(h.reference_window(), wc1, "ack {cum}");
        assert!((h.window().unwrap() - (wc1 + 62.5)).abs() < 1e-6);
    }
    // Past PSN 50: the next round updates Wc.
    feed(&mut h, &[hop(0, 62_500 + 25_000, 14 * US)], 51, 90);
    assert!(h.reference_window() > wc1);
}

#[test]
fn another_path_is_a_new_snapshot_not_a_measurement() {
    let mut h = Hpcc::new(LINE, &cfg());
    feed(&mut h, &[hop(0, 0, 0)], 1, 1);
    // Another length.
    feed(&mut h, &[hop(0, 0, 0), hop(90_000, 125_000, 10 * US)], 1, 1);
    assert_eq!(h.utilization(), 1.0);
    // Same length, another port at the second hop (a new flowlet).
    let mut moved = hop(90_000, 250_000, 20 * US);
    moved.port = 7;
    feed(&mut h, &[hop(0, 0, 20 * US), moved], 1, 1);
    assert_eq!(h.utilization(), 1.0);
    // Back on the first path: a snapshot, then a measurement (62,500 B in 10 µs: u = 0.5).
    feed(
        &mut h,
        &[hop(0, 0, 30 * US), hop(0, 250_000, 30 * US)],
        1,
        1,
    );
    assert_eq!(h.utilization(), 1.0);
    feed(
        &mut h,
        &[hop(0, 0, 40 * US), hop(0, 312_500, 40 * US)],
        1,
        1,
    );
    assert!((h.utilization() - 0.5).abs() < 1e-9, "{}", h.utilization());
}

#[test]
fn without_base_rtt_t_is_the_least_rtt_sampled_and_the_window_starts_at_one_bdp() {
    let mut h = Hpcc::new(LINE, &HpccConfig::default());
    assert!(h.window().unwrap().is_infinite());
    assert!(h.wants_rtt());
    let mut a = ack(1, 1);
    a.rtt = Some(10 * US);
    h.on_ack(0, &a, &mut vec![]);
    assert!((h.window().unwrap() - BDP).abs() < 1e-6);
    assert!((h.rate() - LINE as f64).abs() < 1.0);
}
