#!/bin/sh
# Configure and build into build/ (or $1), warnings as errors. Extra arguments go to cmake.
set -eu
cd "$(dirname "$0")/.."
dir=${1:-build}
[ $# -gt 0 ] && shift
cmake -S . -B "$dir" -DREFIT_WERROR=ON "$@" >"$dir.cmake.log" 2>&1 || { cat "$dir.cmake.log"; exit 1; }
grep -E "CUDA backend|SimGrid" "$dir.cmake.log" || true
cmake --build "$dir" -j"$(nproc)"
