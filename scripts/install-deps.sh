#!/usr/bin/env bash
# Installs the Debian 12 packages that sandgate's build, tests and benchmarks need.
# Idempotent: packages already present are not fetched again; apt's lists are refreshed
# only when something is missing. Used by README.md's Quick start and by .ci/run.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcurl4-openssl-dev libsimdjson-dev libgit2-dev libspdlog-dev catch2 libyaml-cpp-dev
  libcli11-dev libssl-dev libseccomp-dev libsqlite3-dev nlohmann-json3-dev libmicrohttpd-dev
  libpcre2-dev nettle-dev libyaml-dev libpq-dev postgresql-15 libarchive-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  bubblewrap python3 python3-jsonschema iproute2 procps firejail
  libnss-wrapper openssl curl
)

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
