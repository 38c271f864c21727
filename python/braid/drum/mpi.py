"""DRUM ADMM sharded over MPI ranks (mpi4py): each rank holds and solves only its own hosts.

Every rank owns a contiguous block of hosts, in rank order, and holds only their data (weights,
a, capacities, guarantees, their senders' rows of B): a :class:`Shard`. Build it collectively
with :meth:`Shard.random` (each rank generates its hosts alone; the union is the instance
``Problem.random`` makes, bit for bit), :meth:`Shard.from_arrays` (each rank passes its own
arrays) or :meth:`Shard.scatter` (rank 0 holds the whole problem and sends each rank its part).

The solve (Rust, ``braid_drum::shard``) runs the local kernels on the rank's hosts. Per
iteration only these cross ranks:

* two-sided: the partial row sums of the CQ rows a rank's senders feed on other ranks, to their
  owners, and the owners' dual steps of those rows back (``Neighbor_alltoallv`` on a
  distributed-graph communicator of the ranks that share rows, built once at setup);
* the five residual sums (``Allreduce``; rank 0's result is broadcast, since MPI does not
  promise the same bits on every rank and the ρ / stop decisions must agree).

One-sided operations exchange nothing but the residual scalars. The result equals the local
solve: the same iterates, bit for bit one-sided, to ~1e-15 two-sided (the rows' partial sums are
added in rank order).

Run: ``mpiexec -n 4 python -m braid.drum.mpi --n 1000 --m 500 --op two --out result.npz``.
"""

from __future__ import annotations

import json
import resource
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .. import _core
from .model import DrumInputError, Problem, Result, _err, _gen_params, _host_arrays, admm_options


def _world(comm):
    if comm is not None:
        return comm
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _displs(counts) -> np.ndarray:
    c = np.asarray(counts, dtype=np.int64)
    return np.concatenate(([0], np.cumsum(c)[:-1])) if len(c) else c


class _MpiComm:
    """The message passing the Rust solver asks for (``braid_drum::comm::Comm``), on mpi4py."""

    def __init__(self, comm):
        from mpi4py import MPI

        self._mpi = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self._graph = None
        self._nbrs: list = []

    def allreduce(self, data: bytes, op: str) -> bytes:
        MPI = self._mpi
        a = np.frombuffer(data, dtype=np.float64).copy()
        out = np.empty_like(a)
        self.comm.Allreduce(a, out, op=MPI.SUM if op == "sum" else MPI.MIN)
        # every rank must take the same decisions: use rank 0's bits
        self.comm.Bcast(out, root=0)
        return out.tobytes()

    def allgather(self, data: bytes) -> list:
        return self.comm.allgather(bytes(data))

    def alltoallv(self, data: bytes, counts) -> tuple:
        MPI = self._mpi
        send = np.frombuffer(data, dtype=np.uint64)
        sc = np.asarray(counts, dtype=np.int64)
        rc = np.empty(self.size, dtype=np.int64)
        self.comm.Alltoall(sc, rc)
        recv = np.empty(int(rc.sum()), dtype=np.uint64)
        self.comm.Alltoallv([send, (sc.tolist(), _displs(sc).tolist()), MPI.UINT64_T],
                            [recv, (rc.tolist(), _displs(rc).tolist()), MPI.UINT64_T])
        return recv.tobytes(), rc.tolist()

    def set_neighbors(self, nbrs) -> None:
        # the ranks that share rows with this one, as a distributed graph (symmetric: a rank
        # sends partial sums to the owners and receives their dual steps back)
        self._nbrs = list(nbrs)
        self.close()
        self._graph = self.comm.Create_dist_graph_adjacent(self._nbrs, self._nbrs, reorder=False)

    def neighbor_exchange(self, data: bytes, send_counts, recv_counts) -> bytes:
        MPI = self._mpi
        send = np.frombuffer(data, dtype=np.float64)
        recv = np.empty(int(sum(recv_counts)), dtype=np.float64)
        self._graph.Neighbor_alltoallv(
            [send, (list(send_counts), _displs(send_counts).tolist()), MPI.DOUBLE],
            [recv, (list(recv_counts), _displs(recv_counts).tolist()), MPI.DOUBLE])
        return recv.tobytes()

    def close(self) -> None:
        if self._graph is not None:
            self._graph.Free()
            self._graph = None


