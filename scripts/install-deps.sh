#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages sandgate needs. Idempotent: packages already present are
# not fetched again; apt's lists are refreshed only when something is missing. Used by
# README.md's Quick start, .ci/run and the `uses:` action.
#   install-deps.sh             build, run time, tests, benchmarks and tooling (Debian 12)
#   install-deps.sh --product   build and run time only: what scripts/build-product.sh needs
#                               (no Catch2, no PostgreSQL server, no clang; Ubuntu 24.04 too)
#   install-deps.sh --runtime   run time only (bubblewrap, git, python3 for the action)
#   install-deps.sh --runtime PKG...   the same plus the packages named (a release's libraries)
# Exit status: 0 done, 2 for an unknown option (one line naming it), apt-get's otherwise.
set -euo pipefail

# What a run needs on every path: the wrap, git for steps, python3 for the action's outputs.
runtime=(bubblewrap ca-certificates git python3)
build=(
  build-essential cmake ninja-build pkg-config
  libcurl4-openssl-dev libsimdjson-dev libgit2-dev libspdlog-dev libcli11-dev libssl-dev
  libseccomp-dev libsqlite3-dev nlohmann-json3-dev libmicrohttpd-dev libpcre2-dev nettle-dev
  libyaml-dev libpq-dev libarchive-dev
)
tests=(
  catch2 libyaml-cpp-dev postgresql-15
  clang libclang-rt-14-dev clang-format clang-tidy
  python3-jsonschema iproute2 procps firejail libnss-wrapper openssl curl
)

mode=${1:-all}
case $mode in
  all) packages=("${runtime[@]}" "${build[@]}" "${tests[@]}") ;;
  --product) packages=("${runtime[@]}" "${build[@]}") ;;
  --runtime) packages=("${runtime[@]}" "${@:2}") ;;
  *) echo "install-deps: unknown option '$mode' (--product, --runtime or none)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
