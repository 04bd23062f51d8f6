#!/usr/bin/env bash
# Prints the name of this machine's release asset, sandgate-<os><version>-<arch>.tar.gz
# (sandgate-debian12-x86_64.tar.gz, sandgate-ubuntu24.04-aarch64.tar.gz): release binaries link
# their distribution's libraries, so there is one asset per OS release and architecture.
# Used by package-release.sh (the release workflow) and setup.sh (the action).
set -euo pipefail
ID=linux VERSION_ID=""
# shellcheck disable=SC1091
[[ -r /etc/os-release ]] && . /etc/os-release
echo "sandgate-${ID}${VERSION_ID}-$(uname -m).tar.gz"
