#!/usr/bin/env bash
# action.yml's set-up, in two phases around the actions/cache restore step:
#
#   setup.sh locate   bubblewrap (install-deps.sh --runtime, on every path), the user-namespace
#                     check, then a binary from, in order: $SANDGATE_BIN (prebuilt), the
#                     release asset of the action's ref (sha256 checked), the build cache
#                     directory of the action's commit. Outputs: key, dir, found, source.
#   setup.sh finish   takes what the cache step restored into `dir`, else builds the product
#                     (scripts/build-product.sh, no tests) into it. Outputs: bin, source, save.
#
# The build cache directory is $RUNNER_TOOL_CACHE/sandgate/KEY (a self-hosted runner keeps it
# across jobs; a hosted one gets it back through actions/cache), KEY naming the action's commit
# (its ref when that is a commit, else the git HEAD of its checkout, else a hash of its
# sources), the OS release and the architecture. source is one of prebuilt, release, cache,
# build. Environment: SANDGATE_ACTION_REF, SANDGATE_ACTION_REPOSITORY (github.action_ref and
# github.action_repository), SANDGATE_RELEASE_URL (default
# $GITHUB_SERVER_URL/REPOSITORY/releases/download), SANDGATE_CACHE_DIR (from locate, for finish).
# Exit status: 0 ready, 1 with one `::error` line (refused sandbox, checksum mismatch, failed
# build), 2 for an unknown phase.
set -euo pipefail
action_root=$(cd "$(dirname "$0")/../.." && pwd)
sysctl_file=${SANDGATE_USERNS_SYSCTL:-/proc/sys/kernel/apparmor_restrict_unprivileged_userns}
binaries=(sandgate sandgate-full sandgate-broker sandgate-agent)

