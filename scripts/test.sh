#!/usr/bin/env bash
# Builds sandgate and runs the whole test suite under ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
