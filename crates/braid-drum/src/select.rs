//! Top-k selection: at most k applications active per host (the RNIC QP-cache limit).
//!
//! The paper's "top-k utility" is not concave (k = 1, two log utilities: f(1,e) = f(e,1) = 1 but
//! 0.62 at the midpoint), so it cannot be part of a convex solve. braid makes the choice of the
//! active set a separate, defined step around an exact convex solve:
//!
//! 1. every application that has waited `max_wait` or more rounds is forced in, oldest first
//!    (ties by index), up to k;
//! 2. the remaining slots go to the highest scores (ties by index): the score is a priority, the
//!    weight, or the paper's ranking (the utility each application gets in the solve without the
//!    cache limit);
//! 3. the convex problem is solved exactly on the active set; inactive applications get x = 0.
//!
//! Guarantee: the allocation is optimal for the chosen active set, and no application waits more
//! than `max_wait + ceil(m / k)` consecutive rounds (the forced ones form a FIFO queue served k per
//! round), so nobody starves. It is not the optimum over all k-subsets (a combinatorial problem).

/// Select the active set. `scores` and `age` are per entry (host-major, m per host); `age` is
/// updated in place (0 for the selected, +1 for the others).
pub fn select_topk(
    n: usize,
    m: usize,
    k: usize,
    scores: &[f64],
    age: &mut [u32],
    max_wait: u32,
) -> Vec<bool> {
    let mut active = vec![false; n * m];
    let k = k.min(m);
    let mut idx: Vec<usize> = Vec::with_capacity(m);
    for i in 0..n {
        let k0 = i * m;
        idx.clear();
        // forced: waited too long
        let mut forced: Vec<usize> = (0..m).filter(|&j| age[k0 + j] >= max_wait).collect();
        forced.sort_by(|&a, &b| age[k0 + b].cmp(&age[k0 + a]).then(a.cmp(&b)));
        forced.truncate(k);
        for &j in &forced {
            active[k0 + j] = true;
        }
        let mut rest: Vec<usize> = (0..m).filter(|&j| !active[k0 + j]).collect();
        let left = k - forced.len();
        if left > 0 && !rest.is_empty() {
            let cmp = |a: &usize, b: &usize| {
                scores[k0 + *b]
                    .partial_cmp(&scores[k0 + *a])
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(a.cmp(b))
            };
            if left < rest.len() {
                rest.select_nth_unstable_by(left - 1, cmp);
                rest.truncate(left);
            }
            for &j in &rest {
                active[k0 + j] = true;
            }
        }
        for j in 0..m {
            if active[k0 + j] {
                age[k0 + j] = 0;
            } else {
                age[k0 + j] = age[k0 + j].saturating_add(1);
            }
        }
    }
    active
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nobody_starves() {
        let (n, m, k) = (1, 10, 3);
        let scores: Vec<f64> = (0..m).map(|j| j as f64).collect();
        let mut age = vec![0u32; m];
        let max_wait = 4;
        let mut waited = vec![0u32; m];
        for _ in 0..200 {
            let a = select_topk(n, m, k, &scores, &mut age, max_wait);
            assert_eq!(a.iter().filter(|&&b| b).count(), k);
            for j in 0..m {
                if a[j] {
                    waited[j] = 0;
                } else {
                    waited[j] += 1;
                    assert!(waited[j] <= max_wait + (m as u32).div_ceil(k as u32));
                }
            }
        }
    }

    #[test]
    fn picks_top_scores_without_aging() {
        let scores = [3.0, 1.0, 2.0, 5.0];
        let mut age = vec![0u32; 4];
        let a = select_topk(1, 4, 2, &scores, &mut age, u32::MAX);
        assert_eq!(a, vec![true, false, false, true]);
    }
}
