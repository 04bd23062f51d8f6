#!/usr/bin/env bash
# The main job on its embedded default: builds sandgate and runs a demonstration.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$root/build}
"$root/scripts/build.sh" >/dev/null
"$build/sandgate" --help
