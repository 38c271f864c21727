"""DRUM solver: against an independent convex solver (CVXPY + Clarabel), feasibility, the
selection step, preemption, links, fault tolerance, determinism, units and input errors."""

from __future__ import annotations

import numpy as np
import pytest

from braid import drum as D

cp = pytest.importorskip("cvxpy")
sp = pytest.importorskip("scipy.sparse")

GAP = 1e-4


def coupling_matrix(p: D.Problem):
    """P (n*m x n*m) with z = P x, built independently from the problem's arrays."""
    arr = p.arrays()
    n, m = p.n, p.m
    a = arr["a"].ravel()
    rows, cols, vals = list(range(n * m)), list(range(n * m)), list(a)
    if p.two_sided:
        ptr, dst, frac = arr["B"]
        for s in range(n * m):
            l, j = divmod(s, m)
            for q in range(int(ptr[s]), int(ptr[s + 1])):
                i = int(dst[q])
                if i != l and frac[q] > 0:
                    r = i * m + j
                    rows.append(r)
                    cols.append(s)
                    vals.append(a[r] * frac[q])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n * m, n * m))


def link_matrix(p: D.Problem):
    arr = p.arrays()
    lk = arr["links"]
    if lk is None:
        return None, None
    n, m = p.n, p.m
    ptr, dst, frac = arr["B"]
    size = lk["size"].ravel() if lk["size"] is not None else np.ones(n * m)
    cross = {}
    for s_, d_, e in lk["paths"]:
        cross.setdefault((int(s_), int(d_)), []).append(int(e))
    rows, cols, vals = [], [], []
    for s in range(n * m):
        l = s // m
        for q in range(int(ptr[s]), int(ptr[s + 1])):
            for e in cross.get((l, int(dst[q])), []):
                rows.append(e)
                cols.append(s)
                vals.append(frac[q] * size[s])
    return sp.csr_matrix((vals, (rows, cols)), shape=(len(lk["cap"]), n * m)), lk["cap"]


def cvx_optimum(p: D.Problem):
    arr = p.arrays()
    n, m = p.n, p.m
    act = arr["active"].ravel()
    w = arr["w"].ravel()
    idx = np.nonzero(act)[0]
    x = cp.Variable(n * m)
    P = coupling_matrix(p)
    z = P @ x
    al = p.alpha
    xa = x[idx]
    if al == 1.0:
        util = w[idx] @ cp.log(xa)
    else:
        util = (w[idx] @ cp.power(xa, 1 - al)) / (1 - al)
    obj = util - p.beta * cp.sum(cp.power(z[idx], -2)) if p.beta > 0 else util
    lo = arr["guarantee"].ravel() if arr["guarantee"] is not None else np.zeros(n * m)
    cons = [x >= lo]
    inact = np.nonzero(~act)[0]
    if len(inact):
        cons.append(x[inact] == 0)
    r = arr["preempt"]
    for i in range(n):
        sl = slice(i * m, (i + 1) * m)
        if r is not None and np.any(r[i] > 0):
            cons.append(cp.sum(x[sl]) + cp.norm(cp.multiply(r[i], x[sl]), 2) <= arr["Q"][i])
        else:
            cons.append(cp.sum(x[sl]) <= arr["Q"][i])
        cons.append(cp.sum(z[sl]) <= arr["C"][i])
    R, cap = link_matrix(p)
    if R is not None:
        cons.append(R @ x <= cap)
    prob = cp.Problem(cp.Maximize(obj), cons)
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == cp.OPTIMAL, prob.status
    return prob.value


def assert_feasible(p: D.Problem, x, tol=1e-9):
    arr = p.arrays()
    n, m = p.n, p.m
    assert np.all(x >= -tol)
    assert np.all(x[~arr["active"]] == 0)
    if arr["guarantee"] is not None:
        assert np.all(x >= arr["guarantee"] * (1 - tol) - tol)
    r = arr["preempt"]
    use = x.sum(axis=1)
    if r is not None:
        use = use + np.linalg.norm(r * x, axis=1)
    assert np.all(use <= arr["Q"] * (1 + tol))
    z = (coupling_matrix(p) @ x.ravel()).reshape(n, m)
    assert np.all(z.sum(axis=1) <= arr["C"] * (1 + tol))
    R, cap = link_matrix(p)
    if R is not None:
        assert np.all(R @ x.ravel() <= cap * (1 + tol))


