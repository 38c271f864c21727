"""`braid drum solve` / `braid drum plot`: summary, trace file, plots, and exit code 2 on bad input."""

from __future__ import annotations

import polars as pl
import pytest
from click.testing import CliRunner

from braid.cli.drum import drum


def run(*args):
    return CliRunner().invoke(drum, list(args))


def test_solve_writes_trace_and_plots(tmp_path):
    t1 = tmp_path / "one.parquet"
    r = run("solve", "--n", "20", "--m", "10", "--out", str(t1))
    assert r.exit_code == 0, r.output
    assert "normalized gap" in r.output and "iterations" in r.output
    df = pl.read_parquet(t1)
    assert {"iteration", "objective", "objective_feasible", "gap", "r_pri", "r_dual", "rho", "time"} <= set(df.columns)
    t2 = tmp_path / "two.csv"
    t3 = tmp_path / "two-lossy.csv"
    assert run("solve", "--n", "20", "--m", "10", "--op", "two", "--out", str(t2)).exit_code == 0
    r = run("solve", "--n", "20", "--m", "10", "--op", "two", "--loss", "0.1", "--out", str(t3))
    assert r.exit_code == 0, r.output
    for kind, traces in (("convergence", [t1]), ("fault", [t2, t3]), ("gap", [t1, t2])):
        out = tmp_path / f"{kind}.png"
        r = run("plot", *map(str, traces), "--kind", kind, "--out", str(out))
        assert r.exit_code == 0, r.output
        assert out.stat().st_size > 1000


def test_methods(tmp_path):
    for method in ("exact", "dual"):
        r = run("solve", "--n", "10", "--m", "5", "--method", method, "--max-iter", "50",
                "--out", str(tmp_path / f"{method}.parquet"))
        assert r.exit_code == 0, r.output


@pytest.mark.parametrize("args,needle", [
    (["--alpha", "0"], "--alpha"),
    (["--beta", "-1"], "--beta"),
    (["--relax", "2.5"], "--relax"),
    (["--loss", "1.0"], "--loss"),
    (["--rho", "-3"], "--rho"),
    (["--n", "0"], "--n"),
    (["--op", "two", "--method", "exact"], "--method"),
    (["--out", "trace.txt"], "--out"),
    (["--units", "-1"], "--units"),
    # issue 31: NaN/inf answers with exit 0, or errors naming 'options' instead of the flag
    (["--alpha", "1e300"], "--alpha"),
    (["--alpha", "1000"], "--alpha"),
    (["--method", "exact", "--alpha", "400"], "--alpha"),
    (["--eps-abs", "nan"], "--eps-abs"),
    (["--eps-rel", "inf"], "--eps-rel"),
    (["--units", "1e-300"], "--units"),
])
def test_bad_input_exit_2(args, needle):
    r = run("solve", "--n", "5", "--m", "3", *args)
    assert r.exit_code == 2, r.output
    assert needle in r.output
    assert "Traceback" not in r.output


def test_plot_bad_trace(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    r = run("plot", str(bad))
    assert r.exit_code == 2 and "TRACES" in r.output
    ok = tmp_path / "ok.parquet"
    assert run("solve", "--n", "5", "--m", "3", "--no-reference", "--out", str(ok)).exit_code == 0
    r = run("plot", str(ok), "--kind", "fault")
    assert r.exit_code == 2 and "gap" in r.output


def test_solve_stops_on_the_certified_gap(tmp_path):
    out = tmp_path / "cert.parquet"
    r = run("solve", "--n", "30", "--m", "40", "--op", "two", "--certified-gap-tol", "1e-4",
            "--certify-every", "5", "--out", str(out))
    assert r.exit_code == 0, r.output
    assert "iterations to a certified gap 1e-4" in r.output
    df = pl.read_parquet(out)
    checks = df.filter(pl.col("certified_gap").is_not_nan())
    assert checks["iteration"].to_list() == list(range(5, df.height + 1, 5))
    assert checks["certified_gap"][-1] <= 1e-4 and (checks["certified_gap"][:-1] > 1e-4).all()
    # the certified gap bounds the gap to the reference optimum from above
    assert df["gap"][-1] <= checks["certified_gap"][-1] + 1e-9
    r = run("solve", "--certified-gap-tol", "-1", "--out", str(tmp_path / "x.parquet"))
    assert r.exit_code == 2 and "--certified-gap-tol" in r.output
    r = run("solve", "--method", "exact", "--certify-every", "5", "--out", str(tmp_path / "x.parquet"))
    assert r.exit_code == 2 and "admm" in r.output


def test_alpha_at_the_limit_is_finite_and_certified(tmp_path):
    """alpha = 100 (the largest accepted) gives a finite, certified answer."""
    r = run("solve", "--n", "4", "--m", "3", "--alpha", "100", "--certified-gap-tol", "1e-6",
            "--certify-every", "5", "--out", str(tmp_path / "a.parquet"))
    assert r.exit_code == 0, r.output
    assert "nan" not in r.output.lower() and "inf" not in r.output.lower().replace("info", "")
    assert "converged" in r.output and "True" in r.output
    # the review: "--alpha 100" printed a negative duality gap (a bound below the optimum)
    line = next(ln for ln in r.output.splitlines() if "duality gap / sum w" in ln)
    assert float(line.split()[-2]) >= 0, line


def test_pair_penalty_flag(tmp_path):
    """`--pair-penalty` reaches the two-sided ADMM; with another method it is refused by name."""
    r = run("solve", "--n", "10", "--m", "4", "--op", "two", "--pair-penalty", "--out", str(tmp_path / "p.parquet"))
    assert r.exit_code == 0, r.output
    r = run("solve", "--n", "10", "--m", "4", "--method", "dual", "--pair-penalty", "--out", str(tmp_path / "d.parquet"))
    assert r.exit_code == 2 and "--pair-penalty" in r.output, r.output
