#!/usr/bin/env bash
# GPU validation on the H200 machine (../shared/h200.md, docs/gpu-validation.md):
# configures and builds the cuda preset, runs the GPU tests (ctest label
# `gpu`) and, with --sanitize, runs the GPU test binary under
# compute-sanitizer memcheck and racecheck. Logs, the gtest XML and an
# environment record go under $OUT when it is set (else build/cuda/gpu-check);
# a summary table is printed last. Exit status 0 only when every step passed;
# GPU tests that did not run (no GPU: exit 77) are reported as NOT RUN, and so
# are gtests that skipped themselves (GTEST_SKIP), named in gtest-counts.txt.
#
# Usage: [QSA_COMMIT=sha] scripts/gpu-check.sh [--sanitize] [--filter GTEST_FILTER] [--jobs N]
#   --filter applies to the sanitizer runs only (they are slow); ctest always
#   runs the whole GPU suite.
set -uo pipefail
cd "$(dirname "$0")/.."

sanitize=0
filter="*"
jobs=16
while (($# > 0)); do
  case "$1" in
    --sanitize) sanitize=1 ;;
    --filter) filter=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

logdir=${OUT:-build/cuda/gpu-check}
mkdir -p "$logdir"
logdir=$(cd "$logdir" && pwd)
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  if [[ -n ${QSA_COMMIT:-} ]]; then  # the device runner copies the tree without git history
    echo "commit: $QSA_COMMIT (from QSA_COMMIT)"
  elif git rev-parse --verify -q HEAD > /dev/null 2>&1; then
    echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (+ uncommitted changes)')"
  else
    echo "commit: unknown (no git checkout here: record the commit the tree was copied from)"
  fi
  echo "host: $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
  /usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1 | sed 's/^/nvcc: /'
  echo "cmake: $(cmake --version | head -1)"
} > "$logdir/environment.txt"
cat "$logdir/environment.txt"

names=()
results=()
seconds=()
overall=0

# step NAME CMD...: runs CMD with its output in NAME.log and records the result.
step() {
  local name=$1
  shift
  local start=$SECONDS
  echo "== $name: $*"
  "$@" > "$logdir/$name.log" 2>&1
  local rc=$?
  local result=PASS
  if ((rc != 0)); then
    result="FAIL (exit $rc)"
    overall=1
    tail -40 "$logdir/$name.log"
  elif grep -qE "Not Run|\*\*\*Skipped|NOT RUN" "$logdir/$name.log"; then
    result="NOT RUN"
    overall=1
  elif grep -qE "RACECHECK SUMMARY: [1-9]" "$logdir/$name.log"; then
    result="HAZARDS"  # racecheck warnings do not set its exit code
    overall=1
  fi
  names+=("$name")
  results+=("$result")
  seconds+=($((SECONDS - start)))
  return $rc
}

if step configure cmake --preset cuda -DQSA_BUILD_TESTS=ON &&
   step build cmake --build build/cuda -j"$jobs"; then
  GTEST_OUTPUT="xml:$logdir/qsa_gpu_tests.xml" step ctest-gpu ctest --test-dir build/cuda -L gpu --output-on-failure
  if [[ -f $logdir/qsa_gpu_tests.xml ]]; then  # gtest's own counts, for docs/gpu-validation.md
    grep -m1 -o 'tests="[0-9]*" failures="[0-9]*" disabled="[0-9]*" errors="[0-9]*" time="[^"]*"' \
      "$logdir/qsa_gpu_tests.xml" | sed 's/^/qsa_gpu_tests: /' | tee "$logdir/gtest-counts.txt"
    # GTEST_SKIP passes in ctest's eyes: name every skipped test, and mark
    # the GPU tests NOT RUN when any was skipped, so that none counts as passed.
    skipped=$(grep -o '<testcase name="[^"]*"[^>]*result="skipped"[^>]*classname="[^"]*"' "$logdir/qsa_gpu_tests.xml" |
      sed 's/<testcase name="\([^"]*\)".*classname="\([^"]*\)"/\2.\1/')
    if [[ -n $skipped ]]; then
      echo "skipped (NOT RUN): $(echo "$skipped" | tr '\n' ' ')" | tee -a "$logdir/gtest-counts.txt"
      names+=("gtest-skipped")
      results+=("NOT RUN")
      seconds+=(0)
      overall=1
    fi
  fi
  # The GPU step driver on the bundled traces: against the reference stage by
  # stage (both) and against the recordings (hip; the transformers-recorded
  # bf16 trace included). Reports land next to the logs.
  for trace in tiny-synthetic tiny-fp8 hf-bf16; do
    step "replay-both-$trace" build/cuda/harness/qsa replay "data/$trace.h5" --backend both \
      --report "$logdir/replay-both-$trace.html" --force
    step "replay-hip-$trace" build/cuda/harness/qsa replay "data/$trace.h5" --backend hip
  done
  if ((sanitize)); then
    for tool in memcheck racecheck; do
      step "sanitize-$tool" "$sanitizer" --tool "$tool" --error-exitcode 9 \
        build/cuda/tests/qsa_gpu_tests --gtest_filter="$filter"
      grep -E "(ERROR|RACECHECK) SUMMARY" "$logdir/sanitize-$tool.log" || true
    done
  fi
fi

echo
printf '%-20s %-16s %8s  %s\n' step result seconds log
for i in "${!names[@]}"; do
  printf '%-20s %-16s %8s  %s\n' "${names[$i]}" "${results[$i]}" "${seconds[$i]}" "$logdir/${names[$i]}.log"
done
exit $overall
