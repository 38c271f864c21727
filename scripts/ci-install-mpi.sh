#!/usr/bin/env sh
# Install an MPI implementation and mpi4py for the DRUM sharded-solver test
# (tests/test_drum_mpi.py runs `mpiexec -n 2` on one machine; it skips when MPI is absent).
# Usage: scripts/ci-install-mpi.sh [python]   (default: python3; use the CI venv's python)
set -eu
PY="${1:-python3}"
if ! command -v mpiexec >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends openmpi-bin libopenmpi-dev
fi
"$PY" -m pip install -q "mpi4py>=3.1"
"$PY" -c "import mpi4py; print('mpi4py', mpi4py.__version__)"
