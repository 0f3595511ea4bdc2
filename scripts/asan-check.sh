#!/usr/bin/env bash
# The whole CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer:
# configures a sanitizer preset, builds it and runs every non-GPU test — the
# GoogleTest suites, the CLI and Python cases on the sanitized `qsa`, and
# fuzz.regressions. CI runs it with --preset fuzz (docs/robustness.md).
# Usage: scripts/asan-check.sh [--preset asan|fuzz] [--build-dir DIR] [--per-test]
#   --preset asan    GCC, Debug (-O0), ASan + UBSan (the default)
#   --preset fuzz    clang-14, -O1, ASan + UBSan + libFuzzer coverage; the same
#                    build then gives scripts/fuzz.sh its fuzzer (CI uses it)
#   --build-dir DIR  where to build (default build/PRESET)
#   --per-test       run the GoogleTest cases through ctest, one process each
#                    (`ctest -LE gpu`), instead of one process per test binary
# Both presets stop at the first sanitizer report (-fno-sanitize-recover=all).
# By default each GoogleTest binary runs once, in full: a sanitized process
# takes most of a second to start, so the ~350 per-test processes of
# `ctest -LE gpu` cost minutes; the CLI, Python and fuzz cases still go
# through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

preset=asan
build=
per_test=0
while (($# > 0)); do
  case $1 in
    --preset) preset=${2:?--preset needs a value}; shift 2 ;;
    --preset=*) preset=${1#*=}; shift ;;
    --build-dir) build=${2:?--build-dir needs a value}; shift 2 ;;
    --build-dir=*) build=${1#*=}; shift ;;
    --per-test) per_test=1; shift ;;
    *) echo "asan-check: unknown option $1 (accepted: --preset asan|fuzz, --build-dir DIR, --per-test)" >&2
       exit 2 ;;
  esac
done
case $preset in
  asan) scripts/setup.sh ;;
  fuzz) scripts/setup.sh --fuzz ;;
  *) echo "asan-check: --preset must be asan or fuzz (got $preset)" >&2; exit 2 ;;
esac
build=${build:-build/$preset}

jobs=$(nproc 2>/dev/null || echo 2)
[[ -f $build/build.ninja ]] || cmake --preset "$preset" -B "$build" >/dev/null
start=$SECONDS
cmake --build "$build" -j"$jobs"
built=$SECONDS

# HDF5 1.10 and LLVM's libomp leak small blocks inside themselves (HDF5 on
# error paths of corrupt files, libomp when the thread count changes); only
# allocations made inside those libraries are exempt (tests/fuzz/lsan.supp).
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1"
symbolizer=$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer-15 || command -v llvm-symbolizer || true)
[[ -n $symbolizer ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer

if ((per_test)); then
  ctest --test-dir "$build" --output-on-failure -j"$jobs" -LE gpu
  echo "asan-check ($preset): build $((built - start)) s, tests $((SECONDS - built)) s"
  exit 0
fi

# The GoogleTest binaries are the commands of the tests that carry none of
# the other labels.
mapfile -t binaries < <(ctest --test-dir "$build" -N -V -LE 'gpu|cli|python|fuzz' |
                        sed -n 's/^[0-9]*: Test command: \([^ ]*\).*/\1/p' | sort -u)
((${#binaries[@]} > 0)) || { echo "asan-check: found no GoogleTest binary in $build" >&2; exit 1; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for b in "${binaries[@]}"; do  # a handful: all at once
  "$b" --gtest_brief=1 >"$logs/$(basename "$b").log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!binaries[@]}"; do
  name=$(basename "${binaries[$i]}")
  if wait "${pids[$i]}"; then
    echo "asan-check: $name: $(grep -E '^\[  PASSED  \]' "$logs/$name.log" || echo passed)"
  else
    echo "asan-check: $name FAILED; its output:"
    cat "$logs/$name.log"
    failed=1
  fi
done
ctest --test-dir "$build" --output-on-failure -j"$jobs" -L 'cli|python|fuzz' -LE gpu || failed=1
echo "asan-check ($preset): build $((built - start)) s, tests $((SECONDS - built)) s"
exit $failed
