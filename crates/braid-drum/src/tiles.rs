//! The two-sided passes over the pairs, in application tiles.
//!
//! Two-sided, a pair couples sender entry (l, j) to row (i, j): the *same application* j on
//! another host. In host-major order (the order of the capacities) a pass over the pairs
//! therefore reads the rows of random hosts all over the row arrays (400 MB each at n = 10⁴,
//! m = 5000): a DRAM miss and a TLB miss per pair. Taken in tiles of `TILE` applications
//! instead — for each tile, every host l, its entries j of the tile — the rows a tile touches
//! are those of its applications only: n·TILE values per row array, which stay in cache, while
//! the pairs and entries are still read in runs of TILE entries.
//!
//! Within a tile, the contributions to row (i, j) arrive in increasing sender host l, i.e. in
//! increasing pair index: the order in which the row-major gather (`row_ptr`/`row_pair`) adds
//! them, so the row sums are bit-identical to it. Tiles touch disjoint rows, so they run in
//! parallel and scatter without atomics. The passes need `Layout::app_tiled` (no link rows, no
//! ghost rows, every pair's row of its sender's application); they read no index array but
//! `send_ptr` and `pair_row`.

use crate::admm::{SendPtr, Sums};
use crate::problem::Layout;
use rayon::prelude::*;

/// Applications per tile: a host's run of a tile is 256 bytes of each entry array and ~770 of
/// each pair array, long enough to stream; the rows a tile touches are n·256 bytes per row
/// array (2.5 MB at n = 10⁴). Measured at n = 10⁴, m = 5000 with 8, 16, 32, 128 and 512 (one
/// setting per run of `examples/step_time`, docs/drum.md): 32 was best; 8 was 2–3× slower.
/// Independent of the thread count, so the residual sums (added per tile) are too.
pub const TILE: usize = 32;

