"""DRUM ADMM sharded over MPI ranks (mpi4py), for problems past one machine's cores.

Each rank owns a contiguous range of hosts and runs the same Rust per-host kernels as the local
solver (threaded inside the rank) on them. Per iteration:

1. x-update of the own hosts (WQE capacity, per-host Newton); h for the own sender pairs;
2. row sums of h: each rank sums its own pairs into the row vector, one ``Allreduce`` (for
   one-sided operations every row has a single owner, so this is an exact gather);
3. z- and dual update of the own CQ rows (rank 0 also the fabric-link rows);
4. the updated (z, v, dv) rows are exchanged with one ``Allreduce`` of the owners' entries;
5. y-update of the own pairs, residual sums by ``Allreduce``; rank 0 decides stop/rho and
   broadcasts the decision, so every rank takes the same path.

Lost results (``loss``) use the same seeded mask on every rank. The result equals the local
solve up to floating-point summation order (bit-identical for one-sided problems).

Run: ``mpiexec -n 4 python -m braid.drum.mpi --n 1000 --m 500 --op two --out result.npz``.

Known limitation: every rank holds the whole problem description (it is generated from the seed
or loaded identically on each rank) and the exchanged row vectors are full length; the arithmetic
is sharded, the memory of the instance is not.
"""

from __future__ import annotations

import json
import time
from typing import Optional

import numpy as np

from .. import _core
from .model import Problem, Result, _result, admm_options


def solve_mpi(problem: Problem, comm=None, **options) -> Optional[Result]:
    """Sharded ADMM; returns the Result on rank 0 and None on the other ranks."""
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    n, m = problem.n, problem.m
    h0, h1 = rank * n // size, (rank + 1) * n // size
    opts = admm_options(**options)
    opts["trace"] = False
    st = _core.DrumAdmm(problem._core, json.dumps(opts))
    rows = st.rows
    nn = n * m
    own = np.zeros(rows, dtype=bool)
    own[h0 * m:h1 * m] = True
    if rank == 0:
        own[nn:] = True
    f = lambda b: np.frombuffer(b, dtype=np.float64)  # noqa: E731
    tr = {k: [] for k in ("r_pri", "r_dual", "eps_pri", "eps_dual", "rho", "time")}
    lost_counts = []
    converged = False
    t0 = time.perf_counter()
    k = 0
    hsum = np.empty(rows)
    buf = np.empty(3 * rows)
    out3 = np.empty(3 * rows)
    for k in range(1, opts["max_iter"] + 1):
        lost = st.lost_mask(k)
        if opts["loss_prob"] > 0:
            lost_counts.append(int(np.frombuffer(lost, dtype=np.uint8).sum()))
        st.x_step(lost, h0, h1)
        comm.Allreduce(f(st.partial_rows(h0, h1)), hsum, op=MPI.SUM)
        st.set("hsum", hsum.tobytes())
        st.z_step(h0, h1, rank == 0)
        for j, name in enumerate(("z", "v", "dv")):
            buf[j * rows:(j + 1) * rows] = np.where(own, f(st.get(name)), 0.0)
        comm.Allreduce(buf, out3, op=MPI.SUM)
        for j, name in enumerate(("z", "v", "dv")):
            st.set(name, out3[j * rows:(j + 1) * rows].tobytes())
        sums = np.array(st.y_step(h0, h1))
        tot = np.empty(5)
        comm.Allreduce(sums, tot, op=MPI.SUM)
        tot = comm.bcast(tuple(float(v) for v in tot), root=0)
        r, d, ep, ed = st.tolerances(tot)
        for name, v in zip(("r_pri", "r_dual", "eps_pri", "eps_dual", "rho", "time"),
                           (r, d, ep, ed, st.rho, time.perf_counter() - t0)):
            tr[name].append(v)
        stop = opts["stop"] != "none" and r <= ep and d <= ed and k >= opts["min_iter"]
        if stop:
            converged = True
            break
        st.adapt(tot)
    solve_time = time.perf_counter() - t0
    # gather x and the per-host multipliers
    x = np.zeros(nn)
    x[h0 * m:h1 * m] = f(st.get("x"))[h0 * m:h1 * m]
    xs = np.empty(nn)
    comm.Allreduce(x, xs, op=MPI.SUM)
    st.set("x", xs.tobytes())
    for name in ("lam", "mu"):
        v = np.zeros(n)
        v[h0:h1] = f(st.get(name))[h0:h1]
        vs = np.empty(n)
        comm.Allreduce(v, vs, op=MPI.SUM)
        st.set(name, vs.tobytes())
    if rank != 0:
        return None
    d = st.finish(k, converged, solve_time)
    res = _result(d, n, m, problem.weight_sum, options.get("reference"))
    res.method = f"admm-mpi[{size}]"
    res.trace_arrays = {kk: np.asarray(v, dtype=np.float64) for kk, v in tr.items()}
    if lost_counts:
        res.trace_arrays["lost"] = np.asarray(lost_counts, dtype=np.uint32)
    return res


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m braid.drum.mpi", description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--m", type=int, default=50)
    ap.add_argument("--op", choices=["one", "two"], default="one")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--beta", type=float, default=1e-3)
    ap.add_argument("--k", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--loss", type=float, default=0.0)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--max-iter", type=int, default=5000)
    ap.add_argument("--out", default=None, help="write x, z and a summary (.npz) on rank 0")
    a = ap.parse_args(argv)
    p = Problem.random(a.n, a.m, two_sided=a.op == "two", alpha=a.alpha, beta=a.beta, k=a.k, seed=a.seed)
    r = solve_mpi(p, loss=a.loss, loss_seed=a.seed, eps_abs=a.eps, eps_rel=a.eps, max_iter=a.max_iter)
    if r is not None:
        s = r.summary()
        print(json.dumps(s))
        if a.out:
            np.savez(a.out, x=r.x, z=r.z, x_feasible=r.x_feasible, summary=json.dumps(s),
                     r_pri=r.trace_arrays["r_pri"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
