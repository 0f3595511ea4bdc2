#!/usr/bin/env bash
# The main job: installs what is missing, builds the CLI and runs the fp64
# reference over the built-in example steps, printing per-stage summaries.
# Extra arguments go to `qsa example` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh cpu qsa >/dev/null
exec build/cpu/harness/qsa example "$@"
