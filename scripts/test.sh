#!/usr/bin/env bash
# Builds sandgate and runs the whole test suite under ctest, then runs it a second time inside
# sandgate's own wrap (the dogfood run: `sandgate exec --sandbox bwrap --network none`, the
# build dir writable, the source tree and ../shared read-only) and prints how many tests
# skipped there (SKIP-UNDER-WRAP markers). Before the build: the format check (scripts/format.sh);
# after it, clang-tidy on the changed sources (scripts/tidy.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
"$root/scripts/format.sh"
"$root/scripts/build.sh"
# clang-tidy (.clang-tidy, every finding an error) on the sources changed since
# scripts/tidy-base: a whole-tree pass is scripts/tidy.sh --all.
"$root/scripts/tidy.sh"
cd "$build"
ctest --output-on-failure -j "$(nproc)"

echo "test.sh: dogfood: the suite again inside sandgate exec --sandbox bwrap --network none"
wrap_args=(--sandbox bwrap --network none --timeout 20m --cwd "$build" --read-only "$root")
# In a git worktree, .git is a file naming the main repository's git dir: show that too.
common_git=$(git -C "$root" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
if [[ -n "$common_git" && "$common_git" != "$root"/* ]]; then
  wrap_args+=(--read-only "$common_git")
fi
if [[ -d "$root/../shared" ]]; then
  wrap_args+=(--read-only "$(cd "$root/../shared" && pwd)")
fi
"$build/sandgate" exec "${wrap_args[@]}" -- ctest --output-on-failure -j "$(nproc)"
markers=$(grep -c 'SKIP-UNDER-WRAP(' "$build/Testing/Temporary/LastTest.log" || true)
echo "test.sh: dogfood run green; skip markers: $markers"

# The fuzz stage: every libFuzzer target of fuzz/ built with clang (ASan+UBSan) and run for
# $SANDGATE_FUZZ_SECONDS (default 6) on the corpora's seeds and the regressions.
echo "test.sh: fuzz: every target of fuzz/ for ${SANDGATE_FUZZ_SECONDS:-6}s each"
"$root/scripts/fuzz.sh"
