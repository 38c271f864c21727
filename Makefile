# The quick start: `make demo` (set up, then run the main job) and `make test` (set up, then run
# every test, Rust and Python). Both create ./.venv on first use and need only python3 and cargo.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test setup setup-test rust-test py-test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

# Builds the Rust core in release mode (the simulator needs it) and installs the package editable.
setup: $(BIN)/python
	$(BIN)/pip install -e .

setup-test: $(BIN)/python
	$(BIN)/pip install -e '.[test]'

demo: setup
	$(BIN)/braid demo

rust-test:
	cargo test --workspace --exclude braid-py

py-test: setup-test
	$(BIN)/python -m pytest -q tests; rc=$$?; if [ $$rc -eq 5 ]; then echo "no Python tests collected"; exit 0; fi; exit $$rc

test: rust-test py-test

bench: setup
	$(BIN)/braid bench

clean:
	rm -rf $(VENV) target
