#!/usr/bin/env bash
# A/B timing of two builds of qsa_bench_gpu on one machine (docs/performance.md, "How to run"):
# each round runs one process of each build (A then B, B then A in the next round, so neither
# side always goes first), then scripts/bench_ab.py compares the two sides: medians, ranges
# and the exact rank-sum p-value. A single process per build cannot judge a change of a few
# percent at 64 decode rows (times move between processes and machines); alternating
# processes on one machine can.
#
# Usage: scripts/bench-ab.sh --filter REGEX [--rounds N] [--iterations N] [--names A B] A B
#   A, B          a qsa_bench_gpu binary, or a source tree of this project (a directory with
#                 CMakeLists.txt), built first with its cuda-bench preset in <tree>/build/cuda-bench
#   --filter      benchmark name regex (required: the whole suite takes many minutes per process)
#   --rounds      processes per side (default 6: the fewest for which a change can reach p < 0.01)
#   --iterations  timed batches per benchmark (QSA_BENCH_ITERATIONS, default 10)
#   --names       labels of the two sides in the table (default A B)
# Results (per-process JSON, ab.json, ab.md) go to $OUT when set, else to
# build/bench-ab/<date>-<time>; a directory that already holds results is refused.
# Exit status: 0 on success, 2 on bad arguments, 1 when a build or a benchmark process fails.
set -euo pipefail

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "bench-ab.sh: $*" >&2; exit 2; }

filter="" rounds=6 iterations=10 name_a=A name_b=B
sides=()
while (($# > 0)); do
  case "$1" in
    --filter) (($# >= 2)) || die "--filter needs a value"; filter=$2; shift ;;
    --rounds) (($# >= 2)) || die "--rounds needs a value"; rounds=$2; shift ;;
    --iterations) (($# >= 2)) || die "--iterations needs a value"; iterations=$2; shift ;;
    --names) (($# >= 3)) || die "--names needs two labels"; name_a=$2; name_b=$3; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) sides+=("$1") ;;
  esac
  shift
done
[[ -n $filter ]] || die "--filter is required (see --help)"
[[ $rounds =~ ^[0-9]+$ ]] && ((rounds >= 2)) || die "--rounds '$rounds' must be an integer >= 2"
[[ $iterations =~ ^[0-9]+$ ]] && ((iterations >= 1)) || die "--iterations '$iterations' must be a positive integer"
((${#sides[@]} == 2)) || die "give exactly two sides, A and B (got ${#sides[@]})"

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$repo/build/bench-ab/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
[[ -z $(ls -A "$out") ]] || die "$out already holds files; set OUT to an empty or new directory"

# A side's benchmark binary: the path itself, or the tree's build (configured and built here).
binary_of() {
  local side=$1
  if [[ -d $side ]]; then
    [[ -f $side/CMakeLists.txt && -f $side/CMakePresets.json ]] || die "$side is a directory without CMakeLists.txt and CMakePresets.json"
    echo "bench-ab.sh: building $side (cuda-bench preset)" >&2
    (cd "$side" && { [[ -f build/cuda-bench/build.ninja ]] || cmake --preset cuda-bench >/dev/null; } &&
      cmake --build build/cuda-bench -j"$(nproc)" --target qsa_bench_gpu >/dev/null) ||
      { echo "bench-ab.sh: the build of $side failed" >&2; exit 1; }
    local bin
    bin=$(find "$side/build/cuda-bench" -name qsa_bench_gpu -type f -perm -u+x | head -1)
    [[ -n $bin ]] || { echo "bench-ab.sh: no qsa_bench_gpu under $side/build/cuda-bench" >&2; exit 1; }
    echo "$bin"
  elif [[ -f $side && -x $side ]]; then
    echo "$side"
  else
    die "$side is neither an executable nor a source tree"
  fi
}
bin_a=$(binary_of "${sides[0]}")
bin_b=$(binary_of "${sides[1]}")

run_side() {  # side letter, binary, round
  local json=$out/$1-$3.json
  if ! QSA_BENCH_ITERATIONS=$iterations "$2" --benchmark_filter="$filter" --benchmark_format=json >"$json" 2>"$out/$1-$3.log"; then
    echo "bench-ab.sh: round $3 of side $1 ($2) failed; see $out/$1-$3.log" >&2
    exit 1
  fi
}
for ((i = 1; i <= rounds; ++i)); do
  if ((i % 2)); then run_side a "$bin_a" "$i"; run_side b "$bin_b" "$i"
  else run_side b "$bin_b" "$i"; run_side a "$bin_a" "$i"; fi
  echo "bench-ab.sh: round $i of $rounds done" >&2
done

py=/usr/bin/python3
[[ -x $py ]] || py=python3
a_files=() b_files=()
for ((i = 1; i <= rounds; ++i)); do a_files+=("$out/a-$i.json"); b_files+=("$out/b-$i.json"); done
"$py" "$repo/scripts/bench_ab.py" --names "$name_a" "$name_b" --a "${a_files[@]}" --b "${b_files[@]}" \
  --json "$out/ab.json" --markdown "$out/ab.md"
echo "bench-ab.sh: A = $bin_a, B = $bin_b; results in $out" >&2
