"""DRUM solver benchmark (not a test): time per ADMM iteration, iterations and wall time to a
normalized gap of 1e-4 (and to the paper's 99.5%), peak memory, and the ratio to CVXPY (ECOS,
Clarabel) where CVXPY can solve the instance.

    python benches/drum_bench.py                 # paper sizes up to n=1e4, m=500
    python benches/drum_bench.py --large         # adds n=1e4, m=5000 (5e7 variables per vector)
    python benches/drum_bench.py --cvxpy         # adds CVXPY ECOS/Clarabel at n<=1000, m=50
    python benches/drum_bench.py --out bench.json
    python benches/drum_bench.py --case 10000 500 two --certify 400          # gap per iteration
    python benches/drum_bench.py --case 10000 5000 two --certify 300 --no-trace   # final gap only
    python benches/drum_bench.py --case 10000 5000 two --certified-stop 1e-4 --iters 1500
                                 # until the gap certified every 25 iterations is below 1e-4

Each case runs in a fresh process so that its peak RSS is its own. Threads: RAYON_NUM_THREADS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

SIZES = [(100, 50), (1000, 50), (1000, 500), (10000, 500)]
LARGE = [(10000, 5000)]


def cvx_time(n, m, op, seed, solver):
    import cvxpy as cp
    import numpy as np
    import scipy.sparse as sp

    from braid import drum as D

    p = D.Problem.random(n, m, two_sided=op == "two", seed=seed)
    arr = p.arrays()
    N = n * m
    a = arr["a"].ravel()
    rows, cols, vals = list(range(N)), list(range(N)), list(a)
    if op == "two":
        ptr, dst, frac = arr["B"]
        for s in range(N):
            l, j = divmod(s, m)
            for q in range(int(ptr[s]), int(ptr[s + 1])):
                i = int(dst[q])
                r = i * m + j
                rows.append(r)
                cols.append(s)
                vals.append(a[r] * frac[q])
    P = sp.csr_matrix((vals, (rows, cols)), shape=(N, N))
    x = cp.Variable(N)
    z = P @ x
    obj = arr["w"].ravel() @ cp.log(x) - p.beta * cp.sum(cp.power(z, -2))
    S = sp.kron(sp.eye(n), np.ones((1, m)))
    cons = [S @ x <= arr["Q"], S @ z <= arr["C"]]
    prob = cp.Problem(cp.Maximize(obj), cons)
    t = time.perf_counter()
    prob.solve(solver=solver)
    return time.perf_counter() - t, prob.value, prob.status


def run_case(n, m, op, seed, iters_timing, timing_only=False):
    from braid import drum as D

    out = {"n": n, "m": m, "op": op, "variables": n * m}
    t = time.perf_counter()
    p = D.Problem.random(n, m, two_sided=op == "two", seed=seed)
    out["generate_s"] = time.perf_counter() - t
    # reference optimum
    t = time.perf_counter()
    if timing_only:
        fstar = None
        out["reference"] = None
    elif op == "one":
        ref = D.solve(p, "exact")
        fstar = ref.objective
        out["exact_s"] = time.perf_counter() - t
        out["exact_duality_gap"] = ref.duality_gap
        out["reference"] = "exact per-host solve"
    elif n * m <= 5e5:
        ref = D.solve(p, "admm", eps_abs=1e-9, eps_rel=1e-9, max_iter=20000, trace=False)
        fstar = ref.dual_bound  # an upper bound: gaps below are upper bounds on the true gap
        out["reference"] = "dual bound of a tight ADMM run (gap is an upper bound)"
        out["reference_s"] = time.perf_counter() - t
    else:
        fstar = None
        out["reference"] = None
    # time per iteration, no trace: the median over the iterations after the first (the first
    # ones start cold, without warm-started multipliers and Newton guesses)
    import numpy as np

    r = D.solve(p, "admm", stop="none", max_iter=iters_timing, trace=False, dual_bound=False)
    dt = np.diff(np.concatenate([[0.0], r.trace_arrays["time"]]))
    out["setup_s"] = r.setup_time
    out["first_iter_s"] = float(dt[0])
    out["s_per_iter"] = float(np.median(dt[1:])) if len(dt) > 1 else float(dt[0])
    # the early iterations are dearer (the multipliers' searches start far off): the mean over
    # the run, first included, is what a solve of that many iterations costs per iteration
    out["mean_s_per_iter"] = float(np.mean(dt))
    out["ns_per_var_iter"] = 1e9 * out["s_per_iter"] / (n * m)
    if fstar is not None:
        r = D.solve(p, "admm", reference=fstar, gap_tol=1e-4, max_iter=3000)
        out["iters_to_gap_1e-4"] = r.iterations_to(1e-4)
        if fstar > 0:
            of = r.trace_arrays["objective_feasible"]
            hit = [i for i, v in enumerate(of) if v >= 0.995 * fstar]
            out["iters_to_99.5pct"] = hit[0] + 1 if hit else None
        # equal split (the weak baseline of the "99.5%" measure)
        arr = p.arrays()
        xe = (arr["Q"] / arr["active"].sum(axis=1))[:, None] * arr["active"]
        ze = p.coupling(xe)
        theta = min(1.0, float((arr["C"] / ze.sum(axis=1)).min()))
        xe = xe * theta
        out["equal_split_gap"] = (fstar - p.objective(xe)) / p.weight_sum
        if out["iters_to_gap_1e-4"]:
            out["s_to_gap_1e-4"] = out["iters_to_gap_1e-4"] * out["s_per_iter"]
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    return out


def run_certified_stop(n, m, op, seed, iters, tol, every):
    """Run ADMM until the gap certified every `every` iterations (duality gap of the feasible
    recovery, no f* needed) is below `tol`, at most `iters` iterations, without the trace."""
    from braid import drum as D

    out = {"n": n, "m": m, "op": op, "variables": n * m, "max_iter": iters, "tol": tol, "every": every}
    t = time.perf_counter()
    p = D.Problem.random(n, m, two_sided=op == "two", seed=seed)
    out["generate_s"] = time.perf_counter() - t
    r = D.solve(p, "admm", stop="none", max_iter=iters, trace=False, dual_bound=True,
                certified_gap_tol=tol, certify_every=every)
    out["setup_s"] = r.setup_time
    out["solve_s"] = r.solve_time
    out["wall_s"] = time.perf_counter() - t
    out["iterations"] = r.iterations
    out["certified"] = r.converged
    out["certified_iter"] = [int(v) for v in r.trace_arrays["certified_iter"]]
    out["certified_gap"] = [float(v) for v in r.trace_arrays["certified_gap"]]
    out["duality_gap"] = r.duality_gap
    out["rho_final"] = r.rho_final
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    return out


def run_certify(n, m, op, seed, iters, trace=True):
    """Where f* is unknown (two-sided, large): run `iters` ADMM iterations and certify with the
    final dual bound UB >= f*: every iteration's (UB - f(x~_k))/sum w bounds its true gap from
    above (with the trace; without it, only the last iteration's duality gap, and no trace cost)."""
    import numpy as np

    from braid import drum as D

    out = {"n": n, "m": m, "op": op, "variables": n * m, "iterations": iters, "traced": trace}
    t = time.perf_counter()
    p = D.Problem.random(n, m, two_sided=op == "two", seed=seed)
    out["generate_s"] = time.perf_counter() - t
    r = D.solve(p, "admm", stop="none", max_iter=iters, trace=trace, dual_bound=True)
    out["setup_s"] = r.setup_time
    out["solve_s"] = r.solve_time
    out["wall_s"] = time.perf_counter() - t
    out["duality_gap"] = r.duality_gap
    if trace:
        g = (r.dual_bound - r.trace_arrays["objective_feasible"]) / p.weight_sum
        hit = [i for i, v in enumerate(g) if v <= 1e-4]
        tm = r.trace_arrays["time"]
        out["iters_to_certified_1e-4"] = hit[0] + 1 if hit else None
        out["traced_s_to_1e-4"] = float(tm[hit[0]]) if hit else None
        out["traced_s_per_iter"] = float(np.median(np.diff(tm)))
        out["certified_gap_every_25"] = [float(v) for v in g[::25]]
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--cvxpy", action="store_true")
    ap.add_argument("--ops", default="one,two")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--iters", type=int, default=10, help="iterations for the per-iteration timing")
    ap.add_argument("--case", nargs=3, metavar=("N", "M", "OP"), help=argparse.SUPPRESS)
    ap.add_argument("--cvx-case", nargs=4, metavar=("N", "M", "OP", "SOLVER"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None)
    ap.add_argument("--timing-only", action="store_true", help="only the time per iteration")
    ap.add_argument("--certify", type=int, default=0, metavar="ITERS",
                    help="with --case: ITERS iterations certified by the final dual bound")
    ap.add_argument("--no-trace", action="store_true", help="with --certify: the final gap only")
    ap.add_argument("--certified-stop", type=float, default=None, metavar="TOL",
                    help="with --case: stop when the gap certified every --check-every iterations "
                         "is below TOL (at most --iters iterations)")
    ap.add_argument("--check-every", type=int, default=25)
    ap.add_argument("--cvx-timeout", type=float, default=600)
    ap.add_argument("--cvx-two-max-n", type=int, default=100,
                    help="largest n for CVXPY on two-sided instances (n=1000 takes minutes)")
    a = ap.parse_args()
    if a.case and a.certified_stop is not None:
        print(json.dumps(run_certified_stop(int(a.case[0]), int(a.case[1]), a.case[2], a.seed, a.iters,
                                            a.certified_stop, a.check_every)))
        return
    if a.case and a.certify:
        print(json.dumps(run_certify(int(a.case[0]), int(a.case[1]), a.case[2], a.seed, a.certify,
                                     not a.no_trace)))
        return
    if a.case:
        print(json.dumps(run_case(int(a.case[0]), int(a.case[1]), a.case[2], a.seed, a.iters, a.timing_only)))
        return
    if a.cvx_case:
        t, v, st = cvx_time(int(a.cvx_case[0]), int(a.cvx_case[1]), a.cvx_case[2], a.seed, a.cvx_case[3])
        print(json.dumps({"time_s": t, "value": v, "status": st}))
        return
    results = []
    sizes = SIZES + (LARGE if a.large else [])
    for op in a.ops.split(","):
        for n, m in sizes:
            cmd = [sys.executable, __file__, "--case", str(n), str(m), op, "--seed", str(a.seed),
                   "--iters", str(a.iters if n * m < 1e7 else 6)] + (["--timing-only"] if a.timing_only else [])
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                res = {"n": n, "m": m, "op": op, "error": p.stderr.strip().splitlines()[-1:]}
            else:
                res = json.loads(p.stdout.strip().splitlines()[-1])
            if a.cvxpy and m <= 50 and n <= (1000 if op == "one" else a.cvx_two_max_n):
                for solver in ("ECOS", "CLARABEL"):
                    try:
                        q = subprocess.run([sys.executable, __file__, "--cvx-case", str(n), str(m), op, solver,
                                            "--seed", str(a.seed)], capture_output=True, text=True,
                                           timeout=a.cvx_timeout)
                    except subprocess.TimeoutExpired:
                        res[f"cvxpy_{solver.lower()}_s"] = f">{a.cvx_timeout}"
                        continue
                    if q.returncode == 0:
                        c = json.loads(q.stdout.strip().splitlines()[-1])
                        res[f"cvxpy_{solver.lower()}_s"] = c["time_s"]
                        if res.get("s_to_gap_1e-4"):
                            res[f"ratio_{solver.lower()}"] = c["time_s"] / res["s_to_gap_1e-4"]
                    else:
                        res[f"cvxpy_{solver.lower()}_error"] = q.stderr.strip().splitlines()[-1:]
            results.append(res)
            print(json.dumps(res), flush=True)
    print()
    print("| op | n | m | vars | ms/iter | ns/var/iter | iters to 1e-4 | s to 1e-4 | iters to 99.5% | "
          "equal-split gap | exact s | ECOS s | Clarabel s | ECOS ratio | peak GB |")
    print("|" + "---|" * 15)
    f = lambda v, fmt="{:.3g}": "-" if v is None else (v if isinstance(v, str) else fmt.format(v))  # noqa: E731
    for r in results:
        print(f"| {r['op']} | {r['n']} | {r['m']} | {r['n'] * r['m']:.0e} | {f(r.get('s_per_iter') and 1e3 * r['s_per_iter'])} "
              f"| {f(r.get('ns_per_var_iter'))} | {f(r.get('iters_to_gap_1e-4'), '{}')} | {f(r.get('s_to_gap_1e-4'))} "
              f"| {f(r.get('iters_to_99.5pct'), '{}')} | {f(r.get('equal_split_gap'))} | {f(r.get('exact_s'))} "
              f"| {f(r.get('cvxpy_ecos_s'))} | {f(r.get('cvxpy_clarabel_s'))} | {f(r.get('ratio_ecos'))} | {f(r.get('peak_rss_gb'))} |")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"threads": os.environ.get("RAYON_NUM_THREADS", "default"), "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
