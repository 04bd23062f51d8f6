#!/usr/bin/env bash
# action.yml, step 1: make `sandgate` available and make sure bubblewrap can create user
# namespaces on this runner. Uses $SANDGATE_BIN when set (a prebuilt binary), otherwise builds
# the action's own checkout once per runner temp dir.
set -euo pipefail
action_root=$(cd "$(dirname "$0")/../.." && pwd)
sysctl_file=${SANDGATE_USERNS_SYSCTL:-/proc/sys/kernel/apparmor_restrict_unprivileged_userns}

fail() { echo "::error title=sandgate setup::$1"; exit 1; }

# Ubuntu 24.04 restricts unprivileged user namespaces through AppArmor; bwrap needs them.
if [[ -r $sysctl_file && $(cat "$sysctl_file") == 1 ]]; then
  if sudo -n sysctl -q -w kernel.apparmor_restrict_unprivileged_userns=0 2>/dev/null; then
    echo "sandgate: lifted kernel.apparmor_restrict_unprivileged_userns for bubblewrap"
  else
    fail "unprivileged user namespaces are restricted (kernel.apparmor_restrict_unprivileged_userns=1) and sudo is not allowed here; set the sysctl to 0 or install an AppArmor profile for bwrap"
  fi
fi

if [[ -n ${SANDGATE_BIN:-} ]]; then
  [[ -x $SANDGATE_BIN ]] || fail "SANDGATE_BIN=$SANDGATE_BIN is not an executable"
  for other in sandgate-full sandgate-broker sandgate-agent; do
    [[ -x $(dirname "$SANDGATE_BIN")/$other ]] || fail "SANDGATE_BIN=$SANDGATE_BIN: $other is not beside it"
  done
  bin_dir=$(dirname "$SANDGATE_BIN")
else
  build=${RUNNER_TEMP:-/tmp}/sandgate-build
  SANDGATE_BUILD_DIR=$build "$action_root/scripts/build.sh" >/dev/null
  bin_dir=$build
fi
[[ -n ${GITHUB_PATH:-} ]] && echo "$bin_dir" >>"$GITHUB_PATH"
"$bin_dir/sandgate" doctor >/dev/null || fail "this runner cannot provide sandgate's default sandbox; see \`sandgate doctor\`"
