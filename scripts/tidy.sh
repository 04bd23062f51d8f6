#!/usr/bin/env bash
# clang-tidy with .clang-tidy's checks, every finding an error, on the product's sources
# (common/ sandbox/ jobs/ github/ agent/ apps/) changed since the commit scripts/tidy-base
# names (or, in a clone without it, of the last commit), committed or not: a changed .cpp with everything it reports in itself, a changed .hpp
# through its own .cpp (or the first source that includes it), its findings only. A whole-tree
# pass costs about 45 CPU-minutes (the parse of simdjson, spdlog and CLI11 per file), too
# much for each CI run: `scripts/tidy.sh --all` does it, and a tree it passes may move the base.
# The base also moves past a mechanical edit of the whole tree (SANDGATE_CHECK's), which would
# otherwise make every file it touched owe the checks at once.
# Needs build/compile_commands.json (scripts/build.sh); SANDGATE_BUILD_DIR as elsewhere.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$root/build}
cd "$root"
if [[ ! -f "$build/compile_commands.json" ]]; then
  echo "tidy.sh: $build/compile_commands.json is missing: run scripts/build.sh first" >&2
  exit 2
fi
folders='^(common|sandbox|jobs|github|agent|apps)/'
if [[ "${1:-}" == "--all" ]]; then
  changed=$(git ls-files '*.cpp' '*.hpp' | grep -E "$folders" || true)
else
  base=$(tr -d '[:space:]' <"$root/scripts/tidy-base")
  if git cat-file -e "$base^{commit}" 2>/dev/null; then
    listed=$(git diff --name-only --diff-filter=ACMR "$base" -- '*.cpp' '*.hpp')
  else
    # A shallow clone without the base: the files of the last commit (all of them, when it is
    # the clone's only one), and what is changed beside it.
    echo "tidy.sh: warning: scripts/tidy-base names $base, which this clone lacks: checking" \
      "the files of the last commit instead" >&2
    listed=$(git diff-tree --no-commit-id --name-only --diff-filter=ACMR -r --root HEAD \
      -- '*.cpp' '*.hpp'; git diff --name-only HEAD -- '*.cpp' '*.hpp')
  fi
  changed=$( (printf '%s\n' "$listed"
    git ls-files --others --exclude-standard -- '*.cpp' '*.hpp') | sort -u |
    grep -E "$folders" | grep -v '/gen/' || true)
fi
sources=()
headers=()
for file in $changed; do
  [[ -f "$file" ]] || continue
  if [[ "$file" == *.cpp ]]; then
    sources+=("$file")
    continue
  fi
  headers+=("$file")
  own="${file%.hpp}.cpp"
  if [[ ! -f "$own" ]]; then
    own=$(git grep -l --fixed-strings "#include \"$file\"" -- '*.cpp' | grep -E "$folders" |
      head -n 1 || true)
  fi
  [[ -n "$own" ]] && sources+=("$own")
done
if [[ ${#sources[@]} -eq 0 ]]; then
  echo "tidy.sh: no changed source to check"
  exit 0
fi
mapfile -t sources < <(printf '%s\n' "${sources[@]}" | sort -u)
# Findings in headers count only for the changed ones (an unchanged header's are its own
# change's to fix), each named by its path as the compiler sees it.
filter='^$'
if [[ ${#headers[@]} -gt 0 ]]; then
  filter="^$root/($(printf '%s\n' "${headers[@]}" | sed 's/[.]/\\./g' | paste -sd '|'))\$"
fi
echo "tidy.sh: ${#sources[@]} source(s), ${#headers[@]} header(s)"
# clang 14 knows C++23 as c++2b; fuzz/compat supplies what its libstdc++ 12 parse lacks.
printf '%s\n' "${sources[@]}" |
  xargs -P "$(nproc)" -n 1 clang-tidy -p "$build" --quiet --header-filter="$filter" \
    --extra-arg=-std=c++2b --extra-arg=-isystem"$root/fuzz/compat" 2>/dev/null |
  tee "$build/tidy.log" | grep -E '(error|warning):' || true
if grep -qE '(error|warning):' "$build/tidy.log"; then
  echo "tidy.sh: findings above (the whole output: $build/tidy.log)" >&2
  exit 1
fi
echo "tidy.sh: clean"
