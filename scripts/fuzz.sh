#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, ASan+UBSan) into build-fuzz/ and runs each for
# a bounded time: $SANDGATE_FUZZ_SECONDS (default 6) per target. Seeds come at run time from
# ../shared/corpora, fuzz/seeds/ (the tests' kinds of input the corpora lack) and
# fuzz/regressions/; what a run learns stays in build-fuzz/corpus/ for the next.
# A crash, hang, leak or broken invariant fails the run (exit 1) and leaves the input in
# build-fuzz/findings/<target>/: fix the parser, then add the input to
# fuzz/regressions/<target>/ (test_fuzz_regressions replays it in the regular build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${SANDGATE_FUZZ_SECONDS:-6}
shared=${SANDGATE_SHARED_DIR:-$root/../shared}
read -r -a extra <<<"${SANDGATE_CMAKE_ARGS:-}"
# Build type "Fuzz": no flags of CMake's own (fuzz/CMakeLists.txt sets them); warnings are
# reported, not fatal (clang warns where the product's GCC does not).
CXX=${SANDGATE_FUZZ_CXX:-clang++} cmake -S "$root" -B "$build" -G Ninja -DSANDGATE_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=Fuzz -DSANDGATE_WERROR=OFF "${extra[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz

# Seeds, assembled fresh each run.
seeds=$build/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{workflow,action,expression,json,runner_hook}
if [[ -d "$shared/corpora" ]]; then
  n=0
  while IFS= read -r -d '' file; do
    n=$((n + 1))
    if [[ $(basename "$file") == action.y*ml ]]; then cp "$file" "$seeds/action/$n.yml"
    else cp "$file" "$seeds/workflow/$n.yml"; fi
  done < <(find "$shared/corpora/act" -name '*.y*ml' -print0)
  python3 - "$shared/corpora/expressions" "$seeds/expression" <<'PY'
import json, pathlib, sys
source, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
n = 0
for file in sorted(source.glob("*.json")):
    for cases in json.loads(file.read_text()).values():
        for case in cases if isinstance(cases, list) else []:
            if isinstance(case, dict) and isinstance(case.get("expr"), str):
                n += 1
                (target / f"{n}.txt").write_text(case["expr"])
PY
  find "$shared/corpora" -name '*.json' -size -64k -exec cp -t "$seeds/json" {} + 2>/dev/null || true
  cp "$shared"/corpora/runner-container-hooks/*.json "$seeds/runner_hook/" 2>/dev/null || true
fi

failed=()
for binary in "$build"/fuzz/fuzz_*; do
  target=${binary##*/fuzz_}
  corpus=$build/corpus/$target
  findings=$build/findings/$target
  mkdir -p "$corpus" "$findings"
  dirs=("$corpus")
  for dir in "$seeds/$target" "$root/fuzz/seeds/$target" "$root/fuzz/regressions/$target"; do
    [[ -d "$dir" ]] && dirs+=("$dir")
  done
  options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536
           -artifact_prefix="$findings/" -print_final_stats=1)
  [[ -f "$root/fuzz/dicts/$target.dict" ]] && options+=(-dict="$root/fuzz/dicts/$target.dict")
  # -max_total_time is checked between inputs, after the seeds are loaded: the outer timeout
  # bounds the stage whatever a seed costs or however large the kept corpus has grown.
  status=0
  timeout -k 10 "$((seconds + 90))" "$binary" "${options[@]}" "${dirs[@]}" >"$build/$target.log" 2>&1 || status=$?
  if ((status == 0)); then
    echo "fuzz.sh: $target: $(grep -o 'stat::number_of_executed_units: [0-9]*' "$build/$target.log" | grep -o '[0-9]*$') runs, no finding"
  elif ((status == 124 || status == 137)); then
    echo "fuzz.sh: $target did not stop within $((seconds + 90))s (log: $build/$target.log)"
    tail -n 30 "$build/$target.log" >&2
    failed+=("$target")
  else
    echo "fuzz.sh: $target FAILED; the input is in $findings/ (log: $build/$target.log)"
    tail -n 30 "$build/$target.log" >&2
    failed+=("$target")
  fi
done
if ((${#failed[@]})); then
  echo "fuzz.sh: findings in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: every target ran ${seconds}s without a finding (the stage: ${SECONDS}s, build included)"
