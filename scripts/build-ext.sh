#!/usr/bin/env bash
# Builds braid's extension and installs it, editable, into a virtualenv: `make setup` calls it.
#
#   scripts/build-ext.sh PYTHON [EXTRAS]        e.g. scripts/build-ext.sh .venv/bin/python '[test]'
#
# The build is profile-guided (PGO) when it can be: an instrumented build, about a second of
# training runs through it (scripts/pgo-train.py: a k = 12 fat-tree with DCQCN and the demo's
# scenarios; not the benchmark's), then the release build optimised with what the training
# measured. The HPCC anchor runs 7-9% faster, k = 24 ~8% (docs/performance.md, round 9);
# results are bit-identical (PGO changes code layout and inlining, not arithmetic).
#
# It needs the toolchain's llvm-profdata (rustup's llvm-tools component, added here if missing).
# Without it, or with BRAID_PGO=0, or if any PGO step fails, the extension is built the ordinary
# way, with one line saying so. `braid._core.__build__` tells which build is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$1
spec=".${2:-}"

plain() {
    echo "braid: $1; building without profile-guided optimisation" >&2
    BRAID_BUILD="release" "$py" -m pip install -e "$spec"
    exit 0
}

[ "${BRAID_PGO:-1}" = "0" ] && plain "BRAID_PGO=0"

# The flags cargo would use: RUSTFLAGS if set, else this host's [target.<triple>] rustflags in
# .cargo/config.toml (RUSTFLAGS replaces those, so they are carried over here).
host=$(rustc -vV | sed -n 's/^host: //p')
if [ -n "${RUSTFLAGS:-}" ]; then
    flags=$RUSTFLAGS
else
    flags=$("$py" - "$host" <<'EOF'
import sys
try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib
with open(".cargo/config.toml", "rb") as f:
    cfg = tomllib.load(f)
print(" ".join(cfg.get("target", {}).get(sys.argv[1], {}).get("rustflags", [])))
EOF
) || flags=""
fi

profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ] && command -v rustup >/dev/null 2>&1; then
    echo "braid: adding rustup's llvm-tools (llvm-profdata) for the profile-guided build" >&2
    timeout 300 rustup component add llvm-tools >/dev/null 2>&1 || true
fi
[ -x "$profdata" ] || plain "llvm-profdata not found (rustup component add llvm-tools)"

dir="$PWD/target/pgo"
rm -rf "$dir"
mkdir -p "$dir/raw"

echo "braid: profile-guided build, 1/3: instrumented build" >&2
RUSTFLAGS="$flags -Cprofile-generate=$dir/raw" BRAID_BUILD="instrumented" \
    "$py" -m pip install -e "$spec" || plain "the instrumented build failed"

echo "braid: profile-guided build, 2/3: training runs" >&2
# The instrumented build's own build scripts wrote profiles into raw/ too: they are merged with
# the rest and are harmless (build scripts are not part of the extension).
LLVM_PROFILE_FILE="$dir/raw/train-%p-%m.profraw" "$py" scripts/pgo-train.py || plain "a training run failed"
"$profdata" merge -o "$dir/braid.profdata" "$dir/raw" || plain "llvm-profdata merge failed"

echo "braid: profile-guided build, 3/3: optimised build" >&2
RUSTFLAGS="$flags -Cprofile-use=$dir/braid.profdata" BRAID_BUILD="release, profile-guided" \
    "$py" -m pip install -e "$spec" || plain "the profile-guided build failed"
