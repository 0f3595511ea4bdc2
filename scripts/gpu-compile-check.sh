#!/usr/bin/env bash
# Compile check of both GPU targets on a machine without a GPU (CI): the
# `cuda` preset with nvcc 13 for sm_90a, and the `hip` preset with Debian's
# hipcc (clang-15) for gfx90a and gfx940. Builds the kernels for both and the
# GPU step driver (host code over the runtime API) for cuda. The GPU test
# binary links the whole harness, which CI has just built once for the CPU
# tests; compiling it again per backend would push CI past its time budget,
# so it is built (and run) by scripts/gpu-check.sh on the H200 instead. A
# toolchain that is not available is reported as SKIPPED, never as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
status=0

if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  echo "gpu-compile-check: cuda preset (sm_90a)"
  [[ -f build/cuda/build.ninja ]] || cmake --preset cuda >/dev/null
  cmake --build build/cuda -j"$jobs" --target qsa_gpu qsa_gpu_step && echo "cuda: COMPILED" || status=1
else
  echo "cuda: SKIPPED (no /usr/local/cuda/bin/nvcc)"
fi

scripts/setup.sh --hip
echo "gpu-compile-check: hip preset (gfx90a, gfx940)"
[[ -f build/hip/build.ninja ]] || cmake --preset hip >/dev/null
cmake --build build/hip -j"$jobs" --target qsa_gpu && echo "hip: COMPILED" || status=1
exit $status
