"""Figures in the style of the paper's Fig. 4-6 from convergence traces (polars DataFrames or
Parquet/CSV files written by ``braid drum solve``)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


def read_trace(path):
    import polars as pl

    p = Path(path)
    if p.suffix == ".csv":
        return pl.read_csv(p)
    return pl.read_parquet(p)


def _label(df, fallback: str) -> str:
    if "label" in df.columns and df.height:
        return str(df["label"][0])
    return fallback


def plot_traces(traces: Sequence, out, kind: str = "convergence", labels: Sequence[str] | None = None,
                title: str | None = None):
    """kind: "convergence" (Fig. 4/5: (a) objective vs the optimum with the 99.5% line,
    (b) primal residual), "fault" (Fig. 6: normalized gap per loss probability), "gap"
    (normalized gap, log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dfs = [read_trace(t) if isinstance(t, (str, Path)) else t for t in traces]
    names = list(labels) if labels else [_label(d, f"run {i + 1}") for i, d in enumerate(dfs)]
    if kind == "convergence":
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        ref = None
        for d, nm in zip(dfs, names):
            ax1.plot(d["iteration"], d["objective"], label=f"{nm}: objective (iterate)")
            if "objective_feasible" in d.columns:
                ax1.plot(d["iteration"], d["objective_feasible"], "--", label=f"{nm}: feasible")
            ax2.semilogy(d["iteration"], d["r_pri"], label=nm)
            if "reference" in d.columns and d.height:
                ref = float(d["reference"][0])
        if ref is not None:
            ax1.axhline(ref, color="k", lw=1, label="optimum")
            if ref > 0:
                ax1.axhline(0.995 * ref, color="b", ls=":", lw=1, label="99.5% of optimum")
        ax1.set_xlabel("iteration")
        ax1.set_ylabel("objective")
        ax1.set_title("(a) objective")
        ax1.legend(fontsize=7)
        ax2.set_xlabel("iteration")
        ax2.set_ylabel("primal residual ||r||")
        ax2.set_title("(b) primal residual")
        ax2.legend(fontsize=7)
    elif kind in ("fault", "gap"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for d, nm in zip(dfs, names):
            if "gap" not in d.columns:
                raise ValueError(f"trace {nm!r} has no gap column: solve with a reference")
            g = d["gap"].to_numpy()
            ax.semilogy(d["iteration"], [max(v, 1e-16) for v in g], label=nm)
        ax.axhline(1e-4, color="k", ls=":", lw=1, label="gap 1e-4")
        ax.set_xlabel("iteration")
        ax.set_ylabel("normalized gap (f* - f) / sum w")
        ax.set_title("fault tolerance" if kind == "fault" else "normalized gap")
        ax.legend(fontsize=8)
    else:
        raise ValueError(f"unknown plot kind {kind!r}")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
