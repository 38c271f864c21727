"""Python API of the DRUM solver: problems from arrays or the paper's generator, solve, results."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .. import _core

# The largest alpha the solvers take (braid_drum::problem::MAX_ALPHA, which the Rust core
# enforces; here for the CLI's message and for callers): see docs/drum.md, "Numeric inputs".
MAX_ALPHA = 100.0

#: Raised for invalid input; ``param`` names the parameter at fault, ``message`` says why.
DrumInputError = _core.DrumError

METHODS = ("admm", "exact", "dual")
STOP_RULES = ("boyd", "paper", "none")


def _err(param: str, message: str) -> Exception:
    e = DrumInputError(f"{param}: {message}")
    e.param = param
    e.message = message
    return e


def _f64(name: str, v, shape: tuple) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as ex:
        raise _err(name, f"must be numeric ({ex})") from None
    if a.shape != shape:
        if a.size == int(np.prod(shape)) and a.ndim == 1 and len(shape) == 2:
            a = a.reshape(shape)
        else:
            raise _err(name, f"has shape {a.shape}, expected {shape}")
    if not np.all(np.isfinite(a)):
        raise _err(name, "contains NaN or infinity")
    return np.ascontiguousarray(a)


def _traffic_csr(B, n: int, m: int, senders: Optional[int] = None):
    """B as CSR over sender entries: (ptr uint64, dst uint32, frac float64). ``senders``: the
    number of sender hosts (rows / m) when B holds only some hosts' rows (an MPI rank's), the
    columns still being all ``n`` hosts."""
    ns = n if senders is None else senders
    nr = ns * m
    if isinstance(B, tuple) and len(B) == 3:
        ptr, dst, frac = (np.asarray(B[0]), np.asarray(B[1]), np.asarray(B[2]))
    elif hasattr(B, "tocsr"):
        if tuple(B.shape) != (nr, n):
            raise _err("B", f"has shape {tuple(B.shape)}, expected (n*m, n) = ({nr}, {n})")
        c = B.tocsr()
        c.sum_duplicates()
        c.sort_indices()
        ptr, dst, frac = c.indptr, c.indices, c.data
    else:
        d = np.asarray(B, dtype=np.float64)
        if d.shape != (nr, n):
            raise _err("B", f"has shape {d.shape}, expected (n*m, n) = ({nr}, {n})")
        rows, cols = np.nonzero(d)
        frac = d[rows, cols]
        ptr = np.zeros(nr + 1, dtype=np.uint64)
        np.add.at(ptr, rows + 1, 1)
        ptr = np.cumsum(ptr)
        dst = cols
    ptr = np.ascontiguousarray(ptr, dtype=np.uint64)
    dst = np.ascontiguousarray(dst, dtype=np.uint32)
    frac = np.ascontiguousarray(frac, dtype=np.float64)
    if len(ptr) != nr + 1:
        raise _err("B", f"CSR pointer has length {len(ptr)}, expected n*m+1 = {nr + 1}")
    return ptr, dst, frac


def _gen_params(n, m, *, two_sided, alpha, beta, k, seed, units, fanout, batch_max, q_range,
                c_range, w_range) -> str:
    """The generator parameters of the paper's random instances, checked, as JSON."""
    for name, v in (("n", n), ("m", m)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise _err(name, f"must be an integer >= 1, got {v!r}")
    if k is not None and (not isinstance(k, (int, np.integer)) or k < 1):
        raise _err("k", f"must be an integer >= 1, got {k!r}")
    if not (isinstance(alpha, (int, float)) and alpha > 0 and math.isfinite(alpha)):
        raise _err("alpha", f"must be a finite number > 0, got {alpha!r}")
    if not (isinstance(beta, (int, float)) and beta >= 0 and math.isfinite(beta)):
        raise _err("beta", f"must be a finite number >= 0, got {beta!r}")
    if seed < 0:
        raise _err("seed", "must be >= 0")
    if two_sided and fanout < 1:
        raise _err("fanout", "two-sided instances need fanout >= 1")
    return json.dumps(dict(
        n=int(n), m=int(m), two_sided=bool(two_sided), alpha=float(alpha), beta=float(beta),
        k=None if k is None else int(k), seed=int(seed), units=float(units), fanout=int(fanout),
        batch_max=int(batch_max), q_range=list(map(float, q_range)),
        c_range=list(map(float, c_range)), w_range=list(map(float, w_range)),
    ))


def _host_arrays(w, a, Q, C, *, B, two_sided, active, guarantee, preempt, n_total=None, h0=0):
    """Checked per-host arrays as bytes: (n, m, (w, a, Q, C), keyword bytes, two_sided). With
    ``n_total``, they are hosts ``h0..`` of an instance of ``n_total`` hosts (B's columns)."""
    Qa = np.asarray(Q, dtype=np.float64)
    if Qa.ndim != 1:
        raise _err("Q", f"must be a vector (one capacity per host), got shape {Qa.shape}")
    n = Qa.shape[0]
    wa = np.asarray(w, dtype=np.float64)
    if wa.ndim != 2 or wa.shape[0] != n:
        raise _err("w", f"has shape {wa.shape}, expected (n, m) with n = {n} (the length of Q)")
    m = wa.shape[1]
    w_ = _f64("w", wa, (n, m))
    a_ = _f64("a", a, (n, m))
    Q_ = _f64("Q", Qa, (n,))
    C_ = _f64("C", C, (n,))
    if np.any(Q_ <= 0):
        i = int(np.argmax(Q_ <= 0))
        raise _err("Q", f"capacities must be > 0; host {h0 + i} has {Q_[i]}")
    if np.any(C_ <= 0):
        i = int(np.argmax(C_ <= 0))
        raise _err("C", f"capacities must be > 0; host {h0 + i} has {C_[i]}")
    kw: dict[str, Any] = {}
    if active is not None:
        act = np.asarray(active)
        if act.shape != (n, m):
            raise _err("active", f"has shape {act.shape}, expected {(n, m)}")
        kw["active"] = np.ascontiguousarray(act.astype(np.uint8)).tobytes()
    if guarantee is not None:
        kw["guarantee"] = _f64("guarantee", guarantee, (n, m)).tobytes()
    if preempt is not None:
        kw["preempt"] = _f64("preempt", preempt, (n, m)).tobytes()
    if two_sided is None:
        two_sided = B is not None
    if B is not None:
        ptr, dst, frac = (_traffic_csr(B, n, m) if n_total is None
                          else _traffic_csr(B, n_total, m, senders=n))
        kw.update(b_ptr=ptr.tobytes(), b_dst=dst.tobytes(), b_frac=frac.tobytes())
    elif two_sided:
        raise _err("B", "two-sided operations need the traffic matrix B")
    return n, m, (w_.tobytes(), a_.tobytes(), Q_.tobytes(), C_.tobytes()), kw, two_sided


class Problem:
    """A validated DRUM instance. Rates are in any unit (the solvers scale them)."""

    def __init__(self, core):
        self._core = core

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def random(
        cls,
        n: int = 100,
        m: int = 50,
        *,
        two_sided: bool = False,
        alpha: float = 1.0,
        beta: float = 1e-3,
        k: Optional[int] = None,
        seed: int = 0,
        units: float = 1.0,
        fanout: int = 2,
        batch_max: int = 8,
        q_range=(20.0, 100.0),
        c_range=(15.0, 50.0),
        w_range=(0.5, 2.0),
    ) -> "Problem":
        """The paper's random instance (§III-E): Q ~ U[20,100], C ~ U[15,50] Mops (times
        ``units``), a = 1/batch, weights U[w_range]; two-sided: each application sends to
        ``fanout`` other hosts. ``k``: QP-cache limit, top-k by weight. Same seed, same instance
        on any machine."""
        params = _gen_params(n, m, two_sided=two_sided, alpha=alpha, beta=beta, k=k, seed=seed,
                             units=units, fanout=fanout, batch_max=batch_max, q_range=q_range,
                             c_range=c_range, w_range=w_range)
        return cls(_core.DrumProblem.generate(params))

    @classmethod
    def from_arrays(
        cls,
        w,
        a,
        Q,
        C,
        *,
        alpha: float = 1.0,
        beta: float = 1e-3,
        B=None,
        two_sided: Optional[bool] = None,
        active=None,
        guarantee=None,
        preempt=None,
        links: Optional[dict] = None,
    ) -> "Problem":
        """Build from arrays: ``w``, ``a`` of shape (n, m) (weights; CQEs per WQE), ``Q``, ``C``
        of shape (n,) (WQE / CQE capacities). ``B``: traffic fractions, shape (n*m, n), row
        ``l*m + j`` = application j on host l, column = destination host; scipy sparse, a dense
        array or a CSR triple (indptr, indices, data). ``two_sided`` defaults to ``B is not None``.
        ``active`` (n, m) bool: the top-k selection; ``guarantee`` (n, m): guaranteed rates;
        ``preempt`` (n, m): preemptible-range coefficients r of the SOC constraint
        ``sum x + ||r o x|| <= Q``. ``links``: dict(cap=(L,), paths=(P, 3) int (src, dst, link),
        size=(n, m) optional cost per WQE) — fabric link capacities, needs ``B``."""
        n, m, arrs, kw, two_sided = _host_arrays(w, a, Q, C, B=B, two_sided=two_sided,
                                                 active=active, guarantee=guarantee,
                                                 preempt=preempt)
        if links is not None:
            if "cap" not in links or "paths" not in links:
                raise _err("links", "needs keys 'cap' and 'paths'")
            cap = np.ascontiguousarray(np.asarray(links["cap"], dtype=np.float64).ravel())
            paths = np.asarray(links["paths"])
            if paths.ndim != 2 or paths.shape[1] != 3:
                raise _err("links.paths", f"must have shape (P, 3) (src, dst, link), got {paths.shape}")
            if np.any(paths < 0):
                raise _err("links.paths", "indices must be >= 0")
            kw["link_cap"] = cap.tobytes()
            kw["link_paths"] = np.ascontiguousarray(paths.astype(np.uint32)).tobytes()
            if links.get("size") is not None:
                kw["link_size"] = _f64("links.size", links["size"], (n, m)).tobytes()
        core = _core.DrumProblem.from_arrays(n, m, float(alpha), float(beta), *arrs,
                                             two_sided=bool(two_sided), **kw)
        return cls(core)

    # ---- views --------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self._core.n

    @property
    def m(self) -> int:
        return self._core.m

    @property
    def alpha(self) -> float:
        return self._core.alpha

    @property
    def beta(self) -> float:
        return self._core.beta

    @property
    def two_sided(self) -> bool:
        return self._core.two_sided

    @property
    def weight_sum(self) -> float:
        return self._core.weight_sum()

    def arrays(self) -> dict:
        """numpy views of the data: w, a (n, m), Q, C (n,), active (n, m) bool, guarantee,
        preempt (n, m) or None, B as CSR triple (or None)."""
        d = self._core.arrays()
        n, m = self.n, self.m
        out = {
            "w": np.frombuffer(d["w"], dtype=np.float64).reshape(n, m),
            "a": np.frombuffer(d["a"], dtype=np.float64).reshape(n, m),
            "Q": np.frombuffer(d["Q"], dtype=np.float64),
            "C": np.frombuffer(d["C"], dtype=np.float64),
            "active": np.frombuffer(d["active"], dtype=np.uint8).reshape(n, m).astype(bool),
            "guarantee": None,
            "preempt": None,
            "B": None,
            "links": None,
        }
        if d["guarantee"]:
            out["guarantee"] = np.frombuffer(d["guarantee"], dtype=np.float64).reshape(n, m)
        if d["preempt"]:
            out["preempt"] = np.frombuffer(d["preempt"], dtype=np.float64).reshape(n, m)
        if "b_ptr" in d:
            out["B"] = (
                np.frombuffer(d["b_ptr"], dtype=np.uint64),
                np.frombuffer(d["b_dst"], dtype=np.uint32),
                np.frombuffer(d["b_frac"], dtype=np.float64),
            )
        if "link_cap" in d:
            out["links"] = {
                "cap": np.frombuffer(d["link_cap"], dtype=np.float64),
                "paths": np.frombuffer(d["link_paths"], dtype=np.uint32).reshape(-1, 3),
                "size": np.frombuffer(d["link_size"], dtype=np.float64).reshape(n, m) if d["link_size"] else None,
            }
        return out

    def with_sets(self, active=None, guarantee=None, preempt=None) -> "Problem":
        """A copy with another active set / guarantees / preemption coefficients."""
        n, m = self.n, self.m
        kw = {}
        if active is not None:
            act = np.asarray(active)
            if act.shape != (n, m):
                raise _err("active", f"has shape {act.shape}, expected {(n, m)}")
            kw["active"] = np.ascontiguousarray(act.astype(np.uint8)).tobytes()
        if guarantee is not None:
            kw["guarantee"] = _f64("guarantee", guarantee, (n, m)).tobytes()
        if preempt is not None:
            kw["preempt"] = _f64("preempt", preempt, (n, m)).tobytes()
        return Problem(self._core.with_sets(**kw))

    def coupling(self, x) -> np.ndarray:
        """z = P x for an allocation x (n, m); returns (n, m)."""
        xa = _f64("x", x, (self.n, self.m))
        r = np.frombuffer(self._core.coupling(xa.tobytes()), dtype=np.float64)
        return r[: self.n * self.m].reshape(self.n, self.m)

    def objective(self, x, z=None) -> float:
        """sum w U_alpha(x) - beta sum 1/z^2 over the active entries (z defaults to P x)."""
        xa = _f64("x", x, (self.n, self.m))
        za = self.coupling(xa) if z is None else _f64("z", z, (self.n, self.m))
        return self._core.objective(xa.tobytes(), za.tobytes())

    def __repr__(self) -> str:
        kind = "two-sided" if self.two_sided else "one-sided"
        return f"Problem(n={self.n}, m={self.m}, {kind}, alpha={self.alpha}, beta={self.beta})"


@dataclass
class Result:
    """Outcome of a solve. Allocations are (n, m) arrays in the problem's units."""

    method: str
    x: np.ndarray
    z: np.ndarray
    x_feasible: np.ndarray
    z_feasible: np.ndarray
    objective: float
    objective_feasible: float
    dual_bound: Optional[float]
    iterations: int
    converged: bool
    setup_time: float
    solve_time: float
    lam: np.ndarray
    mu: np.ndarray
    rho_final: float
    weight_sum: float
    trace_arrays: dict = field(repr=False, default_factory=dict)
    reference: Optional[float] = None

    @property
    def trace(self):
        """Per-iteration trace as a polars DataFrame."""
        import polars as pl

        t = dict(self.trace_arrays)
        k = len(t.get("r_pri", []))
        cols = {"iteration": np.arange(1, k + 1, dtype=np.int64)}
        cit = t.pop("certified_iter", np.zeros(0, dtype=np.uint32))
        cgap = t.pop("certified_gap", np.zeros(0))
        for name, v in t.items():
            if len(v) == k:
                cols[name] = v
            elif name == "lost" and len(v) == 0:
                continue
        if len(cit):
            # the certified gap where it was checked (every `certify_every` iterations), else NaN
            c = np.full(k, np.nan)
            c[cit.astype(np.int64) - 1] = cgap
            cols["certified_gap"] = c
        return pl.DataFrame(cols)

    def normalized_gap(self, f_star: Optional[float] = None) -> Optional[float]:
        """(f* - f(feasible allocation)) / sum w."""
        fs = self.reference if f_star is None else f_star
        if fs is None:
            return None
        return (fs - self.objective_feasible) / self.weight_sum

    @property
    def duality_gap(self) -> Optional[float]:
        """(dual bound - feasible objective) / sum w: a certificate, >= the true gap."""
        if self.dual_bound is None:
            return None
        return (self.dual_bound - self.objective_feasible) / self.weight_sum

    def percent_of_optimum(self, f_star: Optional[float] = None) -> Optional[float]:
        """The paper's measure 100 f / f* (only meaningful when both are positive; it is weak:
        an equal split already scores 96-99%)."""
        fs = self.reference if f_star is None else f_star
        if fs is None or fs <= 0 or self.objective_feasible <= 0:
            return None
        return 100.0 * self.objective_feasible / fs

    def iterations_to(self, gap: float) -> Optional[int]:
        """First iteration whose feasible objective is within `gap` (normalized) of the
        reference, from the trace."""
        g = self.trace_arrays.get("gap")
        if g is None or len(g) == 0:
            return None
        idx = np.nonzero(g <= gap)[0]
        return int(idx[0]) + 1 if len(idx) else None

    def summary(self) -> dict:
        return {
            "method": self.method,
            "iterations": self.iterations,
            "converged": self.converged,
            "objective": self.objective,
            "objective_feasible": self.objective_feasible,
            "dual_bound": self.dual_bound,
            "duality_gap": self.duality_gap,
            "normalized_gap": self.normalized_gap(),
            "setup_time_s": self.setup_time,
            "solve_time_s": self.solve_time,
            "rho_final": self.rho_final,
        }


def _result(d: dict, n: int, m: int, wsum: float, reference=None) -> Result:
    f = lambda b: np.frombuffer(b, dtype=np.float64)  # noqa: E731
    tr = {k: (np.frombuffer(v, dtype=np.uint32) if k in ("lost", "certified_iter") else f(v))
          for k, v in d["trace"].items()}
    return Result(
        method=d["method"],
        x=f(d["x"]).reshape(n, m),
        z=f(d["z"]).reshape(n, m),
        x_feasible=f(d["x_feasible"]).reshape(n, m),
        z_feasible=f(d["z_feasible"]).reshape(n, m),
        objective=d["objective"],
        objective_feasible=d["objective_feasible"],
        dual_bound=d["dual_bound"],
        iterations=d["iterations"],
        converged=d["converged"],
        setup_time=d["setup_time"],
        solve_time=d["solve_time"],
        lam=f(d["lambda"]),
        mu=f(d["mu"]),
        rho_final=d["rho_final"],
        weight_sum=wsum,
        trace_arrays=tr,
        reference=reference,
    )


def admm_options(
    *,
    rho: Optional[float] = None,
    rho_policy: str = "adaptive",
    relax: float = 1.6,
    scaling: Optional[bool] = None,
    eps_abs: float = 1e-6,
    eps_rel: float = 1e-6,
    stop: str = "boyd",
    max_iter: int = 5000,
    min_iter: int = 1,
    loss: float = 0.0,
    loss_seed: int = 0,
    trace: bool = True,
    reference: Optional[float] = None,
    gap_tol: Optional[float] = None,
    dual_bound: bool = True,
    row_scaling: bool = True,
    certify_every: int = 0,
    certified_gap_tol: Optional[float] = None,
    pair_penalty: bool = False,
) -> dict:
    """Validated ADMM options. ``rho_policy``: "adaptive" (residual balancing from ``rho`` or
    the automatic start), "fixed" (``rho`` or automatic, never changed), "paper" (no scaling,
    rho = 1e-3 fixed: the paper's setting, which depends on the units). ``certify_every``: every
    that many iterations record the certified gap ``(UB - f(x~))/sum w`` (an upper bound on the
    true normalized gap, no f* needed) in ``trace_arrays["certified_gap"]`` /
    ``["certified_iter"]``; ``certified_gap_tol``: stop at the first check below it (checks every
    25 iterations unless ``certify_every`` says otherwise). ``pair_penalty`` (two-sided): one
    penalty per (row, sender) pair from the sender's curvature, re-estimated at iterations 25,
    50, 100, ...; converges where a binding CQE capacity at alpha >= 2 leaves one penalty per row
    stuck (docs/drum.md, "Per-pair penalties"); not for sharded solves."""
    if rho_policy not in ("adaptive", "fixed", "paper"):
        raise _err("rho_policy", f"must be adaptive, fixed or paper, got {rho_policy!r}")
    if rho is not None and not (rho > 0 and math.isfinite(rho)):
        raise _err("rho", f"must be > 0, got {rho!r}")
    if stop not in STOP_RULES:
        raise _err("stop", f"must be one of {', '.join(STOP_RULES)}, got {stop!r}")
    if not (1.0 <= relax < 2.0):
        raise _err("relax", f"over-relaxation must be in [1, 2), got {relax!r}")
    if not (0.0 <= loss < 1.0):
        raise _err("loss", f"loss probability must be in [0, 1), got {loss!r}")
    if max_iter < 1:
        raise _err("max_iter", "must be >= 1")
    for key, v in (("eps_abs", eps_abs), ("eps_rel", eps_rel)):
        if not (isinstance(v, (int, float, np.floating, np.integer)) and math.isfinite(v) and v >= 0):
            raise _err(key, f"tolerance must be a finite number >= 0, got {v!r}")
    if reference is not None and not math.isfinite(reference):
        raise _err("reference", f"the known optimum must be a finite number, got {reference!r}")
    if gap_tol is not None and not (math.isfinite(gap_tol) and gap_tol >= 0):
        raise _err("gap_tol", f"must be a finite number >= 0, got {gap_tol!r}")
    if not isinstance(certify_every, (int, np.integer)) or certify_every < 0:
        raise _err("certify_every", f"must be an integer >= 0 (0: never), got {certify_every!r}")
    if certified_gap_tol is not None and not (certified_gap_tol > 0 and math.isfinite(certified_gap_tol)):
        raise _err("certified_gap_tol", f"must be a number > 0, got {certified_gap_tol!r}")
    if gap_tol is not None and reference is None:
        raise _err("gap_tol", "needs a reference optimum")
    if rho_policy == "paper":
        rho_v, adaptive, sc = (rho or 1e-3), False, False if scaling is None else scaling
    else:
        rho_v, adaptive, sc = (rho or 0.0), rho_policy == "adaptive", True if scaling is None else scaling
    return dict(
        rho=float(rho_v), adaptive=adaptive, relax=float(relax), scaling=bool(sc),
        eps_abs=float(eps_abs), eps_rel=float(eps_rel), stop=stop, max_iter=int(max_iter),
        min_iter=int(min_iter), loss_prob=float(loss), loss_seed=int(loss_seed), trace=bool(trace),
        reference=None if reference is None else float(reference),
        gap_tol=None if gap_tol is None else float(gap_tol), dual_bound=bool(dual_bound),
        row_scaling=bool(row_scaling), certify_every=int(certify_every),
        certified_gap_tol=None if certified_gap_tol is None else float(certified_gap_tol),
        pair_penalty=bool(pair_penalty),
    )


def solve(problem: Problem, method: str = "admm", *, step: float = 1e-3, **options) -> Result:
    """Solve ``problem``. ``method``: "admm" (Algorithm 1 one-sided, 2 two-sided), "exact"
    (one-sided per-host Newton on the two multipliers: the reference), "dual" (dual
    decomposition, subgradient steps ``step``/sqrt(k)). ADMM options: see :func:`admm_options`.
    ``reference``: a known optimum f* for the normalized gap trace."""
    if not isinstance(problem, Problem):
        raise _err("problem", "must be a braid.drum.Problem")
    if method not in METHODS:
        raise _err("method", f"must be one of {', '.join(METHODS)}, got {method!r}")
    n, m = problem.n, problem.m
    ref = options.get("reference")
    if method == "exact":
        d = _core.drum_solve(problem._core, "exact", "{}")
    elif method == "dual":
        if not (step > 0 and math.isfinite(step)):
            raise _err("step", f"must be > 0, got {step!r}")
        extra = set(options) - {"max_iter", "reference", "gap_tol", "trace", "scaling"}
        if extra:
            raise _err("options", f"not used by the dual method: {', '.join(sorted(extra))}")
        o = dict(step=float(step), max_iter=int(options.get("max_iter", 1000)),
                 scaling=bool(options.get("scaling", True)), trace=bool(options.get("trace", True)),
                 reference=ref, gap_tol=options.get("gap_tol"))
        d = _core.drum_solve(problem._core, "dual", json.dumps(o))
    else:
        d = _core.drum_solve(problem._core, "admm", json.dumps(admm_options(**options)))
    return _result(d, n, m, problem.weight_sum, ref)


def select_topk(scores, k: int, age=None, max_wait: int = 2**32 - 1):
    """Top-k selection per host with aging: apps that waited ``max_wait`` rounds are forced in
    (oldest first), the rest by score. Returns (active bool (n, m), new age uint32 (n, m))."""
    s = np.ascontiguousarray(np.asarray(scores, dtype=np.float64))
    if s.ndim != 2:
        raise _err("scores", "must have shape (n, m)")
    n, m = s.shape
    a = np.zeros((n, m), dtype=np.uint32) if age is None else np.ascontiguousarray(np.asarray(age, dtype=np.uint32))
    if a.shape != (n, m):
        raise _err("age", f"has shape {a.shape}, expected {(n, m)}")
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise _err("k", f"must be an integer >= 1, got {k!r}")
    act, age2 = _core.drum_select_topk(n, m, int(k), s.tobytes(), a.tobytes(), int(max_wait))
    return (np.frombuffer(act, dtype=np.uint8).reshape(n, m).astype(bool),
            np.frombuffer(age2, dtype=np.uint32).reshape(n, m).copy())


def rounds(problem: Problem, k: int, *, n_rounds: int = 10, rule: str = "weight", priority=None,
           max_wait: Optional[int] = None, method: str = "admm", **options):
    """The top-k selection step around an exact convex solve, repeated over rounds with aging.

    ``rule``: "weight", "priority" (needs ``priority`` (n, m)) or "utility" (the paper's ranking:
    each application's utility w U(x) in the solve without the cache limit). ``max_wait``
    (default ceil(m/k)): rounds an application may wait before it is forced in, so none waits
    more than ``max_wait + ceil(m/k)`` rounds. Returns a list of (active, Result)."""
    n, m = problem.n, problem.m
    if rule not in ("weight", "priority", "utility"):
        raise _err("rule", f"must be weight, priority or utility, got {rule!r}")
    if n_rounds < 1:
        raise _err("n_rounds", "must be >= 1")
    if max_wait is None:
        max_wait = -(-m // k)
    arr = problem.arrays()
    if rule == "weight":
        scores = arr["w"]
    elif rule == "priority":
        if priority is None:
            raise _err("priority", "rule 'priority' needs a priority array (n, m)")
        scores = _f64("priority", priority, (n, m))
    else:
        full = solve(problem.with_sets(active=np.ones((n, m), bool)), method, **options)
        x = np.maximum(full.x_feasible, 1e-300)
        al = problem.alpha
        u = np.log(x) if al == 1.0 else x ** (1 - al) / (1 - al)
        scores = arr["w"] * u
    age = np.zeros((n, m), dtype=np.uint32)
    out = []
    for _ in range(n_rounds):
        active, age = select_topk(scores, k, age, max_wait)
        g = arr["guarantee"]
        if g is not None:
            g = np.where(active, g, 0.0)
        r = solve(problem.with_sets(active=active, guarantee=g), method, **options)
        out.append((active, r))
    return out
