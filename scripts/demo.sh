#!/usr/bin/env bash
# The main job on its embedded default: builds sandgate (installing what it needs), then runs
# `sandgate run` on the workflow embedded below, every step inside the bubblewrap wrap with no
# network. The workflow shows the wrap off: a matrix (two legs run in parallel), a step writing
# the worktree, a step proving there is no network and no host HOME inside, a step printing a
# skip marker (counted like a skipped test), a compiler warning turned into an annotation by a
# problem matcher, and job outputs. It ends with a short summary of the JSON report.
#
# SANDGATE_BUILD_DIR picks the build directory (default build/); SANDGATE_DEMO_KEEP=1 keeps
# the demo repository (its path is printed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$root/build}
echo "demo: building sandgate (scripts/build.sh; the first build takes a few minutes)"
"$root/scripts/build.sh" >/dev/null

repo=$(mktemp -d "${TMPDIR:-/tmp}/sandgate-demo-XXXXXX")
if [[ "${SANDGATE_DEMO_KEEP:-}" != 1 ]]; then trap 'rm -rf "$repo"' EXIT; fi
mkdir -p "$repo/.github/workflows" "$repo/.github/matchers" "$repo/src"
printf 'int main(void) { int unused; return 0; }\n' >"$repo/src/main.c"

cat >"$repo/.github/matchers/gcc.json" <<'JSON'
{"problemMatcher": [{"owner": "gcc", "pattern": [{
  "regexp": "^(.*?):(\\d+):(\\d*):?\\s+(?:fatal\\s+)?(warning|error):\\s+(.*?)(?:\\s+\\[(-W[\\w-]+)\\])?$",
  "file": 1, "line": 2, "column": 3, "severity": 4, "message": 5, "code": 6}]}]}
JSON

cat >"$repo/.github/workflows/demo.yml" <<'YAML'
name: demo
on: push
jobs:
  build:
    name: build (${{ matrix.flavor }})
    runs-on: ubuntu-latest
    strategy:
      matrix:
        flavor: [debug, release]
    outputs:
      artifact: ${{ steps.build.outputs.artifact }}
    steps:
      - name: write the worktree
        id: build
        run: |
          mkdir -p out
          echo "built ${{ matrix.flavor }} as $(id -un) on $(hostname)" > out/${{ matrix.flavor }}.txt
          echo "artifact=out/${{ matrix.flavor }}.txt" >> "$GITHUB_OUTPUT"
          cat out/${{ matrix.flavor }}.txt
      - name: no network, no host HOME
        run: |
          if timeout 5 bash -c 'exec 3<>/dev/tcp/1.1.1.1/443' 2>/dev/null; then
            echo "network: REACHABLE"; exit 1
          fi
          echo "network: unreachable (only loopback)"
          if [ -e "$HOST_HOME" ] && [ "$HOME" != "$HOST_HOME" ]; then
            echo "host HOME $HOST_HOME: VISIBLE"; exit 1
          fi
          echo "HOME is $HOME (a scratch); host HOME $HOST_HOME: not visible"
      - name: a test that skips
        run: echo "SKIP-UNDER-WRAP(needs a GPU, counted like a skipped test)"
      - name: compile (gcc-style output, problem matcher)
        run: |
          echo "::add-matcher::.github/matchers/gcc.json"
          echo "src/main.c:1:22: warning: unused variable 'unused' [-Wunused-variable]"
  report:
    needs: build
    runs-on: ubuntu-latest
    steps:
      - name: use the build's output
        run: echo "build produced ${{ needs.build.outputs.artifact }} (${{ needs.build.result }})"
YAML

echo "demo: \$ sandgate run -C $repo --report report.json   (default: --sandbox bwrap --network none)"
set +e
"$build/sandgate" run -C "$repo" --env "HOST_HOME=$HOME" --report "$repo/report.json" >"$repo/run.log" 2>&1
status=$?
set -e
# The log without the step-start lines, the demo repository's path shortened.
grep -v ' ⭐ Run ' "$repo/run.log" | sed "s|$repo|<repo>|g"
echo "demo: exit status $status"
if [[ ! -s "$repo/report.json" ]]; then
  echo "demo: no report was written (is bubblewrap usable here? try: $build/sandgate doctor)" >&2
  exit 1
fi

python3 - "$repo/report.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print("demo: the report (--report), in short:")
for workflow in report["workflows"]:
    for job in workflow["jobs"]:
        outputs = ", ".join(f"{k}={v}" for k, v in job.get("outputs", {}).items())
        print(f"  {job['name']}: {job['conclusion']}" + (f"  outputs: {outputs}" if outputs else ""))
        for step in job["steps"]:
            extra = []
            if step["skip_markers"]:
                extra.append(f"skip markers: {step['skip_markers']}")
            if step["outputs"]:
                extra.append("outputs: " + ", ".join(f"{k}={v}" for k, v in step["outputs"].items()))
            for a in step["annotations"]:
                where = f"{a.get('file', '?')}:{a.get('line', '?')}:{a.get('col', '?')}"
                extra.append(f"{a['level']} {where} {a['message']}" + (f" [{a['code']}]" if "code" in a else ""))
            print(f"    {step['conclusion']:<9} {step['name']}" + (f"  ({'; '.join(extra)})" if extra else ""))
PY
for flavor in debug release; do
  [[ -f "$repo/out/$flavor.txt" ]] || { echo "demo: out/$flavor.txt is missing" >&2; exit 1; }
done
echo "demo: the worktree now holds out/debug.txt and out/release.txt, written from inside the wrap"
exit "$status"
