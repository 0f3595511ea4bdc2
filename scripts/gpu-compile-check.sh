#!/usr/bin/env bash
# Compile check of both GPU targets on a machine without a GPU (CI): the
# `cuda` preset with nvcc 13 for sm_90a, and the `hip` preset with Debian's
# hipcc (clang-15) for gfx90a and gfx940. Builds the kernels and the GPU step
# driver for both, and the GPU test binary with nvcc (the tests are host code
# and link the whole harness: building them a second time for hip would add
# minutes to CI for little); running them needs the H200
# (scripts/gpu-check.sh). A toolchain that is not available is reported as
# SKIPPED, never as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
status=0

if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  echo "gpu-compile-check: cuda preset (sm_90a)"
  [[ -f build/cuda/build.ninja ]] || cmake --preset cuda >/dev/null
  cmake --build build/cuda -j"$jobs" --target qsa_gpu qsa_gpu_step qsa_gpu_tests && echo "cuda: COMPILED" || status=1
else
  echo "cuda: SKIPPED (no /usr/local/cuda/bin/nvcc)"
fi

scripts/setup.sh --hip
echo "gpu-compile-check: hip preset (gfx90a, gfx940)"
[[ -f build/hip/build.ninja ]] || cmake --preset hip >/dev/null
cmake --build build/hip -j"$jobs" --target qsa_gpu qsa_gpu_step && echo "hip: COMPILED" || status=1
exit $status