def _collective(comm, build):
    """Run ``build()`` on every rank; if it raised DrumInputError on any rank, raise the lowest
    failing rank's error on all of them (no rank is left waiting in a later collective)."""
    try:
        out, err = build(), None
    except DrumInputError as e:
        out, err = None, (getattr(e, "param", "input"), getattr(e, "message", str(e)))
    errs = comm.allgather(err)
    for r, e in enumerate(errs):
        if e is not None:
            msg = e[1] if r == comm.Get_rank() else f"{e[1]} (reported by rank {r})"
            raise _err(e[0], msg)
    return out


#: the element types of a piece's arrays (``DrumPiece.arrays``)
_DTYPES = dict(w=np.float64, a=np.float64, Q=np.float64, C=np.float64, guarantee=np.float64,
               preempt=np.float64, active=np.uint8, b_ptr=np.uint64, b_dst=np.uint32,
               b_frac=np.float64)


def _block(n: int, rank: int, size: int) -> tuple:
    return rank * n // size, (rank + 1) * n // size


class Shard:
    """One rank's hosts ``h0..h1`` of an instance of ``n`` hosts. The constructors are
    collective: every rank of ``comm`` calls them."""

    def __init__(self, core, comm):
        self._core = core
        self.comm = comm

    @property
    def h0(self) -> int:
        return self._core.h0

    @property
    def h1(self) -> int:
        return self._core.h1

    @property
    def n(self) -> int:
        return self._core.n

    @property
    def m(self) -> int:
        return self._core.m

    @property
    def two_sided(self) -> bool:
        return self._core.two_sided

    @classmethod
    def random(cls, n: int = 100, m: int = 50, *, comm=None, two_sided: bool = False,
               alpha: float = 1.0, beta: float = 1e-3, k: Optional[int] = None, seed: int = 0,
               units: float = 1.0, fanout: int = 2, batch_max: int = 8, q_range=(20.0, 100.0),
               c_range=(15.0, 50.0), w_range=(0.5, 2.0)) -> "Shard":
        """This rank's block of ``Problem.random(n, m, ...)`` (same arguments), generated alone:
        every host draws from its own stream (seed, host)."""
        comm = _world(comm)

        def build():
            params = _gen_params(n, m, two_sided=two_sided, alpha=alpha, beta=beta, k=k,
                                 seed=seed, units=units, fanout=fanout, batch_max=batch_max,
                                 q_range=q_range, c_range=c_range, w_range=w_range)
            h0, h1 = _block(int(n), comm.Get_rank(), comm.Get_size())
            return _core.DrumPiece.generate(params, h0, h1)

        return cls(_collective(comm, build), comm)

    @classmethod
    def from_arrays(cls, w, a, Q, C, *, comm=None, alpha: float = 1.0, beta: float = 1e-3,
                    B=None, two_sided: Optional[bool] = None, active=None, guarantee=None,
                    preempt=None) -> "Shard":
        """This rank's own hosts, as ``Problem.from_arrays`` takes a whole instance: ``w``, ``a``
        (n_r, m), ``Q``, ``C`` (n_r,), and ``B`` with the rows of this rank's sender entries only,
        shape (n_r*m, n), columns the global destination hosts. Ranks hold consecutive blocks in
        rank order; each rank's first host and n follow from the ranks' n_r."""
        comm = _world(comm)
        n_r = int(np.asarray(Q).reshape(-1).shape[0]) if np.ndim(Q) == 1 else -1
        counts = comm.allgather(n_r)
        rank = comm.Get_rank()

        def build():
            if any(c < 0 for c in counts):
                raise _err("Q", f"must be a vector (one capacity per host) on every rank; rank "
                                f"{counts.index(-1)} has another shape")
            h0, n = sum(counts[:rank]), sum(counts)
            nl, m, arrs, kw, ts = _host_arrays(w, a, Q, C, B=B, two_sided=two_sided,
                                               active=active, guarantee=guarantee,
                                               preempt=preempt, n_total=n, h0=h0)
            return _core.DrumPiece.from_arrays(n, h0, m, float(alpha), float(beta), *arrs,
                                               two_sided=bool(ts), **kw)

        return cls(_collective(comm, build), comm)

    @classmethod
    def scatter(cls, problem: Optional[Problem], *, comm=None, root: int = 0) -> "Shard":
        """Rank ``root`` holds the whole ``problem`` (the others pass None) and sends every rank
        its block of hosts; only ``root`` ever holds the whole instance."""
        comm = _world(comm)
        rank, size = comm.Get_rank(), comm.Get_size()

        def cut():
            if not isinstance(problem, Problem):
                raise _err("problem", f"rank {root} must pass a braid.drum.Problem")
            return [_core.DrumPiece.slice(problem._core, *_block(problem.n, s, size))
                    for s in range(size)]

        pieces = _collective(comm, cut if rank == root else (lambda: None))
        # arrays travel as typed buffers (no pickle: its messages are limited to 2 GB), each
        # after a small pickled header with the shapes
        if rank == root:
            for s in range(size):
                if s == root:
                    continue
                pc = pieces[s]
                d = {k: np.frombuffer(v, dtype=_DTYPES[k]) for k, v in pc.arrays().items()
                     if k in _DTYPES}
                meta = dict(n=pc.n, h0=pc.h0, m=pc.m, alpha=pc.alpha, beta=pc.beta,
                            two_sided=pc.two_sided, lens={k: len(v) for k, v in d.items()})
                comm.send(meta, dest=s, tag=71)
                for k in sorted(d):
                    comm.Send(np.ascontiguousarray(d[k]), dest=s, tag=72)
            return cls(pieces[root], comm)
        meta = comm.recv(source=root, tag=71)
        d = {}
        for k in sorted(meta["lens"]):
            buf = np.empty(meta["lens"][k], dtype=_DTYPES[k])
            comm.Recv(buf, source=root, tag=72)
            d[k] = buf.tobytes()
        kw = {k: d[k] for k in ("guarantee", "preempt") if d.get(k)}
        if "b_ptr" in d:
            kw.update(b_ptr=d["b_ptr"], b_dst=d["b_dst"], b_frac=d["b_frac"])
        core = _core.DrumPiece.from_arrays(meta["n"], meta["h0"], meta["m"], meta["alpha"],
                                           meta["beta"], d["w"], d["a"], d["Q"], d["C"],
                                           active=d["active"], two_sided=meta["two_sided"], **kw)
        return cls(core, comm)

    @classmethod
    def from_problem(cls, problem: Problem, *, comm=None) -> "Shard":
        """Every rank holds the same whole ``problem`` (replicated memory): keep this rank's
        block. Prefer :meth:`random`, :meth:`from_arrays` or :meth:`scatter` past one machine."""
        comm = _world(comm)

        def build():
            if not isinstance(problem, Problem):
                raise _err("problem", "must be a braid.drum.Problem or a braid.drum.mpi.Shard")
            return _core.DrumPiece.slice(problem._core,
                                         *_block(problem.n, comm.Get_rank(), comm.Get_size()))

        return cls(_collective(comm, build), comm)