def gap(p, fstar, f):
    return (fstar - f) / p.weight_sum


CASES = [
    # (n, m, two_sided, alpha, seed)
    (5, 3, False, 0.5, 1),
    (12, 8, False, 1.0, 2),
    (20, 10, False, 2.0, 3),
    (8, 20, False, 4.0, 4),
    (50, 20, False, 1.0, 5),
    (5, 3, True, 0.5, 6),
    (12, 8, True, 1.0, 7),
    (20, 10, True, 2.0, 8),
    (8, 20, True, 4.0, 9),
    (50, 20, True, 2.0, 10),
]


@pytest.mark.parametrize("n,m,two,alpha,seed", CASES)
def test_admm_matches_cvxpy(n, m, two, alpha, seed):
    p = D.Problem.random(n, m, two_sided=two, alpha=alpha, seed=seed)
    fstar = cvx_optimum(p)
    r = D.solve(p, "admm")
    assert r.converged
    g = gap(p, fstar, r.objective_feasible)
    assert abs(g) <= GAP, g
    assert_feasible(p, r.x_feasible)
    # the dual bound is a valid upper bound (up to Clarabel's own accuracy)
    assert (r.dual_bound - fstar) / p.weight_sum >= -1e-6


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0, 4.0])
def test_exact_matches_cvxpy(alpha):
    p = D.Problem.random(30, 12, alpha=alpha, seed=int(alpha * 10))
    fstar = cvx_optimum(p)
    r = D.solve(p, "exact")
    assert abs(gap(p, fstar, r.objective)) <= 1e-6
    assert abs(r.duality_gap) <= 1e-9
    assert_feasible(p, r.x)


def test_topk_guarantee_preempt_links_match_cvxpy():
    rng = np.random.default_rng(0)
    n, m = 6, 8
    w = rng.uniform(0.5, 2, (n, m))
    a = 1.0 / rng.integers(1, 8, (n, m))
    Q = rng.uniform(20, 100, n)
    C = rng.uniform(15, 50, n)
    B = np.zeros((n * m, n))
    for s in range(n * m):
        l = s // m
        dsts = rng.choice([i for i in range(n) if i != l], 2, replace=False)
        f = rng.uniform(0.1, 1, 2)
        B[s, dsts] = f / f.sum()
    active = np.zeros((n, m), bool)
    active[:, :5] = True
    guarantee = np.where(active, 0.5, 0.0)
    preempt = np.where(active, 0.3, 0.0)
    paths = [(s, d, (s + d) % 3) for s in range(n) for d in range(n) if s != d]
    links = dict(cap=[60.0, 80.0, 70.0], paths=paths)
    for two in (False, True):
        p = D.Problem.from_arrays(w, a, Q, C, alpha=2.0, beta=1e-3, B=sp.csr_matrix(B), two_sided=two,
                                  active=active, guarantee=guarantee, preempt=preempt, links=links)
        fstar = cvx_optimum(p)
        r = D.solve(p, "admm", eps_abs=1e-8, eps_rel=1e-8, max_iter=20000)
        assert abs(gap(p, fstar, r.objective_feasible)) <= GAP
        assert_feasible(p, r.x_feasible)
        assert np.all(r.x_feasible[~active] == 0)


def test_sparse_dense_and_csr_B_agree():
    p0 = D.Problem.random(10, 4, two_sided=True, seed=3)
    arr = p0.arrays()
    ptr, dst, frac = arr["B"]
    dense = np.zeros((40, 10))
    for s in range(40):
        for q in range(int(ptr[s]), int(ptr[s + 1])):
            dense[s, dst[q]] = frac[q]
    args = (arr["w"], arr["a"], arr["Q"], arr["C"])
    r0 = D.solve(p0, "admm")
    for B in (dense, sp.csr_matrix(dense), sp.coo_matrix(dense), (ptr, dst, frac)):
        p = D.Problem.from_arrays(*args, B=B, beta=p0.beta)
        r = D.solve(p, "admm")
        np.testing.assert_allclose(r.x, r0.x, rtol=1e-12, atol=1e-12)


