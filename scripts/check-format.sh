#!/bin/sh
# Check that every C and C++ source is formatted as .clang-format says
# (clang-format 14, Debian's). Exits non-zero and lists the files that are not.
#   scripts/check-format.sh          check
#   scripts/check-format.sh --fix    reformat them in place
set -eu
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null 2>&1 || { echo "check-format: clang-format not found" >&2; exit 2; }
files=$(git ls-files '*.c' '*.h' '*.cpp' '*.hpp')
if [ "${1:-}" = "--fix" ]; then
  # shellcheck disable=SC2086
  clang-format -i $files
  exit 0
fi
bad=0
for f in $files; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "check-format: $f is not formatted (scripts/check-format.sh --fix)"
    bad=$((bad + 1))
  fi
done
count=$(echo "$files" | wc -l)
echo "check-format: $((count - bad)) of $count C/C++ files formatted"
[ "$bad" -eq 0 ]
