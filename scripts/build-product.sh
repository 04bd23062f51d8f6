#!/usr/bin/env bash
# Configures and builds the product only (sandgate and the binaries beside it: sandgate-full,
# sandgate-broker, sandgate-agent), without the test suite or the benchmarks, into
# build-product/ (or $SANDGATE_BUILD_DIR), Release. Installs its packages first
# (install-deps.sh --product: no Catch2). Extra arguments go to CMake's configure step, as do
# the words of $SANDGATE_CMAKE_ARGS. Used by the `uses:` action, the release workflow and the
# Dockerfile.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$root/build-product}
"$root/scripts/install-deps.sh" --product
read -r -a extra <<<"${SANDGATE_CMAKE_ARGS:-}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSANDGATE_BUILD_TESTS=OFF \
  -DSANDGATE_WERROR=OFF "${extra[@]}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)" --target sandgate
