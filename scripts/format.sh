#!/usr/bin/env bash
# Checks (default) or applies (--fix) .clang-format on every C/C++ file git tracks.
# The check is the first stage of scripts/test.sh: a formatting violation fails CI before the
# build. clang-format 14 (Debian 12's) is the reference: another version may format differently.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc' '*.c')
case "${1:-}" in
  --fix) clang-format -i "${files[@]}" ;;
  "")
    if ! clang-format --dry-run -Werror "${files[@]}"; then
      echo "format.sh: files above differ from .clang-format; run scripts/format.sh --fix" >&2
      exit 1
    fi
    echo "format.sh: ${#files[@]} files formatted as .clang-format says" ;;
  *) echo "usage: scripts/format.sh [--fix]" >&2; exit 2 ;;
esac