@dataclass
class ShardResult:
    """One rank's part of a sharded solve: allocations of its hosts ``h0..h1`` ((h1-h0, m)
    arrays) and the figures of the whole instance."""

    h0: int
    h1: int
    n: int
    x: np.ndarray
    z: np.ndarray
    x_feasible: np.ndarray
    z_feasible: np.ndarray
    lam: np.ndarray
    mu: np.ndarray
    objective: float
    objective_feasible: float
    dual_bound: Optional[float]
    weight_sum: float
    iterations: int
    converged: bool
    setup_time: float
    solve_time: float
    rho_final: float
    #: ranks this one exchanges rows with, and the float64 values it sends per iteration
    #: (partial sums forward, dual steps back)
    neighbors: list
    values_sent: tuple
    #: bytes of this rank's problem data, layout, scaled copy and iterates
    state_bytes: int = 0
    trace_arrays: dict = field(repr=False, default_factory=dict)


def _shard_result(d: dict, m: int) -> ShardResult:
    f = lambda b: np.frombuffer(b, dtype=np.float64)  # noqa: E731
    x = f(d["x"]).reshape(-1, m)
    h0 = d["h0"]
    tr = {k: (np.frombuffer(v, dtype=np.uint32) if k in ("lost", "certified_iter") else f(v))
          for k, v in d["trace"].items()}
    for k in ("lost", "objective", "objective_feasible", "gap"):
        if len(tr.get(k, [])) == 0:
            tr.pop(k, None)
    return ShardResult(
        h0=h0, h1=h0 + x.shape[0], n=d["n"], x=x, z=f(d["z"]).reshape(-1, m),
        x_feasible=f(d["x_feasible"]).reshape(-1, m), z_feasible=f(d["z_feasible"]).reshape(-1, m),
        lam=f(d["lambda"]), mu=f(d["mu"]), objective=d["objective"],
        objective_feasible=d["objective_feasible"], dual_bound=d["dual_bound"],
        weight_sum=d["weight_sum"], iterations=d["iterations"], converged=d["converged"],
        setup_time=d["setup_time"], solve_time=d["solve_time"], rho_final=d["rho_final"],
        neighbors=list(d["neighbors"]), values_sent=tuple(d["values_sent"]),
        state_bytes=d["state_bytes"], trace_arrays=tr,
    )


