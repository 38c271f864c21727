"""DRUM: the RDMA network-utility-maximisation model and its solvers (Rust core).

Quick use::

    from braid import drum
    p = drum.Problem.random(n=100, m=50, two_sided=True, alpha=1.0, seed=1)
    r = drum.solve(p, "admm")            # Algorithm 1 (one-sided) / 2 (two-sided)
    ref = drum.solve(drum.Problem.random(100, 50, seed=1), "exact")  # one-sided reference
    r.trace                               # polars DataFrame, one row per iteration
    r.x, r.z                              # (n, m) allocations

See ``docs/drum.md`` for the model, what is sound and what differs from the paper.
"""

from .model import (
    MAX_ALPHA,
    DrumInputError,
    Problem,
    Result,
    rounds,
    select_topk,
    solve,
)

__all__ = ["MAX_ALPHA", "DrumInputError", "Problem", "Result", "rounds", "select_topk", "solve"]
