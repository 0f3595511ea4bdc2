#!/usr/bin/env bash
# scripts/fuzz_blame.awk on every report in tests/fuzz/blame/: the verdict must
# be the file name's prefix (hdf5-*.log: HDF5's own bug, fuzzing goes on;
# qsa-*.log: a finding that fails the run), and with -v mode=start the line
# where the report starts (what scripts/fuzz.sh prints from): the first line
# that names a sanitizer error, and nothing for a log without one.
# Usage: blame_test.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: blame_test.sh SOURCE_DIR}
failed=0 n=0
for log in "$src"/tests/fuzz/blame/*.log; do
  want=$(basename "$log")
  want=${want%%-*}
  got=$(awk -f "$src/scripts/fuzz_blame.awk" "$log")
  n=$((n + 1))
  if [[ $got != "$want" ]]; then
    echo "FAIL: $log is blamed on '$got', expected '$want'; reproduce: awk -f $src/scripts/fuzz_blame.awk $log"
    failed=1
  else
    echo "ok: $(basename "$log") -> $got"
  fi
  start=$(awk -v mode=start -f "$src/scripts/fuzz_blame.awk" "$log")
  if ! [[ $start =~ ^[1-9][0-9]*$ ]] ||
     ! sed -n "${start}p" "$log" | grep -Eq 'ERROR: |runtime error:|deadly signal' ||
     head -n $((start - 1)) "$log" | grep -Eq 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)'; then
    echo "FAIL: report start '$start' in $log is not its first error line; reproduce: awk -v mode=start -f $src/scripts/fuzz_blame.awk $log"
    failed=1
  fi
done
none=$(printf 'INFO: Seed: 1\nDone 100 runs\n' | awk -v mode=start -f "$src/scripts/fuzz_blame.awk")
[[ -z $none ]] || { echo "FAIL: a log without a report gave start '$none'"; failed=1; }
((n >= 8)) || { echo "FAIL: only $n reports found under $src/tests/fuzz/blame"; exit 1; }
exit $failed
