# The quick start: `make demo` (set up, then run the main job) and `make test` (set up, then run
# every test, Rust and Python). Both create ./.venv on first use and need only python3 and cargo.
#
# Setup is re-done only when the Rust sources, Cargo files or pyproject.toml change; Python sources
# are installed editable and need no reinstall. The extension is built in release mode by maturin
# (the simulator needs it), profile-guided where the toolchain allows (scripts/build-ext.sh;
# BRAID_PGO=0 skips that); `cargo test` keeps its own, lighter profile (see Cargo.toml).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUST_SRC := Cargo.toml Cargo.lock .cargo/config.toml scripts/build-ext.sh scripts/pgo-train.py $(shell find crates -name '*.rs' -o -name Cargo.toml 2>/dev/null)

.PHONY: demo test setup setup-test rust-test py-test lint bench clean api-docs

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml $(RUST_SRC)
	scripts/build-ext.sh $(BIN)/python
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml $(RUST_SRC)
	scripts/build-ext.sh $(BIN)/python '[test]'
	touch $@ $(VENV)/.installed

setup: $(VENV)/.installed

setup-test: $(VENV)/.installed-test

demo: setup
	$(BIN)/braid demo

rust-test:
	cargo test --workspace --exclude braid-py

# pytest exits with 5 when it collects no tests: that is not a failure; anything else is.
py-test: setup-test
	$(BIN)/python -m pytest -q tests; rc=$$?; if [ $$rc -eq 5 ]; then echo "no Python tests collected"; exit 0; fi; exit $$rc

test: rust-test py-test

# The habits CI gates (docs/architecture.md): formatting, clippy without warnings, ruff, and no
# non-test module past 800 lines.
lint: setup-test
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(BIN)/ruff check python tests scripts
	$(BIN)/python scripts/check-module-size.py

bench: setup
	$(BIN)/braid bench

# The Python API page, generated from the docstrings by pdoc (in the test extra; docs/report.md,
# "The Python API"): target/api-docs/braid.html. tests/test_latency_and_buckets.py builds it.
api-docs: setup-test
	$(BIN)/python -m pdoc braid braid.sweep braid.report -o target/api-docs

clean:
	rm -rf $(VENV) target braid-demo
