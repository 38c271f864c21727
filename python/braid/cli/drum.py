"""``braid drum``: solve DRUM instances and plot their convergence.

Importable on its own (``from braid.cli.drum import drum``). User mistakes raise
``click.UsageError``/``click.BadParameter`` (exit code 2), never a traceback.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import click


def _user_errors(f):
    """Map DRUM input errors to click usage errors (exit 2)."""

    @functools.wraps(f)
    def wrapper(*a, **kw):
        from ..drum import DrumInputError

        try:
            return f(*a, **kw)
        except DrumInputError as e:
            param = getattr(e, "param", None)
            msg = getattr(e, "message", None) or str(e)
            if param:
                # name the flag the user typed where the solver's key comes from one
                flag = _FLAGS.get(param, param)
                raise click.BadParameter(msg, param_hint=f"'{flag}'") from None
            raise click.UsageError(str(e)) from None

    return wrapper


# the solver's parameter names -> the flags of `braid drum solve` that set them (capacities
# come from the generator, scaled by --units)
_FLAGS = {
    "alpha": "--alpha", "beta": "--beta", "rho": "--rho", "relax": "--relax", "loss": "--loss",
    "eps_abs": "--eps-abs", "eps_rel": "--eps-rel", "max_iter": "--max-iter", "step": "--step",
    "certified_gap_tol": "--certified-gap-tol", "certify_every": "--certify-every",
    "Q": "--units", "C": "--units", "k": "--k", "n": "--n", "m": "--m",
}


def _finite_nonneg(ctx, param, value):
    if value is not None and not (value >= 0 and math.isfinite(value)):
        raise click.BadParameter(f"must be a finite number >= 0, got {value}")
    return value


def _alpha(ctx, param, value):
    from ..drum import MAX_ALPHA

    if not (0 < value <= MAX_ALPHA):
        raise click.BadParameter(f"must be a number in (0, {MAX_ALPHA:g}], got {value}")
    return value


def _positive(ctx, param, value):
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise click.BadParameter(f"must be > 0, got {value}")
    return value


@click.group("drum")
def drum():
    """DRUM: the RDMA network-utility-maximisation model and its distributed ADMM solver."""


@drum.command("solve")
@click.option("--n", "n", type=click.IntRange(min=1), default=100, show_default=True, help="hosts")
@click.option("--m", "m", type=click.IntRange(min=1), default=50, show_default=True, help="applications per host")
@click.option("--op", type=click.Choice(["one", "two"]), default="one", show_default=True, help="one-sided or two-sided operations")
@click.option("--alpha", type=float, default=1.0, show_default=True, callback=_alpha, help="alpha-fairness, (0, 100]")
@click.option("--beta", type=float, default=1e-3, show_default=True, help="CQ utility weight")
@click.option("--k", "k", type=click.IntRange(min=1), default=None, help="QP-cache limit (top-k active per host)")
@click.option("--method", type=click.Choice(["admm", "exact", "dual"]), default="admm", show_default=True)
@click.option("--rho", type=float, default=None, callback=_positive, help="initial penalty (scaled units; default automatic)")
@click.option("--rho-policy", type=click.Choice(["adaptive", "fixed", "paper"]), default="adaptive", show_default=True)
@click.option("--relax", type=float, default=1.6, show_default=True, help="over-relaxation in [1, 2)")
@click.option("--loss", type=float, default=0.0, show_default=True, help="probability a host's result is lost per iteration")
@click.option("--stop", type=click.Choice(["boyd", "paper", "none"]), default="boyd", show_default=True)
@click.option("--eps-abs", type=float, default=1e-6, show_default=True, callback=_finite_nonneg)
@click.option("--eps-rel", type=float, default=1e-6, show_default=True, callback=_finite_nonneg)
@click.option("--max-iter", type=click.IntRange(min=1), default=5000, show_default=True)
@click.option("--certified-gap-tol", type=float, default=None, callback=_positive,
              help="admm: stop when the certified gap (duality gap of the feasible point, no f* needed) is below this")
@click.option("--certify-every", type=click.IntRange(min=0), default=0, show_default=True,
              help="admm: certify the gap every this many iterations (0: only with --certified-gap-tol, then 25)")
@click.option("--pair-penalty", is_flag=True, default=False,
              help="admm, two-sided: one penalty per (row, sender) pair (docs/drum.md, \"Per-pair penalties\")")
@click.option("--step", type=float, default=1e-3, show_default=True, callback=_positive, help="dual method: step/sqrt(k)")
@click.option("--units", type=float, default=1.0, show_default=True, callback=_positive, help="rate unit multiplier (1 = Mops)")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--reference/--no-reference", default=True, show_default=True,
              help="compute the optimum (exact for one-sided, a tight ADMM run for two-sided) for the gap")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("drum_trace.parquet"),
              show_default=True, help="convergence trace (.parquet or .csv)")
@click.option("--label", default=None, help="label stored in the trace (for plots)")
@_user_errors
def solve_cmd(n, m, op, alpha, beta, k, method, rho, rho_policy, relax, loss, stop, eps_abs, eps_rel,
              max_iter, certified_gap_tol, certify_every, pair_penalty, step, units, seed, reference, out, label):
    """Generate the paper's random instance, solve it, print a summary, write the trace."""
    import polars as pl
    from rich.console import Console
    from rich.table import Table

    from .. import drum as D

    if out.suffix not in (".parquet", ".csv"):
        raise click.BadParameter("must end in .parquet or .csv", param_hint="'--out'")
    from ..results import check_out_file

    # Before the solve: a bad --out is an error now, not after the work.
    check_out_file(out, "--out")
    if not (1.0 <= relax < 2.0):
        raise click.BadParameter(f"must be in [1, 2), got {relax}", param_hint="'--relax'")
    if not (0.0 <= loss < 1.0):
        raise click.BadParameter(f"must be in [0, 1), got {loss}", param_hint="'--loss'")
    if beta < 0 or not math.isfinite(beta):
        raise click.BadParameter(f"must be >= 0, got {beta}", param_hint="'--beta'")
    if op == "two" and n < 2:
        raise click.BadParameter("two-sided operations need at least 2 hosts", param_hint="'--n'")
    if method == "exact" and op == "two":
        raise click.BadParameter("the exact solver is for one-sided operations (use admm)", param_hint="'--method'")
    if loss > 0 and method != "admm":
        raise click.BadParameter("loss applies to the admm method", param_hint="'--loss'")
    if (certified_gap_tol is not None or certify_every) and method != "admm":
        raise click.BadParameter("applies to the admm method", param_hint="'--certified-gap-tol'")
    if pair_penalty and method != "admm":
        raise click.BadParameter("applies to the admm method", param_hint="'--pair-penalty'")
    console = Console()
    p = D.Problem.random(n, m, two_sided=(op == "two"), alpha=alpha, beta=beta, k=k, seed=seed,
                         units=units * 1.0)
    fstar = None
    if reference:
        with console.status("computing the reference optimum"):
            if op == "one":
                fstar = D.solve(p, "exact").objective
            else:
                ref = D.solve(p, "admm", eps_abs=1e-10, eps_rel=1e-10, max_iter=20000, trace=False)
                fstar = ref.objective_feasible
    with console.status(f"solving ({method})"):
        if method == "admm":
            r = D.solve(p, "admm", rho=rho, rho_policy=rho_policy, relax=relax, loss=loss,
                        loss_seed=seed, stop=stop, eps_abs=eps_abs, eps_rel=eps_rel,
                        max_iter=max_iter, reference=fstar, certified_gap_tol=certified_gap_tol,
                        certify_every=certify_every, pair_penalty=pair_penalty)
        elif method == "dual":
            r = D.solve(p, "dual", step=step, max_iter=max_iter, reference=fstar)
        else:
            r = D.solve(p, "exact")
            r.reference = fstar
    t = Table(title=f"DRUM {method}: n={n}, m={m}, {op}-sided, alpha={alpha}, beta={beta}"
                    + (f", k={k}" if k else ""))
    t.add_column("quantity")
    t.add_column("value", justify="right")
    rows = [
        ("variables (x)", f"{n * m:,}"),
        ("iterations", str(r.iterations)),
        ("converged", str(r.converged)),
        ("objective (iterate)", f"{r.objective:.9g}"),
        ("objective (feasible)", f"{r.objective_feasible:.9g}"),
    ]
    if fstar is not None:
        rows.append(("optimum f*", f"{fstar:.9g}"))
        rows.append(("normalized gap (f*-f)/sum w", f"{r.normalized_gap(fstar):.3e}"))
        pct = r.percent_of_optimum(fstar)
        if pct is not None:
            rows.append(("% of optimum (paper's measure)", f"{pct:.4f}"))
        it = r.iterations_to(1e-4)
        if it is not None:
            rows.append(("iterations to gap 1e-4", str(it)))
    if r.duality_gap is not None:
        rows.append(("duality gap / sum w", f"{r.duality_gap:.3e}"))
    import numpy as np

    cit = r.trace_arrays.get("certified_iter", [])
    if len(cit):
        cg = r.trace_arrays["certified_gap"]
        hit = np.flatnonzero(cg <= 1e-4)
        rows.append(("certified gap checks", f"{len(cit)} (every {int(cit[0])} iterations)"))
        if len(hit):
            rows.append(("iterations to a certified gap 1e-4", str(int(cit[hit[0]]))))
    rows += [
        ("setup time", f"{r.setup_time:.3f} s"),
        ("solve time", f"{r.solve_time:.3f} s"),
    ]
    if r.iterations > 0 and method != "exact":
        rows.append(("time per iteration", f"{1e3 * r.solve_time / r.iterations:.3f} ms"))
    for a, b in rows:
        t.add_row(a, b)
    console.print(t)
    df = r.trace
    if df.height:
        df = df.with_columns(
            pl.lit(label or f"{method} {op}-sided loss={loss}").alias("label"),
            pl.lit(loss).alias("loss"),
            pl.lit(fstar, dtype=pl.Float64).alias("reference"),
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        if out.suffix == ".csv":
            df.write_csv(tmp)
        else:
            df.write_parquet(tmp)
        tmp.replace(out)
        console.print(f"trace: {out} ({df.height} iterations)")


@drum.command("plot")
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--kind", type=click.Choice(["convergence", "fault", "gap"]), default="convergence", show_default=True,
              help="convergence: Fig. 4/5 (objective vs optimum, primal residual); fault: Fig. 6; gap: normalized gap")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("drum.png"), show_default=True)
@click.option("--title", default=None)
@_user_errors
def plot_cmd(traces, kind, out, title):
    """Draw the paper's Fig. 4-6 style plots from traces written by `braid drum solve`."""
    from ..drum.plot import plot_traces, read_trace

    dfs = []
    for t in traces:
        if t.suffix not in (".parquet", ".csv"):
            raise click.BadParameter(f"{t}: expected a .parquet or .csv trace", param_hint="'TRACES'")
        try:
            d = read_trace(t)
        except Exception as e:  # noqa: BLE001 - any reader failure is a bad input file
            raise click.BadParameter(f"{t}: not a readable trace ({e.__class__.__name__})", param_hint="'TRACES'") from None
        need = {"iteration", "objective", "r_pri"} | ({"gap"} if kind != "convergence" else set())
        missing = need - set(d.columns)
        if missing:
            raise click.BadParameter(f"{t}: missing columns {sorted(missing)}" +
                                     (" (solve with --reference)" if "gap" in missing else ""), param_hint="'TRACES'")
        dfs.append(d)
    path = plot_traces(dfs, out, kind=kind, title=title)
    click.echo(f"wrote {path}")


COMMANDS = (drum,)
