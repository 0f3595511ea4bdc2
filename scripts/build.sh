#!/usr/bin/env bash
# Configures (once) and builds a CMake preset, reusing an existing build.
# Usage: scripts/build.sh [preset] [targets...]   (preset defaults to cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-cpu}
shift || true
if [[ ! -f build/$preset/build.ninja ]]; then
  cmake --preset "$preset" >/dev/null
fi
jobs=$(nproc 2>/dev/null || echo 2)
if (($# > 0)); then
  cmake --build "build/$preset" -j"$jobs" --target "$@"
else
  cmake --build "build/$preset" -j"$jobs"
fi
