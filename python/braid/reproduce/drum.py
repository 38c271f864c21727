"""DRUM (ToN 2023) §III-E: convergence of the distributed ADMM solver, paper vs braid.

The paper reports iterations to 99.5% of the optimum (< 20) on random instances and that 10% of
hosts' results lost per iteration cost < 1.5% early and ~0 once converged. "99.5% of the optimum"
is a weak measure (an equal split already scores 96-99%): braid also reports iterations to a
normalized gap of 1e-4, against the exact per-host solve (one-sided) or the dual bound of a tight
run (two-sided, an upper bound on the true gap). See docs/drum.md.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from .metrics import mean
from .registry import Row, Run, experiment

DOC = "docs/drum.md (Measured)"


def _reference(p, two_sided: bool) -> float:
    from ..drum import solve

    if not two_sided:
        return solve(p, "exact").objective
    return solve(p, "admm", eps_abs=1e-9, eps_rel=1e-9, max_iter=20000, trace=False).dual_bound


def _first(values, pred) -> Optional[int]:
    for i, v in enumerate(values):
        if pred(v):
            return i + 1
    return None


def convergence(seed: int, n: int, m: int, two_sided: bool) -> dict:
    """Iterations of ADMM (default options) to 99.5% of f* and to a normalized gap of 1e-4."""
    from ..drum import Problem, solve

    p = Problem.random(n, m, two_sided=two_sided, alpha=1.0, beta=1e-3, k=None, seed=seed)
    fstar = _reference(p, two_sided)
    r = solve(p, "admm", reference=fstar, gap_tol=1e-4, max_iter=3000)
    of = r.trace_arrays["objective_feasible"]
    return {
        "fstar": fstar,
        "to_99.5": _first(of, lambda v: v >= 0.995 * fstar) if fstar > 0 else None,
        "to_1e-4": r.iterations_to(1e-4),
    }


def fault_tolerance(seed: int, n: int, m: int, loss: float) -> dict:
    """Two-sided ADMM with each host's result lost with probability `loss` per iteration:
    iterations to normalized gaps 1e-2, 1e-3, 1e-4 and the gap after convergence."""
    from ..drum import Problem, solve

    p = Problem.random(n, m, two_sided=True, alpha=1.0, beta=1e-3, k=None, seed=seed)
    fstar = _reference(p, True)
    r = solve(p, "admm", reference=fstar, loss=loss, loss_seed=seed, max_iter=3000)
    return {"to": [r.iterations_to(g) for g in (1e-2, 1e-3, 1e-4)], "gap": r.normalized_gap()}


CASES_QUICK = ((100, 50, False), (1000, 50, False), (100, 50, True))
CASES_FULL = CASES_QUICK + ((1000, 500, False), (1000, 50, True))


def _runs(full: bool) -> List[Run]:
    runs = [Run(f"{'two' if two else 'one'} {n} {m}", None, 1, convergence, args=(n, m, two)) for n, m, two in (CASES_FULL if full else CASES_QUICK)]
    for loss in (0.0, 0.1):
        runs += [Run(f"loss {loss}", None, s, fault_tolerance, args=(100, 50, loss)) for s in range(1, (3 if full else 1) + 1)]
    return runs


@experiment(
    "drum/admm-convergence",
    "DRUM §III-E, Fig. 4-6",
    "ADMM iterations to the optimum on random instances; 10% of host results lost",
    _runs,
    doc=DOC,
)
def _summary(m: Dict[str, List[dict]]) -> List[Row]:
    rows = []
    for label, ms in m.items():
        if not label.startswith(("one ", "two ")):
            continue
        op, n, mm = label.split()
        r = ms[0]
        what = f"{op}-sided, n={n}, m={mm}"
        hit = r["to_99.5"]
        if r["fstar"] <= 0:
            rows.append(Row(f"iterations to 99.5% of optimum, {what}", "< 20", "undefined", None, "f* <= 0 here: a percentage of the optimum means nothing"))
        else:
            rows.append(Row(f"iterations to 99.5% of optimum, {what}", "< 20", str(hit) if hit else "not reached", hit is not None and hit < 20))
        rows.append(Row(f"iterations to gap 1e-4, {what}", "-", str(r["to_1e-4"]), None, "normalized gap (f* - f)/sum w: the stricter measure braid judges by"))
    clean, lossy = m["loss 0.0"], m["loss 0.1"]
    for k, g in enumerate(("1e-2", "1e-3", "1e-4")):
        a = [c["to"][k] for c in clean]
        b = [x["to"][k] for x in lossy]
        reached = all(x is not None for x in a + b)
        ok = reached and mean(b) <= 1.25 * mean(a)
        shown = f"{mean(b):.0f} vs {mean(a):.0f} lossless" if reached else "not reached"
        rows.append(Row(f"10% lost: iterations to gap {g}", "small cost early", shown, ok, "two-sided, n=100, m=50; the paper: < 1.5% of the optimum early"))
    late = mean(abs(x["gap"] - c["gap"]) for c, x in zip(clean, lossy))
    rows.append(Row("10% lost: gap after convergence minus lossless", "~0", f"{late:.1e}", late < 1e-4))
    return rows
