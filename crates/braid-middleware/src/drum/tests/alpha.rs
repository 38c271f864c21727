//! Every alpha the schema accepts carries traffic, with and without the CQ utility, under both
//! the local and the online decider; an alpha past the solver's range is refused by name.
//! (At alpha = 50 in ops/s units, w x^(1-alpha) is ~1e-340: the solve used to fail and the
//! agent posted nothing.)

use super::*;

fn run(cfg: &DrumConfig) -> (FakeNet, Vec<End>, Vec<End>) {
    let (mut net, a, b) = net_of(cfg, 2);
    let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL, false);
    for (i, e) in ea.iter().enumerate() {
        for k in 0..20 {
            net.call_as(H1, e.t, |v| {
                v.post_send(e.qp, write(e, &eb[i], k, 64 * k, 64))
            })
            .unwrap();
        }
    }
    net.run();
    (net, ea, eb)
}

#[test]
fn every_alpha_the_schema_accepts_carries_traffic() {
    for decider in [DeciderKind::Local, DeciderKind::Online] {
        for alpha in [0.05, 0.5, 1.0, 5.0, 20.0, 50.0, 99.0, 100.0] {
            for beta in [0.0, 1.0] {
                let cfg = DrumConfig {
                    alpha,
                    beta,
                    decider,
                    ..DrumConfig::default()
                };
                assert!(
                    cfg.check().is_ok(),
                    "alpha {alpha} is in the schema's range"
                );
                let (mut net, ea, _) = run(&cfg);
                for e in &ea {
                    let wcs = poll(&mut net, e);
                    assert_eq!(
                        wcs.len(),
                        20,
                        "{decider:?} alpha {alpha} beta {beta}: {} of 20 completed",
                        wcs.len()
                    );
                    assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
                }
                if decider == DeciderKind::Local {
                    assert_eq!(
                        counter(&net, H1, AGENT, "solve_failures"),
                        0.0,
                        "alpha {alpha} beta {beta}: the rates came from the solver, not a fallback"
                    );
                }
            }
        }
    }
}

#[test]
fn an_alpha_past_the_solvers_range_is_refused_by_name() {
    for alpha in [100.5, 1000.0, 1e300] {
        let cfg = DrumConfig {
            alpha,
            ..DrumConfig::default()
        };
        let e = cfg.check().expect_err("refused");
        assert_eq!(e.key, "alpha", "{e:?}");
    }
}
