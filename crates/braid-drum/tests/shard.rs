//! The sharded ADMM (ranks as threads, each holding only its hosts) against the local solve.

use braid_drum::comm::ThreadComm;
use braid_drum::*;

/// Run `pieces[r]` on rank r (one thread each) and return every rank's outcome.
fn run_ranks(pieces: Vec<Piece>, opt: AdmmOptions) -> Vec<Result<ShardResult, DrumError>> {
    let comms = ThreadComm::group(pieces.len());
    let handles: Vec<_> = pieces
        .into_iter()
        .zip(comms)
        .map(|(pc, mut c)| {
            let o = opt.clone();
            std::thread::spawn(move || solve_sharded(&pc, o, &mut c))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn split(n: usize, size: usize) -> Vec<(usize, usize)> {
    (0..size)
        .map(|r| (r * n / size, (r + 1) * n / size))
        .collect()
}

fn gen(n: usize, m: usize, two: bool, seed: u64) -> GenParams {
    GenParams {
        n,
        m,
        two_sided: two,
        seed,
        ..Default::default()
    }
}

fn opts(loss: f64) -> AdmmOptions {
    AdmmOptions {
        trace: false,
        loss_prob: loss,
        loss_seed: 3,
        ..Default::default()
    }
}

/// Concatenate the ranks' x and check the global figures agree across ranks.
fn joined(res: &[Result<ShardResult, DrumError>]) -> (Vec<f64>, &ShardResult) {
    let r0 = res[0].as_ref().unwrap();
    let mut x = Vec::new();
    for r in res {
        let r = r.as_ref().unwrap();
        assert_eq!(r.iterations, r0.iterations);
        assert_eq!(
            r.objective_feasible.to_bits(),
            r0.objective_feasible.to_bits()
        );
        x.extend_from_slice(&r.x);
    }
    (x, r0)
}

#[test]
fn generated_pieces_are_the_instance() {
    for two in [false, true] {
        let g = gen(23, 7, two, 9);
        let full = generate(&g);
        let pieces: Vec<Piece> = split(23, 3)
            .into_iter()
            .map(|(a, b)| Piece::generate(&g, a, b))
            .collect();
        let cat = |f: &dyn Fn(&Problem) -> Vec<f64>| -> Vec<f64> {
            pieces.iter().flat_map(|pc| f(&pc.p)).collect()
        };
        assert_eq!(cat(&|p| p.w.clone()), full.w);
        assert_eq!(cat(&|p| p.a.clone()), full.a);
        assert_eq!(cat(&|p| p.q_cap.clone()), full.q_cap);
        assert_eq!(cat(&|p| p.c_cap.clone()), full.c_cap);
        if two {
            let t = full.traffic.as_ref().unwrap();
            let dst: Vec<u32> = pieces
                .iter()
                .flat_map(|pc| pc.p.traffic.as_ref().unwrap().dst.clone())
                .collect();
            assert_eq!(dst, t.dst);
            assert_eq!(cat(&|p| p.traffic.as_ref().unwrap().frac.clone()), t.frac);
        }
    }
}

#[test]
fn one_sided_sharded_equals_local_bit_for_bit() {
    let g = gen(37, 12, false, 5);
    let local = solve_admm(&generate(&g), opts(0.0)).unwrap();
    for size in [1, 2, 3, 4] {
        let pieces = split(37, size)
            .into_iter()
            .map(|(a, b)| Piece::generate(&g, a, b))
            .collect();
        let res = run_ranks(pieces, opts(0.0));
        let (x, r0) = joined(&res);
        assert!(r0.converged);
        assert_eq!(r0.iterations, local.iterations, "{size} ranks");
        assert_eq!(x, local.x, "{size} ranks");
        assert!((r0.objective_feasible - local.objective_feasible).abs() < 1e-9 * r0.weight_sum);
        assert_eq!(r0.values_sent, (0, 0));
    }
}

#[test]
fn two_sided_sharded_equals_local() {
    for loss in [0.0, 0.1] {
        let g = gen(37, 12, true, 5);
        let local = solve_admm(&generate(&g), opts(loss)).unwrap();
        for size in [1, 2, 3, 4] {
            let pieces = split(37, size)
                .into_iter()
                .map(|(a, b)| Piece::generate(&g, a, b))
                .collect();
            let res = run_ranks(pieces, opts(loss));
            let (x, r0) = joined(&res);
            assert!(r0.converged);
            assert_eq!(r0.iterations, local.iterations, "{size} ranks, loss {loss}");
            let err = x
                .iter()
                .zip(&local.x)
                .map(|(a, b)| (a - b).abs() / b.abs().max(1e-300))
                .fold(0.0, f64::max);
            // measured ~1e-15 (rows fed twice by one later rank are added in another order)
            assert!(err < 1e-12, "{size} ranks: max relative difference {err}");
            let d = (r0.objective_feasible - local.objective_feasible).abs() / r0.weight_sum;
            assert!(d < 1e-12, "{size} ranks: objective differs by {d}");
            let db = (r0.dual_bound.unwrap() - local.dual_bound.unwrap()).abs() / r0.weight_sum;
            assert!(db < 1e-9, "{size} ranks: dual bound differs by {db}");
            if size > 1 {
                assert!(r0.values_sent.0 > 0 && r0.values_sent.1 > 0);
            }
        }
    }
}

/// The sharded solve's objective trace, reference gap and certified gap (with the stop on it)
/// are the local solve's: the same checks at the same iterations, the same stopping iteration,
/// values equal to rounding. Both operation types, with a lost result.
#[test]
fn sharded_certified_stop_and_trace_equal_local() {
    for two in [false, true] {
        let g = gen(37, 12, two, 5);
        let p = generate(&g);
        let exact = solve_admm(
            &p,
            AdmmOptions {
                stop: StopRule::None,
                max_iter: 3000,
                trace: false,
                ..Default::default()
            },
        )
        .unwrap();
        let o = AdmmOptions {
            trace: true,
            reference: Some(exact.objective_feasible),
            certify_every: 5,
            certified_gap_tol: Some(1e-4),
            eps_abs: 0.0,
            eps_rel: 0.0,
            loss_prob: 0.1,
            loss_seed: 3,
            ..Default::default()
        };
        let local = solve_admm(&p, o.clone()).unwrap();
        let lt = &local.trace;
        assert!(local.converged && !lt.certified_gap.is_empty(), "{two}");
        assert!(*lt.certified_gap.last().unwrap() <= 1e-4);
        for size in [1, 3] {
            let pieces = split(37, size)
                .into_iter()
                .map(|(a, b)| Piece::generate(&g, a, b))
                .collect();
            let res = run_ranks(pieces, o.clone());
            let (_, r0) = joined(&res);
            let t = &r0.trace;
            assert!(r0.converged);
            assert_eq!(r0.iterations, local.iterations, "two {two}, {size} ranks");
            assert_eq!(t.certified_iter, lt.certified_iter);
            let close = |a: &[f64], b: &[f64], tol: f64, what: &str| {
                assert_eq!(a.len(), b.len(), "{what}");
                for (k, (x, y)) in a.iter().zip(b).enumerate() {
                    assert!((x - y).abs() <= tol, "{what}[{k}]: {x} vs {y}");
                }
            };
            let w = r0.weight_sum;
            close(&t.certified_gap, &lt.certified_gap, 1e-9, "certified gap");
            close(&t.gap, &lt.gap, 1e-9, "gap");
            let of: Vec<f64> = t.objective_feasible.iter().map(|f| f / w).collect();
            let lof: Vec<f64> = lt.objective_feasible.iter().map(|f| f / w).collect();
            close(&of, &lof, 1e-9, "objective_feasible");
            assert_eq!(t.objective.len(), r0.iterations);
            for r in &res {
                let r = r.as_ref().unwrap();
                assert_eq!(
                    r.trace.certified_gap, t.certified_gap,
                    "every rank has the same trace"
                );
            }
        }
    }
}

/// The relative certificate (`certified_rel_gap_tol`, issue 31 §1 large α) in the sharded solve
/// is the local solve's: the same checks, the same stopping iteration, values equal to rounding.
/// α = 10 with a binding CQE capacity, both operation types.
#[test]
fn sharded_relative_certified_stop_equals_local() {
    for two in [false, true] {
        let g = GenParams {
            alpha: 10.0,
            c_range: (2.0, 6.0),
            ..gen(37, 12, two, 5)
        };
        let p = generate(&g);
        let o = AdmmOptions {
            trace: false,
            certify_every: 5,
            certified_rel_gap_tol: Some(1e-4),
            stop: StopRule::None,
            max_iter: 1000,
            ..Default::default()
        };
        let local = solve_admm(&p, o.clone()).unwrap();
        let lt = &local.trace;
        assert!(local.converged, "two {two}: not certified");
        assert_eq!(lt.certified_rel_gap.len(), lt.certified_iter.len());
        assert!(*lt.certified_rel_gap.last().unwrap() <= 1e-4);
        for size in [1, 3] {
            let pieces = split(37, size)
                .into_iter()
                .map(|(a, b)| Piece::generate(&g, a, b))
                .collect();
            let res = run_ranks(pieces, o.clone());
            let (_, r0) = joined(&res);
            let t = &r0.trace;
            assert!(r0.converged);
            assert_eq!(r0.iterations, local.iterations, "two {two}, {size} ranks");
            assert_eq!(t.certified_iter, lt.certified_iter);
            for (k, (x, y)) in t
                .certified_rel_gap
                .iter()
                .zip(&lt.certified_rel_gap)
                .enumerate()
            {
                assert!(
                    (x - y).abs() <= 1e-9 * y.abs().max(1e-6),
                    "[{k}]: {x} vs {y}"
                );
            }
        }
    }
}

/// Guarantees, preemption and a top-k set, cut out of a whole problem (the scatter path).
#[test]
fn sliced_problem_with_sets_equals_local() {
    let g = GenParams {
        k: Some(5),
        ..gen(20, 8, true, 2)
    };
    let mut p = generate(&g);
    let nn = p.entries();
    p.guarantee = (0..nn)
        .map(|k| {
            if p.is_active(k) && k % 3 == 0 {
                0.5
            } else {
                0.0
            }
        })
        .collect();
    p.preempt = (0..nn)
        .map(|k| if k % 4 == 0 { 0.3 } else { 0.0 })
        .collect();
    p.validate().unwrap();
    let local = solve_admm(&p, opts(0.0)).unwrap();
    let pieces = split(20, 3)
        .into_iter()
        .map(|(a, b)| Piece::slice(&p, a, b).unwrap())
        .collect();
    let res = run_ranks(pieces, opts(0.0));
    let (x, r0) = joined(&res);
    assert_eq!(r0.iterations, local.iterations);
    for (a, b) in x.iter().zip(&local.x) {
        assert!((a - b).abs() <= 1e-10 * b.abs().max(1e-12), "{a} vs {b}");
    }
}

/// Bad input on one rank is reported on every rank (nobody is left waiting).
#[test]
fn one_bad_piece_fails_every_rank() {
    let g = gen(12, 4, true, 1);
    let mut pieces: Vec<Piece> = split(12, 3)
        .into_iter()
        .map(|(a, b)| Piece::generate(&g, a, b))
        .collect();
    let mut p = (*pieces[1].p).clone();
    p.q_cap[1] = -1.0;
    pieces[1] = Piece::new(p, pieces[1].h0, 12);
    let res = run_ranks(pieces, opts(0.0));
    for r in &res {
        let e = r.as_ref().unwrap_err();
        assert_eq!(e.param, "Q");
        assert!(e.msg.contains("host 5"), "{}", e.msg);
    }
    // pieces that do not tile the instance
    let pieces = vec![Piece::generate(&g, 0, 5), Piece::generate(&g, 6, 12)];
    for r in run_ranks(pieces, opts(0.0)) {
        assert_eq!(r.unwrap_err().param, "pieces");
    }
}

/// A guarantee that does not fit a receiver's CQE capacity through another rank's traffic: the
/// error names the receiver, on every rank.
#[test]
fn coupled_guarantee_error_is_collective() {
    let g = gen(6, 3, true, 4);
    let mut p = generate(&g);
    // rank 0 (hosts 0..3) guarantees its senders 1 op each; host 5 (rank 1) guarantees nothing
    // but can complete almost nothing
    p.guarantee = (0..p.entries())
        .map(|k| if k < 9 { 1.0 } else { 0.0 })
        .collect();
    p.c_cap[5] = 1e-3;
    let e = p.validate().unwrap_err();
    assert!(e.msg.contains("host 5"), "{}", e.msg);
    let pieces = split(6, 2)
        .into_iter()
        .map(|(a, b)| Piece::slice(&p, a, b).unwrap())
        .collect();
    for r in run_ranks(pieces, opts(0.0)) {
        let er = r.unwrap_err();
        assert_eq!(er.param, "guarantee");
        assert!(er.msg.contains("host 5"), "{}", er.msg);
    }
}

/// More ranks than hosts: the ranks without hosts take part in the collectives and hold nothing.
#[test]
fn ranks_without_hosts() {
    for two in [false, true] {
        let g = gen(5, 4, two, 7);
        let local = solve_admm(&generate(&g), opts(0.0)).unwrap();
        let pieces = split(5, 8)
            .into_iter()
            .map(|(a, b)| Piece::generate(&g, a, b))
            .collect();
        let res = run_ranks(pieces, opts(0.0));
        let (x, r0) = joined(&res);
        assert_eq!(r0.iterations, local.iterations);
        if !two {
            assert_eq!(x, local.x);
        }
        for (a, b) in x.iter().zip(&local.x) {
            assert!((a - b).abs() <= 1e-12 * b.abs(), "{a} vs {b}");
        }
    }
}

/// Each rank holds its hosts' data and state only: at 2 ranks a rank holds about half of what
/// one rank holding everything does (plus the ghost rows, two-sided).
#[test]
fn memory_per_rank_falls_with_the_ranks() {
    for (two, bound) in [(false, 0.52), (true, 0.65)] {
        let g = gen(60, 20, two, 3);
        let one = run_ranks(vec![Piece::generate(&g, 0, 60)], opts(0.0));
        let whole = one[0].as_ref().unwrap().state_bytes as f64;
        let res = run_ranks(
            vec![Piece::generate(&g, 0, 30), Piece::generate(&g, 30, 60)],
            opts(0.0),
        );
        for r in &res {
            let frac = r.as_ref().unwrap().state_bytes as f64 / whole;
            assert!(
                frac < bound,
                "two-sided {two}: a rank holds {frac:.3} of the whole"
            );
        }
    }
}

/// Per-pair penalties need every rank's senders of a row (their harmonic mean) and the global
/// median curvature; the sharded solve does not exchange them, so it refuses the option by
/// name on every rank instead of running something else.
#[test]
fn sharded_two_sided_refuses_pair_penalties_by_name() {
    let g = gen(6, 4, true, 2);
    let pieces = split(6, 2)
        .into_iter()
        .map(|(a, b)| Piece::generate(&g, a, b))
        .collect();
    let res = run_ranks(
        pieces,
        AdmmOptions {
            pair_penalty: true,
            ..opts(0.0)
        },
    );
    for r in res {
        let Err(e) = r else {
            panic!("the sharded solve ran with pair_penalty")
        };
        assert_eq!(e.param, "pair_penalty", "{e}");
    }
}
