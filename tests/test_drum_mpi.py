"""DRUM ADMM sharded over MPI (`mpiexec -n 2`, one machine) equals the local solve."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

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


def run_mpi(tmp_path, ranks, *args):
    out = tmp_path / "res.npz"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", RAYON_NUM_THREADS="1")
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "braid.drum.mpi", *args, "--out", str(out)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    z = np.load(out)
    return z, json.loads(str(z["summary"]))


@pytest.mark.parametrize("op,loss", [("one", 0.0), ("two", 0.0), ("two", 0.1)])
def test_sharded_equals_local(tmp_path, op, loss):
    n, m, seed = 37, 12, 5
    z, s = run_mpi(tmp_path, 2, "--n", str(n), "--m", str(m), "--op", op, "--seed", str(seed),
                   "--loss", str(loss))
    p = D.Problem.random(n, m, two_sided=op == "two", seed=seed)
    r = D.solve(p, "admm", loss=loss, loss_seed=seed)
    assert s["converged"] and r.converged
    assert s["iterations"] == r.iterations
    if op == "one":
        np.testing.assert_array_equal(z["x"], r.x)
    else:
        np.testing.assert_allclose(z["x"], r.x, rtol=1e-9, atol=1e-12)
    assert abs(s["objective_feasible"] - r.objective_feasible) / p.weight_sum < 1e-9