/// The tiles of `m` applications: (first application, end).
fn tiles(m: usize) -> impl IndexedParallelIterator<Item = (usize, usize)> {
    let tile: usize = std::env::var("DRUM_TILE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(TILE);
    let count = m.div_ceil(tile);
    (0..count)
        .into_par_iter()
        .map(move |t| (t * tile, ((t + 1) * tile).min(m)))
}

/// Visit the entries of tile [j0, j1): `f(k, pairs)` for k = l·m + j (l ascending, then j)
/// with the range of k's pairs (ascending).
#[inline(always)]
fn for_entries(
    lay: &Layout,
    (j0, j1): (usize, usize),
    mut f: impl FnMut(usize, std::ops::Range<usize>),
) {
    let m = lay.m;
    for l in 0..lay.n {
        for k in l * m + j0..l * m + j1 {
            f(k, lay.send_ptr[k] as usize..lay.send_ptr[k + 1] as usize);
        }
    }
}

/// Zero the rows of tile [j0, j1) of `out` (rows i·m + j of every host i).
#[inline(always)]
fn zero_rows(out: SendPtr<f64>, n: usize, m: usize, (j0, j1): (usize, usize)) {
    for i in 0..n {
        for r in i * m + j0..i * m + j1 {
            // SAFETY: the rows of a tile belong to it alone
            unsafe { *out.get().add(r) = 0.0 };
        }
    }
}

/// `out_r = sum over the pairs of row r of coef_q · x_sender` (P x), the same bits as the
/// row-major gather. `out` has `lay.rows` = n·m entries.
pub fn row_sums(lay: &Layout, x: &[f64], out: &mut [f64]) {
    debug_assert!(lay.app_tiled && out.len() == lay.rows && x.len() == lay.n * lay.m);
    let (n, m) = (lay.n, lay.m);
    let o = SendPtr(out.as_mut_ptr());
    let coef = &lay.pair_coef;
    let row = &lay.pair_row;
    tiles(m).for_each(|t| {
        zero_rows(o, n, m, t);
        for_entries(lay, t, |k, qs| {
            for q in qs {
                // SAFETY: row of the tile's application (app_tiled)
                unsafe { *o.get().add(row[q] as usize) += coef[q] * x[k] };
            }
        });
    });
}

/// `hsum_r = sum over the pairs of row r of h_q`, `h_q = relax·coef_q·x_sender +
/// (1 − relax)·y_q` (the over-relaxed pair values, computed here rather than stored): the
/// row gather of the ADMM, same bits.
pub fn relaxed_row_sums(lay: &Layout, x: &[f64], y: &[f64], relax: f64, hsum: &mut [f64]) {
    debug_assert!(lay.app_tiled && hsum.len() == lay.rows);
    let (n, m) = (lay.n, lay.m);
    let o = SendPtr(hsum.as_mut_ptr());
    let coef = &lay.pair_coef;
    let row = &lay.pair_row;
    tiles(m).for_each(|t| {
        zero_rows(o, n, m, t);
        for_entries(lay, t, |k, qs| {
            for q in qs {
                let hv = relax * coef[q] * x[k] + (1.0 - relax) * y[q];
                // SAFETY: row of the tile's application (app_tiled)
                unsafe { *o.get().add(row[q] as usize) += hv };
            }
        });
    });
}

/// `out_k = scale · sum over the pairs q of entry k of rs_row · coef_q · (v_row − y_q)`: the
/// x-update's linear coefficient (`scale` = rho, `y` the pairs' y, `v` the rows' duals). With
/// `y` empty, `out_k = scale · sum rs · coef · v_row` (Pᵀ applied to rs∘v). `rs` empty means
/// all ones (the same bits: 1·c = c). With per-pair penalties (`sig` non-empty, one scale per
/// sender entry, [`crate::admm::Admm::set_pair_penalties`]) the term is
/// `coef_q · (rs_row v_row − sig_k y_q)`.
pub fn x_linear(
    lay: &Layout,
    scale: f64,
    rs: &[f64],
    sig: &[f64],
    v: &[f64],
    y: &[f64],
    out: &mut [f64],
) {
    debug_assert!(lay.app_tiled && out.len() == lay.n * lay.m);
    let o = SendPtr(out.as_mut_ptr());
    let coef = &lay.pair_coef;
    let row = &lay.pair_row;
    tiles(lay.m).for_each(|t| {
        for_entries(lay, t, |k, qs| {
            let mut b = 0.0;
            for q in qs {
                let r = row[q] as usize;
                if !sig.is_empty() && !y.is_empty() {
                    b += coef[q] * (rs[r] * v[r] - sig[k] * y[q]);
                    continue;
                }
                let c = if rs.is_empty() {
                    coef[q]
                } else {
                    rs[r] * coef[q]
                };
                b += if y.is_empty() {
                    c * v[r]
                } else {
                    c * (v[r] - y[q])
                };
            }
            // SAFETY: entries of the tile's applications belong to it alone
            unsafe { *o.get().add(k) = scale * b };
        });
    });
}

/// The y-update of every pair, `y_q ← h_q − dv_row` (h recomputed as in
/// [`relaxed_row_sums`]), its residual sums, and the next x-update's linear coefficient from
/// the new y and the current v and rho (as [`x_linear`] would compute it: same bits), in one
/// pass. The sums are added per tile and then in tile order (deterministic).
#[allow(clippy::too_many_arguments)]
pub fn y_update(
    lay: &Layout,
    x: &[f64],
    relax: f64,
    rho: f64,
    rs: &[f64],
    sig: &[f64],
    v: &[f64],
    dv: &[f64],
    y: &mut [f64],
    base: &mut [f64],
) -> Sums {
    debug_assert!(lay.app_tiled && base.len() == lay.n * lay.m);
    let o = SendPtr(base.as_mut_ptr());
    let yp = SendPtr(y.as_mut_ptr());
    let coef = &lay.pair_coef;
    let row = &lay.pair_row;
    let parts: Vec<Sums> = tiles(lay.m)
        .map(|t| {
            let mut s = Sums::default();
            for_entries(lay, t, |k, qs| {
                let (mut dual, mut atv, mut b) = (0.0, 0.0, 0.0);
                for q in qs {
                    let r = row[q] as usize;
                    let p = coef[q];
                    let rsr = if rs.is_empty() { 1.0 } else { rs[r] };
                    // SAFETY: the pairs of the tile's entries belong to it alone
                    let yq = unsafe { &mut *yp.get().add(q) };
                    let hv = relax * p * x[k] + (1.0 - relax) * *yq;
                    let px = p * x[k];
                    if !sig.is_empty() {
                        // per-pair penalties (`x_linear`)
                        let ynew = hv - dv[r] * rsr / sig[k];
                        s.r2 += (px - ynew) * (px - ynew);
                        dual += sig[k] * p * (ynew - *yq);
                        atv += rsr * p * v[r];
                        s.ax2 += px * px;
                        s.y2 += ynew * ynew;
                        *yq = ynew;
                        b += p * (rsr * v[r] - sig[k] * ynew);
                        continue;
                    }
                    let ynew = hv - dv[r];
                    s.r2 += (px - ynew) * (px - ynew);
                    dual += rsr * p * (ynew - *yq);
                    atv += rsr * p * v[r];
                    s.ax2 += px * px;
                    s.y2 += ynew * ynew;
                    *yq = ynew;
                    b += rsr * p * (v[r] - ynew);
                }
                s.s2 += rho * rho * dual * dual;
                s.atv2 += rho * rho * atv * atv;
                // SAFETY: entries of the tile's applications belong to it alone
                unsafe { *o.get().add(k) = rho * b };
            });
            s
        })
        .collect();
    parts.into_iter().fold(Sums::default(), Sums::add)
}

#[cfg(test)]
mod tests {
    use crate::admm::{Admm, AdmmOptions};
    use crate::gen::{generate, GenParams};
    use crate::problem::Layout;
    use std::sync::Arc;

    /// The tiled passes give the host-major passes' iterates bit for bit (m not a multiple of
    /// the tile, a top-k active set, alpha 1 and 2, with row scaling forced on so that `rs` is
    /// read), with per-pair penalties (set, then re-estimated at iteration 20), and residual
    /// sums equal to rounding.
    #[test]
    fn tiled_steps_equal_generic() {
        for (alpha, k, row_scaling, pair) in [
            (1.0, None, false, false),
            (2.0, Some(7), true, false),
            (5.0, None, false, true),
        ] {
            let p = Arc::new(generate(&GenParams {
                n: 9,
                m: 21,
                two_sided: true,
                alpha,
                k,
                seed: 5,
                ..Default::default()
            }));
            let lay = Arc::new(Layout::build(&p));
            assert!(lay.app_tiled);
            let opt = AdmmOptions::default();
            let mut a = Admm::new(p.clone(), lay.clone(), opt.clone());
            let mut b = Admm::new(p.clone(), lay.clone(), opt);
            if row_scaling {
                for st in [&mut a, &mut b] {
                    st.rs
                        .iter_mut()
                        .enumerate()
                        .for_each(|(r, v)| *v = 0.5 + (r % 5) as f64 * 0.25);
                    st.rs_unit = false;
                    st.rp2 = (0..p.entries())
                        .map(|e| {
                            (lay.send_ptr[e] as usize..lay.send_ptr[e + 1] as usize)
                                .map(|q| {
                                    st.rs[lay.pair_row[q] as usize]
                                        * lay.pair_coef[q]
                                        * lay.pair_coef[q]
                                })
                                .sum()
                        })
                        .collect();
                }
            }
            if pair {
                for st in [&mut a, &mut b] {
                    st.set_pair_penalties(
                        (0..p.entries())
                            .map(|k| 0.3 + (k % 7) as f64 * 0.4)
                            .collect(),
                    );
                }
            }
            for it in 0..40 {
                if pair && it == 20 {
                    for st in [&mut a, &mut b] {
                        let (sig, med) = st.pair_scales_at(&st.x);
                        st.rescale_pairs(sig, 3.0 * med);
                    }
                }
                // a lost host now and then
                let lost: Vec<bool> = (0..p.n).map(|i| it % 7 == 3 && i == 2).collect();
                a.x_step(&lost);
                a.gather_rows();
                a.z_step();
                let sa = a.y_step();
                a.adapt(&sa);
                b.x_step_tiled(&lost);
                b.rows_tiled();
                b.z_step();
                let sb = b.y_step_tiled();
                b.adapt(&sb);
                assert_eq!(a.x, b.x, "iteration {it}");
                assert_eq!(a.hsum, b.hsum, "iteration {it}");
                assert_eq!(a.z, b.z, "iteration {it}");
                assert_eq!(a.v, b.v, "iteration {it}");
                assert_eq!(a.y, b.y, "iteration {it}");
                assert_eq!(a.rho, b.rho, "iteration {it}");
                for (u, w) in [
                    (sa.r2, sb.r2),
                    (sa.s2, sb.s2),
                    (sa.ax2, sb.ax2),
                    (sa.y2, sb.y2),
                    (sa.atv2, sb.atv2),
                ] {
                    assert!((u - w).abs() <= 1e-12 * u.abs().max(1e-300), "{u} vs {w}");
                }
            }
            // P x and P^T v as well
            assert_eq!(lay.row_sums(&a.x), {
                let mut o = vec![0.0; lay.rows];
                for r in 0..lay.rows {
                    for t in lay.row_ptr[r] as usize..lay.row_ptr[r + 1] as usize {
                        let q = lay.row_pair[t] as usize;
                        o[r] += lay.pair_coef[q] * a.x[lay.sender_of(q)];
                    }
                }
                o
            });
        }
    }

    /// Per-pair penalties all equal to 1 are the per-row method with unit row penalties (the
    /// derivation in `Admm::set_pair_penalties`): the same iterates to rounding.
    #[test]
    fn unit_pair_penalties_are_the_row_method() {
        let p = Arc::new(generate(&GenParams {
            n: 9,
            m: 21,
            two_sided: true,
            alpha: 2.0,
            seed: 3,
            ..Default::default()
        }));
        let lay = Arc::new(Layout::build(&p));
        let opt = AdmmOptions {
            row_scaling: false,
            ..Default::default()
        };
        let mut a = Admm::new(p.clone(), lay.clone(), opt.clone());
        let mut b = Admm::new(p.clone(), lay.clone(), opt);
        assert!(a.rs.iter().all(|&r| r == 1.0));
        b.set_pair_penalties(vec![1.0; p.entries()]);
        for it in 0..60 {
            for st in [&mut a, &mut b] {
                st.x_step_tiled(&[]);
                st.rows_tiled();
                st.z_step();
                let s = st.y_step_tiled();
                st.adapt(&s);
            }
            assert_eq!(a.rho, b.rho, "iteration {it}");
            for (u, w) in a.x.iter().zip(&b.x).chain(a.v.iter().zip(&b.v)) {
                assert!(
                    (u - w).abs() <= 1e-9 * u.abs().max(1e-9),
                    "iteration {it}: {u} vs {w}"
                );
            }
        }
    }
}
