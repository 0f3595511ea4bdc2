#!/usr/bin/env bash
# End-to-end checks of the `qsa` binary: exit codes (0 pass, 1 differences,
# 2 usage/input/I/O error) and the messages users see.
# Usage: cli_test.sh CASE QSA_BIN SOURCE_DIR PYTHON
set -uo pipefail
case_name=$1 qsa=$2 src=$3 python=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# expect CODE REGEX CMD...: runs CMD, requires exit CODE and output matching REGEX.
expect() {
  local want=$1 pattern=$2
  shift 2
  local out code
  out=$("$@" 2>&1)
  code=$?
  if [[ $code -ne $want ]]; then
    printf 'FAIL: expected exit %s, got %s from: %s\n%s\n' "$want" "$code" "$*" "$out"
    exit 1
  fi
  if ! grep -Eq -- "$pattern" <<<"$out"; then
    printf 'FAIL: output of "%s" does not match /%s/:\n%s\n' "$*" "$pattern" "$out"
    exit 1
  fi
  echo "ok: exit $code, /$pattern/ from: $*"
}

# expect_figure SCRIPT NAME REGEX: scripts/SCRIPT --out $work/NAME exits 0 with
# output matching REGEX, and a second run refuses to replace NAME (exit 2).
expect_figure() {
  local script=$src/scripts/$1 out=$work/$2
  expect 0 "$3" "$python" "$script" --out "$out"
  expect 2 'exists' "$python" "$script" --out "$out"
}

case $case_name in
  replay_bundled)
    for t in tiny-synthetic tiny-fp8 hf-bf16 hf-fp32 hf-fp32-mrope-r8; do
      for mode in isolated chained; do
        expect 0 ' 0 failed' "$qsa" replay "$src/data/$t.h5" --mode "$mode" --color never
      done
    done
    # Negative control: the storage points alone do not reproduce transformers'
    # bf16 eager rounding (spec section 11), and replay must say so.
    expect 1 'attn .*FAIL' "$qsa" replay "$src/data/hf-bf16.h5" --mode chained --profile engine --color never ;;
  replay_json_and_html)
    expect 0 '"tensors"' "$qsa" replay "$src/data/tiny-synthetic.h5" --json
    expect 0 '0 failed' "$qsa" replay "$src/data/tiny-synthetic.h5" --report "$work/r.html" --color never
    grep -q '<table' "$work/r.html" || { echo "FAIL: no table in the HTML report"; exit 1; }
    expect 2 'exists' "$qsa" replay "$src/data/tiny-synthetic.h5" --report "$work/r.html"
    expect 0 '0 failed' "$qsa" replay "$src/data/tiny-synthetic.h5" --report "$work/r.html" --force ;;
  replay_detects_difference)
    cp "$src/data/tiny-synthetic.h5" "$work/t.h5"
    "$python" - "$work/t.h5" <<'PY' || exit 1
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    d = f["steps/000002/outputs/out"]
    x = d[...]
    x[0, 5] += 1.0
    del f["steps/000002/outputs/out"]
    f.create_dataset("steps/000002/outputs/out", data=x.astype(np.float64))
PY
    expect 1 'repro: qsa replay .* --step 2 --stage out' "$qsa" replay "$work/t.h5" --mode chained --color never
    expect 1 'row=0, dim=5' "$qsa" replay "$work/t.h5" --color never ;;
  bad_input)
    expect 2 'reproduce with' "$qsa" replay "$work/missing.h5"
    expect 2 'README.md' "$qsa" replay "$src/README.md"
    cp "$src/data/tiny-synthetic.h5" "$work/cut.h5"
    truncate -s 100000 "$work/cut.h5"
    expect 2 'cut.h5' "$qsa" replay "$work/cut.h5"
    expect 2 'mode' "$qsa" replay "$src/data/tiny-synthetic.h5" --mode bogus
    expect 2 'indexer_budget' "$qsa" example --budget 7
    expect 2 'step 99' "$qsa" replay "$src/data/tiny-synthetic.h5" --step 99
    expect 2 'without a GPU backend' "$qsa" replay "$src/data/tiny-synthetic.h5" --backend hip
    expect 2 'reference, hip, both|backend' "$qsa" replay "$src/data/tiny-synthetic.h5" --backend bogus
    expect 2 'chained' "$qsa" replay "$src/data/tiny-synthetic.h5" --backend both --mode isolated
    expect 2 'unknown' "$qsa" example --kv-dtype fp4
    expect 2 'max-memory|limit' "$qsa" replay "$src/data/hf-fp32.h5" --max-memory 0.0001 ;;
  adversarial)
    # Hostile traces (docs/robustness.md): exit 2 and a message naming the
    # problem, whatever the file claims. tests/harness/adversarial_trace_test.cpp
    # has every category; these check what a user of the binary sees.
    "$python" - "$src/data/tiny-synthetic.h5" "$work" <<'PY' || exit 1
