#!/usr/bin/env bash
# Fuzzes the trace loader and validator (harness/fuzz/trace_fuzzer.cpp) with
# libFuzzer under ASan + UBSan: builds the `fuzz` preset (clang-14, installed
# by scripts/setup.sh --fuzz), then mutates the seed corpus (tests/fuzz/corpus)
# and the regression files (tests/fuzz/regressions) for N seconds.
# Usage: scripts/fuzz.sh [--seconds N] [--build-dir DIR] [--strict]
#   --seconds N      how long to fuzz (default 60, what CI runs)
#   --build-dir DIR  where the fuzz preset builds (default build/fuzz)
#   --strict         also fail on findings inside HDF5 itself (see below)
# Exit 0: no finding in qsa. Exit 1: a crash, hang, leak, sanitizer report or
# untyped error whose stack leads into qsa's code; the input is saved and the
# steps to reproduce are printed.
#
# HDF5 1.10 (Debian 12) has known out-of-bounds reads in its own decoders of
# corrupt files (docs/robustness.md). A finding whose faulting frames and
# memory both belong to libhdf5 is reported as an HDF5 finding: saved under
# DIR/work/hdf5-findings, listed at the end, and fuzzing restarts for the time
# left; it fails the run only with --strict, since qsa cannot fix it.
# New inputs that reach new code accumulate in DIR/work/corpus, so a longer
# run by hand continues where the last one stopped.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
build=build/fuzz
strict=0
while (($# > 0)); do
  case $1 in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    --seconds=*) seconds=${1#*=}; shift ;;
    --build-dir) build=${2:?--build-dir needs a value}; shift 2 ;;
    --build-dir=*) build=${1#*=}; shift ;;
    --strict) strict=1; shift ;;
    *) echo "fuzz: unknown option $1 (accepted: --seconds N, --build-dir DIR, --strict)" >&2; exit 2 ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ ]] && ((seconds > 0)) || { echo "fuzz: --seconds must be a positive integer" >&2; exit 2; }

scripts/setup.sh --fuzz
[[ -f $build/build.ninja ]] || cmake --preset fuzz -B "$build" >/dev/null
work=$build/work
mkdir -p "$work/corpus" "$work/artifacts" "$work/hdf5-findings"
if ! cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target qsa_trace_fuzzer >"$work/build.log" 2>&1; then
  cat "$work/build.log"
  echo "fuzz: building qsa_trace_fuzzer failed" >&2
  exit 1
fi
fuzzer=$build/harness/fuzz/qsa_trace_fuzzer

# The target writes each input to a scratch file: keep that off the disk.
scratch_root=/tmp
[[ -d /dev/shm && -w /dev/shm ]] && scratch_root=/dev/shm
scratch=$(mktemp -d "$scratch_root/qsa-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
# HDF5 allocates what a corrupt length field claims before it checks the
# claim against the file; past 1 GiB the allocation fails as it would on a
# real machine (HDF5 then reports an error) instead of aborting under ASan.
# qsa's own allocations never come near that: the target caps a trace at
# 64 MiB. Same settings as ctest fuzz.regressions.
export ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=1024"
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Any LLVM's symbolizer reads clang-14's debug info (CI has llvm-15's, from
# hipcc); without one, stacks are addresses only.
symbolizer=$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer-15 || command -v llvm-symbolizer || true)
[[ -n $symbolizer ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer

# Who is to blame for a report: scripts/fuzz_blame.awk (its comment says how).
blame() { awk -f scripts/fuzz_blame.awk "$1"; }

echo "fuzz: ${seconds} s of $fuzzer over tests/fuzz/corpus and tests/fuzz/regressions"
deadline=$((SECONDS + seconds))
hdf5_findings=()
runs=0
while ((deadline - SECONDS > 0)); do
  runs=$((runs + 1))
  log=$work/run-$runs.log
  set +e
  # -timeout: one input may take this long (ASan build, loaded machine) before
  # it counts as a hang; -rss_limit_mb: what a hostile header may make us use.
  "$fuzzer" -max_total_time=$((deadline - SECONDS)) -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" tests/fuzz/corpus tests/fuzz/regressions >"$log" 2>&1 &
  pid=$!
  wait "$pid"
  status=$?
  set -e
  rm -f /dev/shm/__KMP_REGISTERED_LIB_"$pid"_*  # libomp's, left behind when a finding aborts
  grep -E '^(INFO: Seed:|stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb))' "$log" || true
  ((status == 0)) && break
  artifact=$(grep -o 'Test unit written to [^ ]*' "$log" | awk '{print $5}' | tail -n 1 || true)
  if [[ -n $artifact && $(blame "$log") == hdf5 ]]; then
    kept=$work/hdf5-findings/$(basename "$artifact").h5
    mv "$artifact" "$kept"
    cp "$log" "$kept.log"
    hdf5_findings+=("$kept")
    echo "fuzz: a finding inside HDF5 itself: $kept (report: $kept.log); fuzzing on"
    continue
  fi
  echo "fuzz: FINDING (libFuzzer exit $status); the report ($log):"
  report_from=$(awk -v mode=start -f scripts/fuzz_blame.awk "$log")
  if [[ -n $report_from ]]; then sed -n "${report_from},\$p" "$log" | head -n 120; else tail -n 80 "$log"; fi
  if [[ -z $artifact ]]; then
    echo "fuzz: libFuzzer saved no input; the log above says why"
    exit 1
  fi
  # A finding can need the inputs run before it in the same process (state
  # left in HDF5's heap, as in CI on 2026-11-30); then its input alone does
  # not reproduce it, and the seed of the run is what does.
  if "$fuzzer" "$artifact" >"$log.alone" 2>&1; then
    seed=$(grep -o -m1 'INFO: Seed: [0-9]*' "$log" | awk '{print $3}' || true)
    echo "fuzz: the input ALONE DOES NOT reproduce it ($log.alone): it depends on the inputs run before it."
    echo "  This run's libFuzzer seed was ${seed:-unknown}; rerun with -seed=${seed:-N} over the same corpus folders."
  else
    echo "fuzz: the input alone reproduces it ($log.alone)"
  fi
  cat <<EOF

fuzz: the input is $artifact. To reproduce and keep it as a regression test:
  $fuzzer $artifact                          # the finding, with its stack
  build/cpu/harness/qsa inspect $artifact    # what a user would see
  cp $artifact tests/fuzz/regressions/NAME.h5   # then fix it; ctest -R fuzz.regressions replays it
EOF
  exit 1
done

if ((${#hdf5_findings[@]} > 0)); then
  echo "fuzz: ${#hdf5_findings[@]} finding(s) inside HDF5 1.10 itself, not in qsa (docs/robustness.md):"
  printf '  %s\n' "${hdf5_findings[@]}"
  echo "  an input that shows a new HDF5 problem goes to tests/fuzz/hdf5-known/ (not replayed under ASan)"
  ((strict == 0)) || exit 1
fi
echo "fuzz: no finding in qsa in ${seconds} s ($runs libFuzzer run(s), logs in $work)"