fail() {
  echo "::error title=sandgate setup::$1"
  exit 1
}
output() { [[ -z ${GITHUB_OUTPUT:-} ]] || printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"; }
has_binaries() {
  local b
  for b in "${binaries[@]}"; do [[ -x $1/$b ]] || return 1; done
}

action_commit() {
  local ref=${SANDGATE_ACTION_REF:-}
  if [[ $ref =~ ^[0-9a-f]{40}$ ]]; then
    echo "$ref"
  elif [[ -z $(git -C "$action_root" status --porcelain 2>/dev/null || echo dirty) ]]; then
    git -C "$action_root" rev-parse HEAD
  else  # the runner's download of the action holds no git metadata: hash its sources
    (cd "$action_root" && find . -path './build*' -prune -o -path ./.git -prune -o -type f -print0 |
      LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-40)
  fi
}

# The release asset for the action's ref, into $1; returns 1 when the ref has none.
fetch_release() {
  local ref=${SANDGATE_ACTION_REF:-} repo=${SANDGATE_ACTION_REPOSITORY:-}
  [[ -n $ref && ! $ref =~ ^[0-9a-f]{40}$ ]] || return 1
  command -v curl >/dev/null || return 1
  local base=${SANDGATE_RELEASE_URL:-${GITHUB_SERVER_URL:-https://github.com}/$repo/releases/download}
  [[ -n ${SANDGATE_RELEASE_URL:-} || -n $repo ]] || return 1
  local asset
  asset=$("$action_root/scripts/action/asset-name.sh")
  local temp
  temp=$(mktemp -d "${RUNNER_TEMP:-/tmp}/sandgate-release-XXXXXX")
  if ! curl -fsSL --retry 2 -o "$temp/$asset.sha256" "$base/$ref/$asset.sha256" 2>/dev/null ||
    ! curl -fsSL --retry 2 -o "$temp/$asset" "$base/$ref/$asset" 2>/dev/null; then
    rm -rf "$temp"
    echo "sandgate: no release asset $asset for $ref; using a cached or fresh build"
    return 1
  fi
  local want got
  want=$(cut -d' ' -f1 <"$temp/$asset.sha256")
  got=$(sha256sum "$temp/$asset" | cut -d' ' -f1)
  if [[ $want != "$got" ]]; then
    rm -rf "$temp"
    fail "release asset $asset of $ref: sha256 $got does not match its .sha256 ($want)"
  fi
  rm -rf "$1.tmp"
  mkdir -p "$1.tmp"
  tar -xzf "$temp/$asset" -C "$1.tmp" "${binaries[@]}" runtime-packages
  rm -rf "$temp"
  has_binaries "$1.tmp" || fail "release asset $asset of $ref lacks one of ${binaries[*]}"
  rm -rf "$1"
  mv "$1.tmp" "$1"
  install_runtime "$1"
  echo "sandgate: release $ref ($asset, sha256 $got)"
}

# bubblewrap, git, python3, and the packages of the libraries DIR's binaries link (its
# runtime-packages file, written where they were built).
install_runtime() {
  local packages=() p
  if [[ -n ${1:-} && -r $1/runtime-packages ]]; then
    while read -r p; do
      [[ -z $p ]] && continue
      [[ $p =~ ^[a-z0-9][a-z0-9+.-]*$ ]] || fail "$1/runtime-packages: bad package name '$p'"
      packages+=("$p")
    done <"$1/runtime-packages"
  fi
  "$action_root/scripts/install-deps.sh" --runtime "${packages[@]}"
}

check_userns() {
  # Ubuntu 24.04 restricts unprivileged user namespaces through AppArmor; bwrap needs them.
  [[ -r $sysctl_file && $(cat "$sysctl_file") == 1 ]] || return 0
  if sudo -n sysctl -q -w kernel.apparmor_restrict_unprivileged_userns=0 2>/dev/null; then
    echo "sandgate: lifted kernel.apparmor_restrict_unprivileged_userns for bubblewrap"
  else
    fail "unprivileged user namespaces are restricted (kernel.apparmor_restrict_unprivileged_userns=1) and sudo is not allowed here; set the sysctl to 0 or install an AppArmor profile for bwrap"
  fi
}

locate() {
  check_userns
  install_runtime
  if [[ -n ${SANDGATE_BIN:-} ]]; then
    [[ -x $SANDGATE_BIN ]] || fail "SANDGATE_BIN=$SANDGATE_BIN is not an executable"
    has_binaries "$(dirname "$SANDGATE_BIN")" || fail "SANDGATE_BIN=$SANDGATE_BIN: ${binaries[*]:1} must sit beside it"
    output found true
    output source prebuilt
    output dir "$(dirname "$SANDGATE_BIN")"
    return
  fi
  local key
  local asset
  asset=$("$action_root/scripts/action/asset-name.sh")
  key="sandgate-$(action_commit)-${asset#sandgate-}"
  key=${key%.tar.gz}
  local dir=${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}/sandgate/$key
  output key "$key"
  output dir "$dir"
  if has_binaries "$dir"; then
    install_runtime "$dir"
    output found true
    output source cache
  elif fetch_release "$dir"; then
    output found true
    output source release
  else
    output found false
    output source build
  fi
}

finish() {
  local dir=${SANDGATE_CACHE_DIR:?SANDGATE_CACHE_DIR is set by the locate phase}
  local source=${SANDGATE_SOURCE:-build} save=false
  if [[ $source == build ]] && has_binaries "$dir"; then
    source=cache  # restored by actions/cache
    install_runtime "$dir"
  elif [[ $source == build ]]; then
    local build=${RUNNER_TEMP:-/tmp}/sandgate-build
    echo "sandgate: building the product (scripts/build-product.sh) for $dir"
    SANDGATE_BUILD_DIR=$build "$action_root/scripts/build-product.sh" >/dev/null ||
      fail "building sandgate failed (scripts/build-product.sh)"
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    local b
    for b in "${binaries[@]}"; do cp "$build/$b" "$dir.tmp/$b"; done
    "$action_root/scripts/action/runtime-packages.sh" "$dir.tmp" >"$dir.tmp/runtime-packages" ||
      fail "cannot tell the packages of the built binaries' libraries"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
    save=true
  fi
  "$dir/sandgate" doctor >/dev/null || fail "this runner cannot provide sandgate's default sandbox; see \`sandgate doctor\`"
  [[ -z ${GITHUB_PATH:-} ]] || echo "$dir" >>"$GITHUB_PATH"
  output bin "$dir/sandgate"
  output source "$source"
  output save "$save"
}

case ${1:-} in
  locate) locate ;;
  finish) finish ;;
  *)
    echo "sandgate setup: unknown phase '${1:-}' (locate or finish)" >&2
    exit 2
    ;;
esac
