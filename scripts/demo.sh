#!/usr/bin/env bash
# The main job: installs what is missing, builds the CLI and replays a
# bundled trace recorded from transformers' eager Qwen4Exp (bf16) through the
# fp64 reference, printing the per-stage diff report. Extra arguments go to
# `qsa replay` (try --help); QSA_TRACE picks another trace.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh cpu qsa >/dev/null
exec build/cpu/harness/qsa replay "${QSA_TRACE:-data/hf-bf16.h5}" --mode chained "$@"
