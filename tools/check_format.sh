#!/usr/bin/env bash
# Checks that every C++ file git tracks is formatted as .clang-format says (clang-format 16: the
# file uses options 14 does not know). With --fix, formats them in place instead.
#   bash tools/check_format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
format=${CLANG_FORMAT:-clang-format-16}
command -v "$format" >/dev/null || { echo "check_format: $format not found (apt-get install clang-format-16)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.hpp' '*.cpp' '*.h' '*.cu')
if [ "${1:-}" = "--fix" ]; then
  "$format" -i "${files[@]}"
  exit 0
fi
unformatted=()
# Compares the formatted text with the file (clang-format 16's --dry-run also reports the no-op
# replacements its namespace-comment fixer makes for `namespace a::inline b`).
for file in "${files[@]}"; do
  "$format" "$file" | cmp -s - "$file" || unformatted+=("$file")
done
if ((${#unformatted[@]})); then
  echo "check_format: ${#unformatted[@]} of ${#files[@]} files are not formatted; run bash tools/check_format.sh --fix:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
