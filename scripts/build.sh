#!/usr/bin/env bash
# Configures and builds sandgate into build/ (or $SANDGATE_BUILD_DIR). Extra arguments go to
# CMake's configure step, as do the words of $SANDGATE_CMAKE_ARGS (for example
# -DSANDGATE_SANITIZE=ON).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
read -r -a extra <<<"${SANDGATE_CMAKE_ARGS:-}"
cmake -S "$root" -B "$build" -G Ninja "${extra[@]}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