def test_self_term_not_double_counted():
    # two hosts, one app each; host 0 sends all its traffic to host 1
    w = np.ones((2, 1))
    a = np.ones((2, 1))
    Q = np.array([10.0, 10.0])
    C = np.array([100.0, 100.0])
    B = np.array([[0.0, 1.0], [0.0, 0.0]])
    p = D.Problem.from_arrays(w, a, Q, C, B=B, beta=0.0)
    x = np.array([[3.0], [4.0]])
    z = p.coupling(x)
    # z_0 = a x_0 (own sends) ; z_1 = a (x_1 + x_0)
    np.testing.assert_allclose(z.ravel(), [3.0, 7.0])
    with pytest.raises(D.DrumInputError) as e:
        D.Problem.from_arrays(w, a, Q, C, B=np.array([[0.5, 0.5], [0.0, 0.0]]))
    assert e.value.param == "B"


def test_dual_baseline_is_bounded_and_improves():
    p = D.Problem.random(20, 10, two_sided=True, seed=4)
    fstar = cvx_optimum(p)
    r = D.solve(p, "dual", max_iter=300, reference=fstar)
    ub = r.trace_arrays["objective"]
    assert np.all((ub - fstar) / p.weight_sum >= -1e-6)
    assert r.normalized_gap() >= -1e-6
    assert_feasible(p, r.x_feasible)


def test_lossy_matches_lossless():
    p = D.Problem.random(60, 20, two_sided=True, seed=12)
    r0 = D.solve(p, "admm", eps_abs=1e-8, eps_rel=1e-8, max_iter=20000)
    r1 = D.solve(p, "admm", eps_abs=1e-8, eps_rel=1e-8, max_iter=20000, loss=0.1, loss_seed=3)
    assert r1.converged and r0.converged
    assert r1.trace_arrays["lost"].sum() > 0
    assert abs(gap(p, r0.objective_feasible, r1.objective_feasible)) <= 1e-6


def test_deterministic():
    a = D.Problem.random(40, 10, two_sided=True, seed=9)
    b = D.Problem.random(40, 10, two_sided=True, seed=9)
    c = D.Problem.random(40, 10, two_sided=True, seed=10)
    for k in ("w", "a", "Q", "C"):
        assert np.array_equal(a.arrays()[k], b.arrays()[k])
    assert not np.array_equal(a.arrays()["w"], c.arrays()["w"])
    ra = D.solve(a, "admm", loss=0.1, loss_seed=1)
    rb = D.solve(b, "admm", loss=0.1, loss_seed=1)
    assert np.array_equal(ra.x, rb.x)
    assert ra.iterations == rb.iterations


def test_units_do_not_change_convergence():
    """Rates in ops/s instead of Mops (beta rescaled so it is the same problem): same
    iterations with scaling; the paper's fixed rho = 1e-3 is units-dependent."""
    p1 = D.Problem.random(30, 10, seed=2, beta=1e-3)
    p2 = D.Problem.random(30, 10, seed=2, beta=1e-3 * 1e12, units=1e6)
    r1 = D.solve(p1, "admm")
    r2 = D.solve(p2, "admm")
    assert r1.iterations == r2.iterations
    np.testing.assert_allclose(r2.x / 1e6, r1.x, rtol=1e-9)
    q1 = D.solve(p1, "admm", rho_policy="paper", max_iter=3000)
    q2 = D.solve(p2, "admm", rho_policy="paper", max_iter=3000)
    assert q1.iterations != q2.iterations


