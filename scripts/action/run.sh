#!/usr/bin/env bash
# action.yml, step 2: run the action's `run` input through `sandgate exec` (the wrap), stream
# its output live, then publish exit-code, truncated and skip-markers as step outputs and a
# short step summary. Exits with the command's status. Inputs arrive as SANDGATE_INPUT_*.
# Bad inputs: one `::error` line naming the input, exit 2, nothing run.
set -euo pipefail

sandgate=${SANDGATE_BIN:-sandgate}
script=${SANDGATE_INPUT_RUN:-}
shell_input=${SANDGATE_INPUT_SHELL:-bash}
workdir=${SANDGATE_INPUT_WORKING_DIRECTORY:-.}
network=${SANDGATE_INPUT_NETWORK:-none}
timeout=${SANDGATE_INPUT_TIMEOUT:-}
output_limit=${SANDGATE_INPUT_OUTPUT_LIMIT:-262144}
offline=${SANDGATE_INPUT_OFFLINE:-auto}
cache=${SANDGATE_INPUT_TOOLCHAIN_CACHE:-}

bad_input() { echo "::error title=sandgate::input '$1': $2"; exit 2; }

[[ -n $script ]] || bad_input run "is required and empty"
[[ $network == none || $network == host ]] || bad_input network "must be none or host, not '$network'"
[[ $output_limit =~ ^[0-9]+$ ]] || bad_input output-limit "must be a byte count, not '$output_limit'"
[[ -z $timeout || $timeout =~ ^[0-9]+(ms|s|m|h)?$ ]] || bad_input timeout "must be a duration like 90s, 5m or 1h, not '$timeout'"
[[ -d $workdir ]] || bad_input working-directory "'$workdir' is not a directory"
[[ -z $cache || -d $cache ]] || bad_input toolchain-cache "'$cache' is not a directory"

case $shell_input in
  bash) template='bash --noprofile --norc -eo pipefail {0}'; ext=sh ;;
  sh) template='sh -e {0}'; ext=sh ;;
  python) template='python3 {0}'; ext=py ;;
  *'{0}'*) template=$shell_input; ext=sh ;;
  *) bad_input shell "must be bash, sh, python or a template containing {0}, not '$shell_input'" ;;
esac

temp=$(mktemp -d "${RUNNER_TEMP:-/tmp}/sandgate-action-XXXXXX")
trap 'rm -rf "$temp"' EXIT
script_file="$temp/step.$ext"
printf '%s\n' "$script" >"$script_file"

# The template becomes argv words; {0} is the script path (no shell string is built).
read -r -a words <<<"$template"
argv=()
for word in "${words[@]}"; do argv+=("${word//\{0\}/$script_file}"); done

options=(--sandbox bwrap --network "$network" --output-limit "$output_limit"
         --cwd "$workdir" --read-only "$temp" --result-file "$temp/result.json")
[[ -n $timeout ]] && options+=(--timeout "$timeout")
case $offline in
  true) options+=(--offline on) ;;
  false) options+=(--offline off) ;;
  auto) ;;
  *) bad_input offline "must be true, false or auto, not '$offline'" ;;
esac
[[ -n $cache ]] && options+=(--toolchain-cache "$cache")

status=0
"$sandgate" exec "${options[@]}" -- "${argv[@]}" || status=$?

if [[ -s $temp/result.json ]]; then
  /usr/bin/env python3 - "$temp/result.json" "$status" <<'PY'
import json, os, sys
doc = json.load(open(sys.argv[1]))
status = int(sys.argv[2])
truncated = doc["stdout"]["truncated"] or doc["stderr"]["truncated"]
outputs = {"exit-code": str(status), "truncated": "true" if truncated else "false",
           "skip-markers": str(doc["skip_markers"])}
if os.environ.get("GITHUB_OUTPUT"):
    with open(os.environ["GITHUB_OUTPUT"], "a") as out:
        for name, value in outputs.items():
            out.write(f"{name}={value}\n")
if os.environ.get("GITHUB_STEP_SUMMARY"):
    error = doc.get("error") or {}
    rows = [("exit code", status), ("duration", f'{doc["duration_ms"]} ms'),
            ("stdout bytes", doc["stdout"]["bytes"]), ("stderr bytes", doc["stderr"]["bytes"]),
            ("truncated", outputs["truncated"]), ("skip markers", doc["skip_markers"]),
            ("tree kill", doc["tree_kill"]), ("sandbox", doc["sandbox"].get("mode"))]
    if error:
        rows.append(("error", f'{error.get("kind")}: {error.get("message")}'))
    with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as out:
        out.write("### sandgate\n\n| | |\n|---|---|\n")
        for key, value in rows:
            out.write(f"| {key} | {str(value).replace('|', '/')} |\n")
PY
else
  [[ -n ${GITHUB_OUTPUT:-} ]] && printf 'exit-code=%s\ntruncated=false\nskip-markers=0\n' "$status" >>"$GITHUB_OUTPUT"
fi
exit "$status"
