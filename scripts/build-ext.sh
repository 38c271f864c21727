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

# The profile flag is added to the flags cargo already uses, not put in their place: to RUSTFLAGS
# if the user set it (it overrides every other source), else to this host's target rustflags through
# CARGO_TARGET_<TRIPLE>_RUSTFLAGS, which cargo joins with .cargo/config.toml's (target-cpu).
host=$(rustc -vV | sed -n 's/^host: //p')
target_var="CARGO_TARGET_$(echo "$host" | tr 'a-z-' 'A-Z_')_RUSTFLAGS"
with_flag() {
    local flag=$1
    shift
    if [ -n "${RUSTFLAGS:-}" ]; then
        RUSTFLAGS="$RUSTFLAGS $flag" "$@"
    else
        env "$target_var=${!target_var:-} $flag" "$@"
    fi
}

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
with_flag "-Cprofile-generate=$dir/raw" env BRAID_BUILD="instrumented" \
    "$py" -m pip install -e "$spec" || plain "the instrumented build failed"

echo "braid: profile-guided build, 2/3: training runs" >&2
# The instrumented build's own build scripts wrote profiles into raw/ too: they are merged with
# the rest and are harmless (build scripts are not part of the extension).
LLVM_PROFILE_FILE="$dir/raw/train-%p-%m.profraw" "$py" scripts/pgo-train.py || plain "a training run failed"
"$profdata" merge -o "$dir/braid.profdata" "$dir/raw" || plain "llvm-profdata merge failed"

echo "braid: profile-guided build, 3/3: optimised build" >&2
with_flag "-Cprofile-use=$dir/braid.profdata" env BRAID_BUILD="release, profile-guided" \
    "$py" -m pip install -e "$spec" || plain "the profile-guided build failed"
