#!/usr/bin/env python3
"""Fails when a non-test source module passes the house limit (800 lines; DESIGN.md: split a module
by responsibility when it grows past ~800 lines).

Counted: Rust and Python sources tracked by git, outside test folders and test files. A Rust file's
trailing `#[cfg(test)] mod tests { ... }` block is test code and not counted. Usage:
`scripts/check-module-size.py [--limit N]`; exit 1 listing the offenders, 0 otherwise.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

TEST_PATH = re.compile(r"(^|/)(tests?|testing/conformance)/|(^|/)tests?\.rs$|_tests?\.rs$|(^|/)tests_[^/]*\.rs$|(^|/)test_[^/]*\.py$|(^|/)conftest\.py$")


def counted_lines(path: Path) -> int:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if path.suffix == ".rs":
        for i, line in enumerate(lines):
            if line.strip() == "#[cfg(test)]" and i + 1 < len(lines) and re.match(r"\s*(pub(\(\w+\))?\s+)?mod \w+\s*(\{|;)", lines[i + 1]):
                if lines[i + 1].rstrip().endswith("{"):
                    return i
    return len(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=800)
    args = ap.parse_args()
    root = Path(subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip())
    files = subprocess.check_output(["git", "ls-files", "*.rs", "*.py"], cwd=root, text=True).split()
    over = []
    for f in files:
        if TEST_PATH.search(f):
            continue
        n = counted_lines(root / f)
        if n > args.limit:
            over.append((n, f))
    for n, f in sorted(over, reverse=True):
        print(f"{f}: {n} lines of non-test code (limit {args.limit}): split it by responsibility")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
