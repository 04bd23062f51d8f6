#!/usr/bin/env bash
# package-release.sh BUILD_DIR OUT_DIR: the release asset of the four binaries in BUILD_DIR
# (a scripts/build-product.sh build) for this OS release and architecture, OUT_DIR/NAME with
# NAME from asset-name.sh, holding sandgate, sandgate-full, sandgate-broker, sandgate-agent and
# runtime-packages (runtime-packages.sh), and OUT_DIR/NAME.sha256 beside it (sha256sum's
# format). Prints the asset's path. The release workflow attaches both; the action's setup.sh
# downloads and checks them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: package-release.sh BUILD_DIR OUT_DIR}
out=${2:?usage: package-release.sh BUILD_DIR OUT_DIR}
binaries=(sandgate sandgate-full sandgate-broker sandgate-agent)
asset=$("$here/asset-name.sh")
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
for b in "${binaries[@]}"; do install -m 755 "$build/$b" "$staging/$b"; done
"$here/runtime-packages.sh" "$staging" >"$staging/runtime-packages"
mkdir -p "$out"
tar -czf "$out/$asset" -C "$staging" "${binaries[@]}" runtime-packages
(cd "$out" && sha256sum "$asset" >"$asset.sha256")
echo "$out/$asset"
