#!/usr/bin/env bash
# action.yml, the run step: run the action's `run` input through `sandgate exec` (the wrap),
# stream its output live, then publish exit-code, truncated, skip-markers, outcome
# (success, failure, timed-out, cancelled, refused), timed-out and cancelled as step outputs
# and a short step summary. Exits with the command's status. Inputs arrive as
# SANDGATE_INPUT_*; `env` (KEY=VALUE lines) and `pass-env` (names of this step's own
# variables) become `--env`/`--pass-env`. SIGINT/SIGTERM (the runner cancelling the step) are
# forwarded to sandgate, which stops the command's whole tree; the outputs are still written.
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
env_input=${SANDGATE_INPUT_ENV:-}
pass_env_input=${SANDGATE_INPUT_PASS_ENV:-}

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

name_pattern='^[A-Za-z_][A-Za-z0-9_]*$'
line_number=0
while IFS= read -r line; do
  line_number=$((line_number + 1))
  [[ -z ${line//[[:space:]]/} ]] && continue
  [[ ${line%%=*} =~ $name_pattern && $line == *=* ]] ||
    bad_input env "line $line_number: expected NAME=VALUE (the value is not shown)"
  options+=(--env "$line")
done <<<"$env_input"
read -r -d '' -a pass_names <<<"${pass_env_input//,/ }" || true
for name in "${pass_names[@]}"; do
  [[ $name =~ $name_pattern ]] || bad_input pass-env "'$name' is not a variable name"
  options+=(--pass-env "$name")
done

# In the background so that this shell can forward the runner's SIGINT/SIGTERM to it; sandgate
# then stops the command's tree and exits 128+N, and the outputs below are written. The
# subshell undoes the SIGINT/SIGQUIT ignoring bash gives background commands.
got_signal=""
(
  trap - INT QUIT
  exec "$sandgate" exec "${options[@]}" -- "${argv[@]}"
) &
child=$!
forward() {
  got_signal=$1
  kill -s "$1" "$child" 2>/dev/null || true
}
trap 'forward INT' INT
trap 'forward TERM' TERM
status=0
while :; do
  status=0
  wait "$child" || status=$?
  kill -0 "$child" 2>/dev/null || break  # a trapped signal interrupted wait: wait again
done
trap - INT TERM

if [[ -s $temp/result.json ]]; then
  /usr/bin/env python3 - "$temp/result.json" "$status" "$got_signal" <<'PY'
import json, os, sys
doc = json.load(open(sys.argv[1]))
status = int(sys.argv[2])
truncated = doc["stdout"]["truncated"] or doc["stderr"]["truncated"]
kind = (doc.get("error") or {}).get("kind")
outcome = {"timeout": "timed-out", "cancelled": "cancelled", "invalid_request": "refused",
           "sandbox_unavailable": "refused"}.get(kind, "success" if status == 0 else "failure")
outputs = {"exit-code": str(status), "truncated": "true" if truncated else "false",
           "skip-markers": str(doc["skip_markers"]), "outcome": outcome,
           "timed-out": "true" if outcome == "timed-out" else "false",
           "cancelled": "true" if outcome == "cancelled" or sys.argv[3] else "false"}
if os.environ.get("GITHUB_OUTPUT"):
    with open(os.environ["GITHUB_OUTPUT"], "a") as out:
        for name, value in outputs.items():
            out.write(f"{name}={value}\n")
if os.environ.get("GITHUB_STEP_SUMMARY"):
    error = doc.get("error") or {}
    rows = [("outcome", outcome), ("exit code", status),
            ("duration", f'{doc["duration_ms"]} ms'),
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
elif [[ -n ${GITHUB_OUTPUT:-} ]]; then  # refused before the run (sandgate exec's 125)
  outcome=failure cancelled=false
  [[ $status == 125 ]] && outcome=refused
  [[ -n $got_signal ]] && outcome=cancelled cancelled=true
  printf 'exit-code=%s\ntruncated=false\nskip-markers=0\noutcome=%s\ntimed-out=false\ncancelled=%s\n' \
    "$status" "$outcome" "$cancelled" >>"$GITHUB_OUTPUT"
fi
exit "$status"
