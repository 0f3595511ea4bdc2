#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the CPU test suite.
# Extra arguments go to ctest (e.g. -R Rope, -L cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh cpu
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build/cpu --output-on-failure -j"$jobs" "$@"
