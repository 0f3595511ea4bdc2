#!/usr/bin/env bash
# GPU benchmarks on the H200 machine (docs/performance.md): configures and builds the
# cuda-bench preset (Release, QSA_BUILD_BENCHMARKS=ON), runs qsa_bench_gpu with JSON output,
# runs the PyTorch / Triton baselines (scripts/bench_baselines.py) and prints
# scripts/compare_bench.py's table last. Three files go to $OUT when it is set (else to
# build/cuda-bench/bench):
#   bench-gpu.json        qsa_bench_gpu's Google Benchmark JSON (context: GPU, commit, seed)
#   bench-baselines.json  the baselines in the same format
#   bench-gpu.log         environment, build, both runs' console output and the table
# Exit status 0 only when every step passed; without a GPU the benchmarks are NOT RUN (1).
#
# Usage: [QSA_COMMIT=sha] scripts/bench-gpu.sh [--filter REGEX] [--jobs N] [--iterations N]
#                                               [--no-baselines] [--no-build]
#   --filter       regex on benchmark names, for both (e.g. 'attention/decode')
#   --iterations   timed batches per benchmark (QSA_BENCH_ITERATIONS; default 20 ours, 10 baselines)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

filter=""
jobs=16
iterations=""
baselines=1
build=1
while (($# > 0)); do
  case "$1" in
    --filter) filter=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --iterations) iterations=$2; shift ;;
    --no-baselines) baselines=0 ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "bench-gpu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

out=${OUT:-build/cuda-bench/bench}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/bench-gpu.log
: > "$log"
[[ -n $iterations ]] && export QSA_BENCH_ITERATIONS=$iterations
if [[ -z ${QSA_COMMIT:-} ]]; then  # the device runner copies the tree without git history
  QSA_COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  [[ $QSA_COMMIT != unknown ]] && ! git diff --quiet HEAD 2>/dev/null && QSA_COMMIT="$QSA_COMMIT+dirty"
fi
export QSA_COMMIT

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $QSA_COMMIT"
  echo "host: $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null |
    sed 's/^/gpu: /'
  /usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1 | sed 's/^/nvcc: /'
  python3 -c 'import torch; print("torch:", torch.__version__)' 2>/dev/null
} | tee -a "$log"

names=()
results=()
seconds=()
overall=0

# step NAME CMD...: runs CMD, its output appended to the log and shown, and records the result.
step() {
  local name=$1
  shift
  local start=$SECONDS
  echo "== $name: $*" | tee -a "$log"
  "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  local result=PASS
  if ((rc == 77)); then
    result="NOT RUN"
    overall=1
  elif ((rc != 0)); then
    result="FAIL (exit $rc)"
    overall=1
  fi
  names+=("$name")
  results+=("$result")
  seconds+=($((SECONDS - start)))
  return "$rc"
}

bench=build/cuda-bench/harness/bench/qsa_bench_gpu
if ((build)); then
  step configure cmake --preset cuda-bench -DQSA_BUILD_TESTS=OFF > /dev/null &&
    step build cmake --build build/cuda-bench -j"$jobs" --target qsa_bench_gpu
fi

if [[ -x $bench ]]; then
  args=(--benchmark_out="$out/bench-gpu.json" --benchmark_out_format=json --benchmark_counters_tabular=false)
  [[ -n $filter ]] && args+=(--benchmark_filter="$filter")
  step qsa_bench_gpu "$bench" "${args[@]}"
  if ((baselines)); then
    bargs=(--out "$out/bench-baselines.json")
    [[ -n $filter ]] && bargs+=(--filter "$filter")
    step baselines python3 scripts/bench_baselines.py "${bargs[@]}"
  fi
  if [[ -f $out/bench-gpu.json ]]; then
    cmp=("$out/bench-gpu.json")
    [[ -f $out/bench-baselines.json ]] && cmp+=("$out/bench-baselines.json")
    echo | tee -a "$log"
    step compare python3 scripts/compare_bench.py "${cmp[@]}"
  fi
else
  echo "bench-gpu.sh: $bench was not built" | tee -a "$log"
  overall=1
fi

echo | tee -a "$log"
printf '%-16s %-16s %8s\n' step result seconds | tee -a "$log"
for i in "${!names[@]}"; do
  printf '%-16s %-16s %8s\n' "${names[$i]}" "${results[$i]}" "${seconds[$i]}" | tee -a "$log"
done
echo "files: $out/bench-gpu.json $out/bench-baselines.json $log" | tee -a "$log"
exit $overall
