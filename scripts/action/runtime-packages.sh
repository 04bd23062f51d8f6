#!/usr/bin/env bash
# Prints, one a line, the Debian/Ubuntu packages that ship the shared libraries the sandgate
# binaries in DIR link (ldd, then dpkg -S; merged /usr aware). A build's or a release's
# `runtime-packages` file, installed by scripts/action/setup.sh where the binaries come from a
# cache or a release instead of a local build. Exit status: 0, 1 when a library belongs to no
# package (one line naming it), 2 without DIR.
set -euo pipefail
dir=${1:?usage: runtime-packages.sh DIR}
owner() {
  local path=$1 found
  for candidate in "$path" "/usr$path" "${path#/usr}"; do
    if found=$(dpkg -S "$candidate" 2>/dev/null); then
      echo "${found%%:*}"
      return 0
    fi
  done
  return 1
}
for binary in "$dir"/sandgate "$dir"/sandgate-full "$dir"/sandgate-broker "$dir"/sandgate-agent; do
  { ldd "$binary" 2>/dev/null || true; } | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p'
done | sort -u | while read -r library; do
  owner "$library" || { echo "runtime-packages: $library belongs to no package" >&2; exit 1; }
done | sort -u