import shutil, sys, h5py, numpy as np
src, work = sys.argv[1], sys.argv[2]
def variant(name, edit):
    path = f"{work}/{name}.h5"
    shutil.copy(src, path)
    with h5py.File(path, "r+") as f:
        edit(f)
def replace(f, name, data):
    del f[name]
    f.create_dataset(name, data=data)
def huge(f):  # a header claiming 64 Ti elements, never written: the file stays small
    del f["steps/000000/hidden"]
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((1024, 64))
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    space = h5py.h5s.create_simple((10**12, 64))
    h5py.h5d.create(f["steps/000000"].id, b"hidden", h5py.h5t.IEEE_F64LE, space, dcpl=dcpl)
def table(value):
    def edit(f):
        t = f["steps/000000/block_table"][...]
        t[0, 0] = value
        replace(f, "steps/000000/block_table", t)
    return edit
def nan(f):
    h = f["steps/000003/hidden"][...].astype(np.float32)
    h[1, 2] = np.nan
    replace(f, "steps/000003/hidden", h)
def strings(f):
    shape = f["steps/000000/hidden"].shape
    del f["steps/000000/hidden"]
    f.create_dataset("steps/000000/hidden", data=np.full(shape, "0.5", dtype=object), dtype=h5py.string_dtype())
def first_step_dropped(f):  # later steps read a cache the first one wrote
    n = f["steps"].attrs["num_steps"]
    del f["steps/000000"]
    for i in range(1, n):
        f.move(f"steps/{i:06d}", f"steps/{i - 1:06d}")
    f["steps"].attrs["num_steps"] = np.int64(n - 1)
def cycle(f):
    f["steps/000000/outputs/loop"] = f["/"]
