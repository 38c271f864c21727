"""DRUM ADMM sharded over MPI (`mpiexec -n 2`/`3`, one machine) equals the local solve, with
every rank holding only its own hosts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from braid import drum as D

MPIEXEC = shutil.which("mpiexec")
try:
    import mpi4py  # noqa: F401

    HAVE_MPI4PY = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_MPI4PY = False

pytestmark = pytest.mark.skipif(
    MPIEXEC is None or not HAVE_MPI4PY,
    reason="needs an MPI implementation (mpiexec) and mpi4py: run scripts/ci-install-mpi.sh",
)

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", RAYON_NUM_THREADS="1")


def mpirun(ranks, *args):
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, *args]
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def run_cli(tmp_path, ranks, *args):
    out = tmp_path / "res.npz"
    mpirun(ranks, "-m", "braid.drum.mpi", *args, "--out", str(out))
    z = np.load(out)
    return z, json.loads(str(z["summary"]))


@pytest.mark.parametrize("op,loss,ranks", [("one", 0.0, 2), ("two", 0.0, 2), ("two", 0.1, 2),
                                           ("two", 0.0, 1), ("two", 0.0, 3), ("one", 0.0, 3),
                                           ("two", 0.1, 4)])
def test_sharded_equals_local(tmp_path, op, loss, ranks):
    n, m, seed = 37, 12, 5
    z, s = run_cli(tmp_path, ranks, "--n", str(n), "--m", str(m), "--op", op, "--seed", str(seed),
                   "--loss", str(loss))
    p = D.Problem.random(n, m, two_sided=op == "two", seed=seed)
    r = D.solve(p, "admm", loss=loss, loss_seed=seed)
    assert s["converged"] and r.converged
    assert s["iterations"] == r.iterations
    if op == "one":
        np.testing.assert_array_equal(z["x"], r.x)
    else:
        # the rows' partial sums are added in rank order: measured ~1e-15
        np.testing.assert_allclose(z["x"], r.x, rtol=1e-12, atol=0)
    assert abs(s["objective_feasible"] - r.objective_feasible) / p.weight_sum < 1e-12
    assert abs(s["dual_bound"] - r.dual_bound) / p.weight_sum < 1e-9


@pytest.mark.parametrize("op", ["one", "two"])
def test_sharded_certified_stop_equals_local(tmp_path, op):
    # the Boyd stop is out of reach (eps 1e-12): the run stops on its certified duality gap
    n, m, seed = 37, 12, 5
    args = ["--n", str(n), "--m", str(m), "--op", op, "--seed", str(seed), "--loss", "0.1",
            "--eps", "1e-12", "--certified-gap-tol", "1e-4", "--certify-every", "5"]
    z, s = run_cli(tmp_path, 2, *args)
    p = D.Problem.random(n, m, two_sided=op == "two", seed=seed)
    r = D.solve(p, "admm", loss=0.1, loss_seed=seed, eps_abs=1e-12, eps_rel=1e-12,
                certified_gap_tol=1e-4, certify_every=5)
    assert s["converged"] and r.converged
    assert s["iterations"] == r.iterations
    np.testing.assert_array_equal(z["certified_iter"], r.trace_arrays["certified_iter"])
    np.testing.assert_allclose(z["certified_gap"], r.trace_arrays["certified_gap"], rtol=0,
                               atol=1e-9)
    assert z["certified_gap"][-1] <= 1e-4 < z["certified_gap"][0]
    assert int(z["certified_iter"][-1]) == s["iterations"]


SCRIPT = textwrap.dedent("""
    import sys, numpy as np, scipy.sparse as sp
    from mpi4py import MPI
    from braid import drum as D
    from braid.drum import mpi as M

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    out = sys.argv[1]
    # an instance from arrays with guarantees, preemption and a top-k set (every rank can
    # rebuild it here; each passes only its rows below)
    full = D.Problem.random(19, 6, two_sided=True, seed=8, k=4)
    A = full.arrays()
    g = np.where(A["active"] & (np.arange(19 * 6).reshape(19, 6) % 3 == 0), 0.4, 0.0)
    r_ = np.where(np.arange(19 * 6).reshape(19, 6) % 4 == 0, 0.3, 0.0)
    ptr, dst, frac = A["B"]
    B = sp.csr_matrix((frac, dst, ptr), shape=(19 * 6, 19))
    prob = D.Problem.from_arrays(A["w"], A["a"], A["Q"], A["C"], B=B, active=A["active"],
                                 guarantee=g, preempt=r_)
    # 1. scattered from rank 0 (the others pass None)
    sh = M.Shard.scatter(prob if rank == 0 else None)
    res1 = M.solve_mpi(sh)
    # 2. each rank passes its own block (uneven: rank 0 takes fewer hosts)
    cuts = [0] + [3 + 8 * (s - 1) for s in range(1, size)] + [19]
    a, b = cuts[rank], cuts[rank + 1]
    sh2 = M.Shard.from_arrays(A["w"][a:b], A["a"][a:b], A["Q"][a:b], A["C"][a:b],
                              B=B[a * 6:b * 6], active=A["active"][a:b], guarantee=g[a:b],
                              preempt=r_[a:b])
    assert (sh2.h0, sh2.h1) == (a, b)
    res2 = M.solve_mpi(sh2, gather=False)
    x2 = comm.gather(res2.x, root=0)
    # 3. bad input on one rank only: every rank gets the error, nobody hangs
    Q = A["Q"][a:b].copy()
    if rank == size - 1:
        Q[0] = -1.0
    try:
        M.Shard.from_arrays(A["w"][a:b], A["a"][a:b], Q, A["C"][a:b], B=B[a * 6:b * 6])
        err = None
    except D.DrumInputError as e:
        err = (e.param, str(e))
    errs = comm.gather(err, root=0)
    if rank == 0:
        loc = D.solve(prob, "admm")
        np.savez(out, x1=res1.x, x2=np.vstack(x2), xl=loc.x, it1=res1.iterations,
                 it2=res2.iterations, itl=loc.iterations, f1=res1.objective_feasible,
                 fl=loc.objective_feasible, wsum=prob.weight_sum,
                 errs=np.array([repr(e) for e in errs]))
""")


def test_pieces_from_arrays_and_scatter(tmp_path):
    script = tmp_path / "drum_mpi_arrays.py"
    script.write_text(SCRIPT)
    out = tmp_path / "arrays.npz"
    mpirun(3, str(script), str(out))
    z = np.load(out)
    assert int(z["it1"]) == int(z["itl"]) == int(z["it2"])
    np.testing.assert_allclose(z["x1"], z["xl"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(z["x2"], z["xl"], rtol=1e-12, atol=1e-14)
    assert abs(float(z["f1"]) - float(z["fl"])) / float(z["wsum"]) < 1e-12
    errs = [str(e) for e in z["errs"]]
    assert len(errs) == 3
    for e in errs:
        # rank 2 holds hosts 11..19 and broke its first capacity
        assert "'Q'" in e and "host 11" in e, e