def _gather(comm, local: np.ndarray, total: int) -> Optional[np.ndarray]:
    from mpi4py import MPI

    counts = comm.gather(local.size, root=0)
    out = np.empty(total) if comm.Get_rank() == 0 else None
    comm.Gatherv(np.ascontiguousarray(local, dtype=np.float64),
                 [out, (counts, _displs(counts).tolist()), MPI.DOUBLE] if out is not None else None,
                 root=0)
    return out


def solve_mpi(shard, comm=None, *, gather: bool = True, **options):
    """Sharded ADMM; collective over ``comm`` (default ``MPI.COMM_WORLD``). ``shard``: this
    rank's :class:`Shard`, or a whole :class:`~braid.drum.Problem` held by every rank (then each
    keeps its block). Options as :func:`braid.drum.model.admm_options`, except that the
    objective trace is off unless ``trace=True`` is passed (it needs the feasible recovery, three
    row exchanges per iteration); ``certify_every`` / ``certified_gap_tol`` add the certified gap
    every so many iterations, as in the local solve. Returns, with ``gather``, the
    whole :class:`~braid.drum.Result` on rank 0 and None elsewhere; without, every rank's
    :class:`ShardResult` (nothing of size n*m is gathered)."""
    if isinstance(shard, Shard):
        comm = comm or shard.comm
    comm = _world(comm)
    if not isinstance(shard, Shard):
        shard = Shard.from_problem(shard, comm=comm)
    opts = admm_options(**{"trace": False, **options})
    mc = _MpiComm(comm)
    try:
        d = _core.drum_solve_sharded(shard._core, json.dumps(opts), mc)
    finally:
        mc.close()
    local = _shard_result(d, shard.m)
    if not gather:
        return local
    n, m = shard.n, shard.m
    arrs = {k: _gather(comm, getattr(local, k).ravel(), n * m)
            for k in ("x", "z", "x_feasible", "z_feasible")}
    lam = _gather(comm, local.lam, n)
    mu = _gather(comm, local.mu, n)
    if comm.Get_rank() != 0:
        return None
    return Result(
        method=f"admm-mpi[{comm.Get_size()}]",
        x=arrs["x"].reshape(n, m), z=arrs["z"].reshape(n, m),
        x_feasible=arrs["x_feasible"].reshape(n, m), z_feasible=arrs["z_feasible"].reshape(n, m),
        objective=local.objective, objective_feasible=local.objective_feasible,
        dual_bound=local.dual_bound, iterations=local.iterations, converged=local.converged,
        setup_time=local.setup_time, solve_time=local.solve_time, lam=lam, mu=mu,
        rho_final=local.rho_final, weight_sum=local.weight_sum,
        trace_arrays=local.trace_arrays, reference=options.get("reference"),
    )


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


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
    ap.add_argument("--certified-gap-tol", type=float, default=None,
                    help="also stop when the certified duality gap (checked every "
                         "--certify-every iterations) is at most this")
    ap.add_argument("--certify-every", type=int, default=0,
                    help="record the certified gap every this many iterations (default 25 with "
                         "--certified-gap-tol, else never)")
    ap.add_argument("--out", default=None, help="write x, z and a summary (.npz) on rank 0")
    ap.add_argument("--stats", action="store_true",
                    help="print one JSON line per rank: hosts, peak RSS, neighbours, bytes sent "
                         "per iteration (no gather of the allocations unless --out)")
    ap.add_argument("--local", action="store_true",
                    help="solve the whole instance in this one process (no MPI), for comparison")
    a = ap.parse_args(argv)
    opts = dict(loss=a.loss, loss_seed=a.seed, eps_abs=a.eps, eps_rel=a.eps, max_iter=a.max_iter,
                certified_gap_tol=a.certified_gap_tol, certify_every=a.certify_every)
    gen = dict(two_sided=a.op == "two", alpha=a.alpha, beta=a.beta, k=a.k, seed=a.seed)
    if a.local:
        from . import model

        t0 = time.perf_counter()
        p = Problem.random(a.n, a.m, **gen)
        r = model.solve(p, "admm", trace=False, **opts)
        s = r.summary()
        s.update(ranks=0, peak_rss_mb=_peak_rss_mb(), wall_s=time.perf_counter() - t0)
        print(json.dumps(s))
        return 0
    try:
        shard = Shard.random(a.n, a.m, **gen)
        gather = a.out is not None or not a.stats
        r = solve_mpi(shard, gather=gather, **opts)
    except DrumInputError as e:
        print(f"error: {e}")
        return 2
    comm = shard.comm
    if a.stats:
        local = r if isinstance(r, ShardResult) else None
        line = dict(rank=comm.Get_rank(), ranks=comm.Get_size(), hosts=[shard.h0, shard.h1],
                    peak_rss_mb=_peak_rss_mb())
        if local is not None:
            line.update(iterations=local.iterations, converged=local.converged,
                        neighbors=local.neighbors, values_sent_per_iter=local.values_sent,
                        bytes_sent_per_iter=8 * sum(local.values_sent),
                        state_mb=local.state_bytes / 2**20,
                        setup_s=local.setup_time, solve_s=local.solve_time,
                        s_per_iter=local.solve_time / max(local.iterations, 1),
                        objective_feasible=local.objective_feasible)
        lines = comm.gather(line, root=0)
        if lines is not None:
            for ln in lines:
                print(json.dumps(ln), flush=True)
    if isinstance(r, Result):
        s = r.summary()
        if not a.stats:
            print(json.dumps(s))
        if a.out:
            np.savez(a.out, x=r.x, z=r.z, x_feasible=r.x_feasible, summary=json.dumps(s),
                     r_pri=r.trace_arrays["r_pri"],
                     certified_iter=r.trace_arrays.get("certified_iter", np.zeros(0, np.uint32)),
                     certified_gap=r.trace_arrays.get("certified_gap", np.zeros(0)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