variant("huge", huge)
variant("negative-page", table(-7))
variant("page-past-cache", table(9999))
variant("nan", nan)
variant("strings", strings)
variant("first-step-dropped", first_step_dropped)
variant("cycle", cycle)
PY
    size=$(stat -c %s "$work/huge.h5")
    ((size < 2000000)) || { echo "FAIL: huge.h5 is $size bytes: the claim was written out"; exit 1; }
    expect 2 'hidden has shape \[1000000000000, 64\].*memory limit of 1099511627776 bytes' \
      "$qsa" replay "$work/huge.h5" --max-memory 1024
    expect 2 'block_table\[0, 0\] = -7 is out of range' "$qsa" inspect "$work/negative-page.h5"
    expect 2 'block_table\[0, 0\] = 9999 is out of range \(cache has' "$qsa" replay "$work/page-past-cache.h5"
    expect 2 'step 3 .*hidden\[1, 2\] is NaN' "$qsa" replay "$work/nan.h5"
    expect 2 'hidden has dtype string, expected floats' "$qsa" inspect "$work/strings.h5"
    expect 2 'never written' "$qsa" replay "$work/first-step-dropped.h5" --mode chained
    expect 2 'outputs/loop is a hard link back to /: the groups form a cycle' "$qsa" inspect "$work/cycle.h5"
    # Each of these crashed or hung HDF5 1.10's own string reader.
    for f in "$src"/tests/fuzz/regressions/heap-*.h5; do
      expect 2 'corrupt variable-length string' "$qsa" inspect "$f"
    done
    # HDF5 1.10 itself dies on these (SIGSEGV; under ASan, a report): the
    # child that decodes a trace first turns that into exit 2, for every
    # command that reads traces.
    for f in "$src"/tests/fuzz/hdf5-known/*-segfaults.h5; do
      expect 2 'crashed HDF5: a child process that read it first' "$qsa" inspect "$f"
      expect 2 'crashed HDF5' "$qsa" replay "$f"
      # The sweep skips recorded outputs, so HDF5 may fail here instead of crashing.
      expect 2 "error: '$f'" "$qsa" sweep "$f" -o "$work/sweep-of-crash" --budgets 64
      [[ -z $(compgen -G "$work/sweep-of-crash*") ]] || { echo "FAIL: a sweep of a crashing file wrote output"; exit 1; }
    done ;;
  gen_inspect)
    expect 0 'wrote' "$qsa" gen -o "$work/g.h5" --prompts 20,9 --chunk 7 --decode 1 --mtp-drafts 2
    expect 2 'exists' "$qsa" gen -o "$work/g.h5"
    expect 0 '"num_steps"' "$qsa" inspect "$work/g.h5" --json
    expect 0 'MTP draft 1' "$qsa" inspect "$work/g.h5"
    expect 0 'R=4' "$qsa" inspect "$work/g.h5" --selections --tile-rows 4,8
    expect 0 '"useful"' "$qsa" inspect "$work/g.h5" --selections --json
    expect 2 'tile-rows: Value 0 not in range' "$qsa" inspect "$work/g.h5" --selections --tile-rows 0
    expect 2 'tile-rows requires --selections' "$qsa" inspect "$work/g.h5" --tile-rows 4
    expect 0 ' 0 failed' "$qsa" replay "$work/g.h5" --color never
    expect 0 'not recorded' "$qsa" gen -o "$work/i.h5" --inputs-only --prompts 12
    expect 0 'inputs only' "$qsa" inspect "$work/i.h5"
    expect 0 'no step recorded token_idx or block_ids' "$qsa" inspect "$work/i.h5" --selections ;;
  example)
    expect 0 'done: 7 steps' "$qsa" example --quiet
    expect 0 'MTP reuse' "$qsa" example --quiet --profile exact --indexer-dtype fp8 --kv-dtype fp8 ;;
  sweep)
    # A killed sweep resumed with the same arguments ends with the same bytes
    # as an uninterrupted one; other arguments are refused.
    t="$src/data/tiny-synthetic.h5"
    args=(--budgets 8,16,32 --ratios 2,4 --indexer-dtypes bf16,fp8 --kv-dtypes bf16,fp8 --rows every:5)
    expect 0 'wrote .*4 points \(4 computed' "$qsa" sweep "$t" -o "$work/full" "${args[@]}"
    head -1 "$work/full.csv" | grep -q '^trace,policy,ratio,budget,kv_dtype,indexer_dtype,metric,bucket,n,mean' ||
      { echo "FAIL: unexpected CSV header"; exit 1; }
    "$qsa" sweep "$t" -o "$work/cut" "${args[@]}" --point-delay-ms 2000 >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 300); do
      compgen -G "$work/cut.parts/t0-*.csv" >/dev/null && break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    compgen -G "$work/cut.parts/t0-*.csv" >/dev/null || { echo "FAIL: no part within 30 s"; exit 1; }
    [[ ! -e "$work/cut.csv" ]] || { echo "FAIL: the sweep finished before it was killed"; exit 1; }
    expect 0 '[1-3] from an earlier run' "$qsa" sweep "$t" -o "$work/cut" "${args[@]}"
    cmp "$work/full.csv" "$work/cut.csv" || { echo "FAIL: the resumed sweep differs"; exit 1; }
    echo "ok: the resumed sweep's CSV equals the uninterrupted one"
    expect 2 'holds another sweep \(budgets was 8,16,32, now 8' "$qsa" sweep "$t" -o "$work/cut" --budgets 8 --ratios 2,4
    rm -r "$work/cut.parts"
    expect 2 'cut.csv. exists' "$qsa" sweep "$t" -o "$work/cut" "${args[@]}"
    expect 2 'unknown KV dtype' "$qsa" sweep "$t" -o "$work/x" --kv-dtypes fp4
    expect 2 'head_dim 32' "$qsa" sweep "$t" -o "$work/x" --kv-dtypes octave_k3v4
    expect 2 'budget 0' "$qsa" sweep "$t" -o "$work/x" --budgets 0
    "$python" -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["aggregates"] and d["settings"]["seed"]' \
      "$work/full.json" || { echo "FAIL: OUT.json"; exit 1; }
    # The top-k measurement build's patcher instruments a copy of the sources once,
    # and refuses by name a tree whose code has moved (the second run), writing nothing.
    for f in gpu/select/select_topk.hpp gpu/select/select.hip harness/bench/gpu/gpu_main.cpp; do
      mkdir -p "$work/stamps/$(dirname "$f")" && cp "$src/$f" "$work/stamps/$f"
    done
    expect 0 'instrumented 3 files' "$python" "$src/scripts/topk_stamps.py" "$work/stamps"
    cp "$work/stamps/gpu/select/select_topk.hpp" "$work/stamped.hpp"
    expect 2 'select.hip: no line' "$python" "$src/scripts/topk_stamps.py" "$work/stamps"
    cmp -s "$work/stamps/gpu/select/select_topk.hpp" "$work/stamped.hpp" ||
      { echo "FAIL: a refused topk_stamps.py run wrote a file"; exit 1; }
    # The spread kernel's stamps summary reproduces the numbers performance.md quotes, and
    # refuses a file that is not stamps by name.
    for pattern in 'slots, copies issued +median block +1[.]60' 'barrier: last arrival 4[.]67' 'period 9[.]02 us'; do
      expect 0 "$pattern" "$python" "$src/scripts/spread_stamps.py" \
        "$src/docs/bench/issue7-versions/h200-2026-12-02-spread-stamps-pad.jsonl.gz"
    done
    # The twenty-sixth pass's builds stamp more points, named by a block's length; a point the
    # build never stamps (this one's sigmoids) is not printed.
    d8_stamps=$src/docs/bench/issue7-versions/h200-2026-12-02-spread-stamps-d8a59f2.jsonl.gz
    for pattern in 'request and count +median block +0[.]61' 'PV results +median block +3[.]62' 'period 8[.]22 us'; do
      expect 0 "$pattern" "$python" "$src/scripts/spread_stamps.py" "$d8_stamps"
    done
    if "$python" "$src/scripts/spread_stamps.py" "$d8_stamps" | grep -q sigmoids; then
      echo "FAIL: spread_stamps.py printed a point the d8a59f2 build never stamps (sigmoids)"
      exit 1
    fi
    # The twenty-seventh pass's stopped runs: eb11439 resolves its slots 0.15 us before 849972c;
    # the twenty-eighth pass's f16 partials and arrival masks; the twenty-ninth pass's variants.
    for pair in 'eb11439-v1:slots resolved +median block +1[.]10' 'eb11439-v1:period 4[.]90 us' \
                '849972c-v1:slots resolved +median block +1[.]25' \
                'c5a02f1:partials stored +median block +4[.]16' 'c5a02f1:barrier passed +median block +5[.]47' \
                'arrival-masks:sums +median block +6[.]93' 'arrival-masks:outputs stored +median block +7[.]28' \
                'v0:request and count +median block +0[.]96' 'v8-slots:request and count +median block +0[.]38' \
                'v4-touch-two-per-sm:request and count +median block +1[.]18' \
                'v7-cluster16:attention done +median block +8[.]29'; do
      expect 0 "${pair#*:}" "$python" "$src/scripts/spread_stamps.py" \
        "$src/docs/bench/issue7-versions/h200-2026-12-03-spread-stamps-${pair%%:*}.jsonl.gz"
    done
    # The thirty-sixth pass: stamped at its load, the count lands 0.10 us after the wait; a
    # diagnostic run's slot-chain points are told from the later points they replace and named.
    v36=$src/docs/bench/issue7-versions/h200-2026-12-04-spread-stamps
    expect 0 'request and count +median block +0[.]10' "$python" "$src/scripts/spread_stamps.py" "$v36-b3450f9-early-count.jsonl.gz"
    for pattern in 'Q copies issued +median block +0[.]42' 'slots stored +median block +0[.]64' 'period 6[.]34 us'; do
      expect 0 "$pattern" "$python" "$src/scripts/spread_stamps.py" "$v36-df961a1-chain.jsonl.gz"
    done
    expect 0 'PV results +median block +2[.]35' "$python" "$src/scripts/spread_stamps.py" "$v36-df961a1.jsonl.gz"
    if "$python" "$src/scripts/spread_stamps.py" "$v36-df961a1.jsonl.gz" | grep -q 'Q copies issued'; then
      echo "FAIL: spread_stamps.py named a plain run's points as the slot chain's"
      exit 1
    fi
    # The thirty-eighth pass: with the partials' addresses computed before the wait, the median
    # block stores its partials 0.16 us sooner and the barrier's last arrival comes 0.16 us sooner.
    expect 0 'partials stored +median block +2[.]94' "$python" "$src/scripts/spread_stamps.py" "$v36-7866012.jsonl.gz"
    for pattern in 'partials stored +median block +2[.]78' 'last arrival 3[.]26, first release 3[.]87'; do
      expect 0 "$pattern" "$python" "$src/scripts/spread_stamps.py" "$v36-fe1c764.jsonl.gz"
    done
    echo '{"seq": 1, "blocks": [[1, 2]]}' > "$work/stamps.jsonl"
    expect 2 'stamps.jsonl: launch 1: a block of 2 values' "$python" "$src/scripts/spread_stamps.py" "$work/stamps.jsonl"
    # The benchmark table shows the host's enqueue time per launch next to the median.
    expect 0 'b1/ctx32768/bf16 +10[.]9 .* 8[.]1$' "$python" "$src/scripts/compare_bench.py" \
      "$src/docs/bench/h200-2026-11-30-issue7-bcaa15f.json" --filter 'attention/decode/b1/ctx32768/bf16'
    if "$python" -c 'import matplotlib' 2>/dev/null; then
      expect 0 'wrote' "$python" "$src/scripts/plot_sweep.py" "$work/full.csv" -o "$work/figs"
      expect 2 'exists' "$python" "$src/scripts/plot_sweep.py" "$work/full.csv" -o "$work/figs"
      expect_figure plot_attention_versions.py versions.png 'wrote'
      expect_figure plot_one_row_steps.py steps.png 'bf16: 13[.]1'
      expect_figure plot_one_row_timeline.py timeline.png 'after .bcaa15f.: .*total 12[.]76 us'
      expect_figure plot_ab_machines.py machines.png 'call 11: .* median 49[.]28 us over 6 processes'
      expect_figure plot_ab_changes.py changes.png 'call 2: attention/decode/b256/ctx32768/fp8: 1ac718b median 192[.]13 us, a31dfef.* median 169[.]81 us'
      expect_figure plot_select_batches.py batches.png 'b64/ctx131072/bf16 1ms: 7986523 median 177[.]96 us over 6 processes'
      expect_figure plot_select_mma_versions.py mma.png 'b64/ctx131072/bf16: v1 [+]61[.]2%, .* v4 [+]1[.]5%'
      expect_figure plot_select_order.py order.png 'a prepare benchmark first, 230e808: 166[.]9-168[.]1 us over 9 processes'
      expect_figure plot_topk_phases.py topk.png '2bf7300: float compare in the gather: .*gather 12222, .*total 40769 cycles'
      expect_figure plot_row_hist.py rowhist.png 'the scorer.s first block ends 33[.]0 us before its last'
      expect_figure plot_score_stores.py stores.png 'back within 2% of 124[.]0 us at 57[.]7 ms'
      expect_figure plot_prefill_reuse.py reuse.png '1e59054 .*: 512 rows cross the decode kernel at reuse 1[.]42'
      expect_figure plot_one_row_phases.py phases.png 'ctx 32768: cluster kernel attention: .* 4[.]98, .*; total 10[.]38 us'
      expect_figure plot_spread_stamps.py spreadstamps.png 'd8a59f2: slot chain 1[.]40, .*partials stored 0[.]42, .*period 8[.]22 us'
      expect_figure plot_cluster_phases.py clusterphases.png 'cluster of 16 blocks per pair: slots 0[.]70, .*cluster[)] 0[.]72, .*period 9[.]44 us'
      expect_figure plot_one_row_phases.py phases2.png 'ctx 32768: spread kernel attention: .* 5[.]51, .*barrier 0[.]81, .*; total 9[.]14 us'
      # An output that cannot be written is refused by name, not a traceback.
      expect 2 'cannot write .*no-such-dir' "$python" "$src/scripts/plot_topk_phases.py" --out "$work/no-such-dir/topk.png"
    else
      echo "skip: no matplotlib for scripts/plot_sweep.py (scripts/setup.sh --plots)"
    fi ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