def test_topk_rounds_do_not_starve():
    p = D.Problem.random(4, 12, seed=1)
    k = 4
    res = D.rounds(p, k, n_rounds=9, rule="weight", max_wait=2)
    waited = np.zeros((4, 12), int)
    worst = 0
    for active, r in res:
        assert np.all(active.sum(axis=1) == k)
        assert np.all(r.x_feasible[~active] == 0)
        assert np.all(r.x_feasible[active] > 0)
        waited = np.where(active, 0, waited + 1)
        worst = max(worst, waited.max())
    assert worst <= 2 + -(-12 // k)


def test_topk_is_not_concave_example():
    # k = 1, two log utilities: f(1,e) = f(e,1) = 1 but the midpoint gives log((1+e)/2) < 1
    f = lambda x: max(np.log(x[0]), np.log(x[1]))  # noqa: E731
    mid = f(((1 + np.e) / 2, (1 + np.e) / 2))
    assert f((1, np.e)) == pytest.approx(1) and mid == pytest.approx(0.62, abs=0.01)
    assert mid < 0.5 * f((1, np.e)) + 0.5 * f((np.e, 1))


@pytest.mark.parametrize("n,m,two", [(100, 50, False), (100, 50, True), (1000, 50, False)])
def test_convergence_at_paper_sizes(n, m, two):
    p = D.Problem.random(n, m, two_sided=two, seed=1)
    if two:
        fstar = D.solve(p, "admm", eps_abs=1e-10, eps_rel=1e-10, max_iter=20000, trace=False).dual_bound
    else:
        fstar = D.solve(p, "exact").objective
    r = D.solve(p, "admm", reference=fstar, gap_tol=1e-4, max_iter=2000)
    assert r.converged and r.normalized_gap() <= 1e-4
    assert r.iterations <= 300


# ---- input errors ------------------------------------------------------------------------

def _arrays(n=3, m=2):
    return np.ones((n, m)), np.ones((n, m)) * 0.5, np.full(n, 10.0), np.full(n, 10.0)


@pytest.mark.parametrize("mut,param", [
    (lambda a: (a[0], a[1], -a[2], a[3]), "Q"),
    (lambda a: (a[0], a[1], a[2], np.zeros(3)), "C"),
    (lambda a: (a[0][:, :1], a[1], a[2], a[3]), "a"),
    (lambda a: (a[0], a[1], a[2], np.ones(4)), "C"),
    (lambda a: (-a[0], a[1], a[2], a[3]), "w"),
    (lambda a: (a[0], np.zeros((3, 2)), a[2], a[3]), "a"),
])
def test_bad_input_names_parameter(mut, param):
    with pytest.raises(D.DrumInputError) as e:
        D.Problem.from_arrays(*mut(_arrays()))
    assert e.value.param == param


def test_infeasible_guarantees():
    w, a, Q, C = _arrays()
    with pytest.raises(D.DrumInputError) as e:
        D.Problem.from_arrays(w, a, Q, C, guarantee=np.full((3, 2), 6.0))
    assert e.value.param == "guarantee" and "infeasible" in str(e.value)


def test_bad_options():
    p = D.Problem.random(3, 2)
    for kw, param in [(dict(relax=2.5), "relax"), (dict(loss=1.5), "loss"), (dict(rho=-1.0), "rho"),
                      (dict(stop="never"), "stop"), (dict(certify_every=-1), "certify_every"),
                      (dict(certified_gap_tol=0.0), "certified_gap_tol"),
                      (dict(certified_gap_tol=float("nan")), "certified_gap_tol"),
                      # issue 31: these named 'options' (a NaN in the options' JSON)
                      (dict(eps_abs=float("nan")), "eps_abs"), (dict(eps_rel=float("inf")), "eps_rel"),
                      (dict(reference=float("nan")), "reference")]:
        with pytest.raises(D.DrumInputError) as e:
            D.solve(p, "admm", **kw)
        assert e.value.param == param
    with pytest.raises(D.DrumInputError):
        D.solve(p, "simplex")
    with pytest.raises(D.DrumInputError):
        D.solve(D.Problem.random(4, 2, two_sided=True), "exact")


def test_topk_utility_rule_and_two_sided_selection():
    p = D.Problem.random(6, 12, seed=3)
    res = D.rounds(p, 4, n_rounds=3, rule="utility")
    for active, r in res:
        assert np.all(active.sum(axis=1) == 4) and r.converged
    q = D.Problem.random(8, 12, seed=3, k=5, two_sided=True)
    assert np.all(q.arrays()["active"].sum(axis=1) == 5)
    fstar = cvx_optimum(q)
    r = D.solve(q, "admm")
    assert abs(gap(q, fstar, r.objective_feasible)) <= GAP
    assert_feasible(q, r.x_feasible)


@pytest.mark.parametrize("n,m,alpha,seed", [(12, 8, 1.0, 7), (20, 10, 2.0, 8), (30, 40, 1.0, 11)])
def test_certified_stop_bounds_the_cvxpy_gap(n, m, alpha, seed):
    """Two-sided, where f* is unknown in practice: stopping on the certified gap (checked every
    few iterations) leaves a feasible point whose true gap to CVXPY's optimum is below it."""
    p = D.Problem.random(n, m, two_sided=True, alpha=alpha, seed=seed)
    fstar = cvx_optimum(p)
    r = D.solve(p, "admm", stop="none", max_iter=5000, certified_gap_tol=1e-4, certify_every=5)
    assert r.converged
    it, cg = r.trace_arrays["certified_iter"], r.trace_arrays["certified_gap"]
    assert it[-1] == r.iterations and cg[-1] <= 1e-4 and np.all(cg[:-1] > 1e-4)
    assert_feasible(p, r.x_feasible)
    true_gap = gap(p, fstar, r.objective_feasible)
    assert true_gap <= cg[-1] + 1e-6, (true_gap, cg[-1])


@pytest.mark.parametrize("alpha", [400.0, 1000.0, 1e300])
def test_alpha_beyond_the_limit_is_an_error_not_nan(alpha):
    """issue 31: alpha = 400 gave x all NaN with converged=True from the exact solver."""
    for method in ("exact", "admm", "dual"):
        with pytest.raises(D.DrumInputError) as e:
            D.solve(D.Problem.random(4, 3, alpha=alpha), method)
        assert e.value.param == "alpha"


def test_tiny_capacities_are_an_error_or_finite():
    """issue 31: capacities of 1e-300 gave objective -inf (admm) and NaN (exact), converged."""
    w, a, _, _ = _arrays()
    with pytest.raises(D.DrumInputError) as e:
        D.solve(D.Problem.from_arrays(w, a, np.full(3, 1e-300), np.full(3, 1e-300)), "admm")
    assert e.value.param == "Q"
    r = D.solve(D.Problem.from_arrays(w, a, np.full(3, 1e-300), np.full(3, 1e-300), beta=0.0), "exact")
    assert np.isfinite(r.objective_feasible) and np.all(np.isfinite(r.x))


def test_pair_penalty_certifies_alpha_5_with_a_binding_cqe_capacity():
    """Two-sided, alpha = 5, C ~ U[2, 6]: one penalty per row does not certify 1e-4 in 3000
    iterations (docs/drum.md); per-pair penalties do in a few hundred. The certificate's bound
    UB = gap * sum w + f(x~) is checked against CVXPY's point made feasible: CLARABEL's optimum
    overshoots C by ~1e-6 relative, worth 6e-4 of sum w at alpha = 5, so its value is not a
    bound; pulled inside C (one global factor) it is a feasible value that UB must exceed."""
    p = D.Problem.random(50, 20, two_sided=True, alpha=5.0, c_range=(2.0, 6.0), seed=5)
    r = D.solve(p, "admm", stop="none", max_iter=3000, certified_gap_tol=1e-4, certify_every=5,
                pair_penalty=True, trace=False)
    assert r.converged and r.iterations <= 400, r.iterations
    assert_feasible(p, r.x_feasible)
    arr = p.arrays()
    n, m, al = p.n, p.m, p.alpha
    w = arr["w"].ravel()
    P = coupling_matrix(p)
    x = cp.Variable(n * m)
    z = P @ x
    cons = [x >= 0]
    for i in range(n):
        sl = slice(i * m, (i + 1) * m)
        cons += [cp.sum(x[sl]) <= arr["Q"][i], cp.sum(z[sl]) <= arr["C"][i]]
    obj = (w @ cp.power(x, 1 - al)) / (1 - al) - p.beta * cp.sum(cp.power(z, -2))
    cp.Problem(cp.Maximize(obj), cons).solve()
    xv = np.maximum(x.value, 1e-300)
    zv = P @ xv
    use = max(max(zv[i * m:(i + 1) * m].sum() / arr["C"][i], xv[i * m:(i + 1) * m].sum() / arr["Q"][i]) for i in range(n))
    xf = xv / max(use, 1.0)
    zf = P @ xf
    f_cvx = (w @ xf ** (1 - al)) / (1 - al) - p.beta * (zf ** -2.0).sum()
    ub = r.trace_arrays["certified_gap"][-1] * w.sum() + r.objective_feasible
    assert ub >= f_cvx, (ub, f_cvx)
    assert (ub - f_cvx) / w.sum() <= 5e-4, (ub, f_cvx)
