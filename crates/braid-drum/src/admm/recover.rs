//! Feasible recovery of an iterate: the point the certificate and the callers use.

use crate::problem::Layout;
use crate::scaled::Scaled;

/// Feasible recovery (scaled units). Returns (x~, rows = [P; R] x~).
pub fn recover(sc: &Scaled, lay: &Layout, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let nn = sc.n * sc.m;
    let pg = lay.row_sums(&sc.lo);
    let px = lay.row_sums(x);
    let (theta, global) = recover_theta(sc, &pg, &px);
    let mut links = 1.0f64;
    for (e, &cap) in sc.link_cap.iter().enumerate() {
        let (a, b) = (pg[nn + e], px[nn + e] - pg[nn + e]);
        if a + b > cap && b > 0.0 {
            links = links.min(((cap - a) / b).clamp(0.0, 1.0));
        }
    }
    let hosts = if lay.diag {
        Some(theta)
    } else {
        own_theta(sc, lay, &pg, &px, &theta, x)
    };
    let xf = match &hosts {
        Some(t) => recover_apply(sc, Some(t), links, x),
        None => recover_apply(sc, None, global.min(links), x),
    };
    let rows = lay.row_sums(&xf);
    (xf, rows)
}

/// Two-sided, per host: the factor by which host i's *own* entries are pulled toward their
/// guarantees so that its CQ rows fit C_i. P ≥ 0 and x̃ ≤ x, so pulling any entries in only
/// lowers every row: host i's excess `Σ px − C_i = (1 − θ_i) Σ (px − pg)` is removed by its
/// own entries' self terms alone (row (i, j) has the pair of sender (i, j), coefficient a_ij,
/// lowered by `(1 − θ'_i) a_ij (x − g)`; any other pairs into host i only lower it more), and
/// the other hosts' rows can only fall. So the point is feasible whatever the other hosts do,
/// and only hosts over their C move, where one global θ pulled every host in by the worst
/// host's factor: on the paper's two-sided instances the CQ utility (−β/z², ~100× the
/// utility's weight at m = 5000) turned that into a certified gap ~100× the largest relative
/// violation. `None` when some host's own entries cannot absorb its excess (no self term, or
/// `θ' < 0`): then the caller uses the global θ.
pub fn own_theta(
    sc: &Scaled,
    lay: &Layout,
    pg: &[f64],
    px: &[f64],
    theta: &[f64],
    x: &[f64],
) -> Option<Vec<f64>> {
    let m = sc.m;
    let mut out = vec![1.0f64; sc.n];
    for (i, t) in out.iter_mut().enumerate() {
        if theta[i] >= 1.0 {
            continue;
        }
        let r = i * m..(i + 1) * m;
        let b: f64 = r.clone().map(|k| px[k] - pg[k]).sum();
        let excess = (1.0 - theta[i]) * b;
        let own: f64 = r
            .map(|k| {
                let q = (lay.send_ptr[k] as usize..lay.send_ptr[k + 1] as usize)
                    .find(|&q| lay.pair_row[q] as usize == k)?;
                Some(lay.pair_coef[q] * (x[k] - sc.lo[k]).max(0.0))
            })
            .map(|v| v.unwrap_or(0.0))
            .sum();
        if !(own > 0.0) {
            return None;
        }
        let t2 = 1.0 - excess / own;
        if !(t2 >= 0.0) {
            return None;
        }
        *t = t2.min(1.0);
    }
    Some(out)
}

/// Per host, the largest theta in [0, 1] with g + theta (P x - g) within the CQE capacity (from
/// the CQ row sums `pg` = P g and `px` = P x of the hosts of `sc`), and their minimum.
pub fn recover_theta(sc: &Scaled, pg: &[f64], px: &[f64]) -> (Vec<f64>, f64) {
    let (n, m) = (sc.n, sc.m);
    let mut theta = vec![1.0f64; n];
    let mut global = 1.0f64;
    for i in 0..n {
        let (mut a, mut b) = (0.0, 0.0);
        for r in i * m..(i + 1) * m {
            a += pg[r];
            b += px[r] - pg[r];
        }
        let t = if a + b > sc.c[i] && b > 0.0 {
            ((sc.c[i] - a) / b).clamp(0.0, 1.0)
        } else {
            1.0
        };
        theta[i] = t;
        global = global.min(t);
    }
    (theta, global)
}

/// x~ = g + theta (x - g): per host when the hosts are uncoupled (`diag`), else one global theta.
pub fn recover_apply(sc: &Scaled, hosts: Option<&[f64]>, global: f64, x: &[f64]) -> Vec<f64> {
    let m = sc.m;
    // also the WQE capacity, which x satisfies up to the search tolerance
    (0..sc.n * m)
        .map(|k| {
            let t = hosts.map_or(global, |h| h[k / m].min(global));
            sc.lo[k] + t * (x[k] - sc.lo[k]).max(0.0)
        })
        .collect()
}
