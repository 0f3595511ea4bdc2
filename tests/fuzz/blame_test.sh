#!/usr/bin/env bash
# scripts/fuzz_blame.awk on every report in tests/fuzz/blame/: the verdict must
# be the file name's prefix (hdf5-*.log: HDF5's own bug, fuzzing goes on;
# qsa-*.log: a finding that fails the run).
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
done
((n >= 7)) || { echo "FAIL: only $n reports found under $src/tests/fuzz/blame"; exit 1; }
exit $failed
