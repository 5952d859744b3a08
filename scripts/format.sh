#!/usr/bin/env bash
# clang-format over every C++ file in the repository (.clang-format).
#
#   scripts/format.sh           reformat in place
#   scripts/format.sh --check   list the files that differ; exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="${CLANG_FORMAT:-clang-format}"
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cpp' '*.hpp')
if [ "${1:-}" = "--check" ]; then
  differ=()
  for f in "${files[@]}"; do
    if ! "$clang_format" --style=file "$f" | cmp -s - "$f"; then differ+=("$f"); fi
  done
  if [ ${#differ[@]} -gt 0 ]; then
    printf 'format: %s differs from clang-format (scripts/format.sh fixes it)\n' "${differ[@]}"
    echo "format: ${#differ[@]} of ${#files[@]} files need clang-format"
    exit 1
  fi
  echo "format: ${#files[@]} files clean"
else
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$clang_format" --style=file -i
fi
