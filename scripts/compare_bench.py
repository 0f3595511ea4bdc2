#!/usr/bin/env python3
"""One table of qsa_bench_gpu's results against the baselines of scripts/bench_baselines.py.

Per kernel and shape: our median, the floor (the cost model's bytes over the copy bandwidth
measured in the same run, FLOPs over the matrix rate: both from qsa_bench_gpu's counters, never
recomputed here), the percentage of that ceiling, the achieved GB/s and its percentage of the
copy bandwidth, the host's time to enqueue one launch (counter host_us; "-" in JSON from before
it existed: where it nears our median, the host sets the time), and for each baseline its median
and the ratio baseline / ours (> 1: ours is faster). Baselines match by name: baseline_<impl>/<kernel>/<shape>/<dtype> against
<kernel>/<shape>/<dtype>.

Usage:
  python3 scripts/compare_bench.py bench-gpu.json [bench-baselines.json] [--filter REGEX] [--markdown]
"""

import argparse
import json
import re
import sys


# Google Benchmark appends its run settings to a name ("/iterations:20/manual_time").
_SETTINGS = re.compile(r"/(?:iterations|repeats|min_time|min_warmup_time|threads):[^/]*|/(?:manual|real|process)_time")


def base_name(name):
    return _SETTINGS.sub("", name)


def load(path):
    """Context and {base name: run}; with --benchmark_repetitions the run whose median is the
    median of the repetitions' medians."""
    with open(path) as f:
        data = json.load(f)
    reps = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue  # aggregates: the repetitions themselves carry the medians
        reps.setdefault(base_name(b["name"]), []).append(b)
    runs = {}
    for name, bs in reps.items():
        ok = [b for b in bs if median_us(b) is not None]
        runs[name] = sorted(ok, key=median_us)[len(ok) // 2] if ok else bs[0]
    return data.get("context", {}), runs


def median_us(b):
    if b.get("error_occurred"):
        return None
    if "median_us" in b:
        return float(b["median_us"])
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
    return float(b["real_time"]) * scale


def fmt(x, digits=1):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def build_rows(ours, baselines, pattern):
    impls = sorted({name.split("/", 1)[0][len("baseline_"):] for name in baselines})
    by_key = {}
    for name, b in baselines.items():
        impl, key = name.split("/", 1)
        by_key.setdefault(key, {})[impl[len("baseline_"):]] = b
    rows = []
    for name, b in ours.items():
        if pattern and not re.search(pattern, name):
            continue
        ours_us = median_us(b)
        row = {"name": name, "ours": ours_us, "floor": b.get("floor_us"), "pct_ceiling": b.get("pct_of_ceiling"),
               "GBps": b.get("GBps"), "pct_copy": b.get("pct_copy_bw"), "host": b.get("host_us"),
               "error": b.get("error_message"),
               "base": {}}
        for impl in impls:
            other = by_key.get(name, {}).get(impl)
            other_us = median_us(other) if other else None
            ratio = other_us / ours_us if other_us and ours_us else None
            row["base"][impl] = (other_us, ratio, other.get("error_message") if other else None)
        rows.append(row)
    return impls, rows


def header_lines(ctx_ours, ctx_base):
    lines = [f"ours: {ctx_ours.get('qsa_gpu', '?')}, commit {ctx_ours.get('qsa_commit', '?')}, "
             f"{ctx_ours.get('date', '?')}; copy bandwidth at start-up {ctx_ours.get('qsa_copy_GBps_startup', '?')} GB/s "
             f"(counters use the copy/d2d/1GiB result when it ran); matrix rate {ctx_ours.get('qsa_matrix_TFLOPps', '?')} "
             f"TFLOP/s: {ctx_ours.get('qsa_matrix_source', '?')}"]
    if ctx_base:
        lines.append(f"baselines: {ctx_base.get('qsa_gpu', '?')}, commit {ctx_base.get('qsa_commit', '?')}, "
                     f"{ctx_base.get('date', '?')}; torch {ctx_base.get('torch', '?')}, triton "
                     f"{ctx_base.get('triton', '?')}; torch copy bandwidth {ctx_base.get('qsa_copy_GBps_torch', '?')} GB/s")
    return lines


def table(impls, rows):
    head = ["benchmark", "ours us", "floor us", "% ceiling", "GB/s", "% copy", "host us"]
    for impl in impls:
        head += [f"{impl} us", f"{impl}/ours"]
    body = []
    for r in rows:
        line = [r["name"], fmt(r["ours"]) if r["ours"] is not None else "ERROR", fmt(r["floor"]),
                fmt(r["pct_ceiling"]), fmt(r["GBps"], 0), fmt(r["pct_copy"]), fmt(r["host"])]
        for impl in impls:
            us, ratio, err = r["base"][impl]
            line += [fmt(us) if us is not None else ("ERROR" if err else "-"), fmt(ratio, 2)]
        body.append(line)
    return head, body


def print_text(head, body, out):
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body)] if body else [len(h) for h in head]
    for line in [head] + body:
        cells = [str(c).ljust(widths[0]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(line)]
        print("  ".join(cells), file=out)


def print_markdown(head, body, out):
    print("| " + " | ".join(head) + " |", file=out)
    print("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|", file=out)
    for line in body:
        print("| " + " | ".join(f"`{c}`" if i == 0 else str(c) for i, c in enumerate(line)) + " |", file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ours", help="qsa_bench_gpu --benchmark_out JSON")
    ap.add_argument("baselines", nargs="?", help="scripts/bench_baselines.py JSON")
    ap.add_argument("--filter", help="regex on our benchmark names")
    ap.add_argument("--markdown", action="store_true", help="a markdown table (for docs/performance.md)")
    args = ap.parse_args()
    ctx_ours, ours = load(args.ours)
    ctx_base, baselines = load(args.baselines) if args.baselines else ({}, {})
    impls, rows = build_rows(ours, baselines, args.filter)
    for line in header_lines(ctx_ours, ctx_base):
        print(("> " if args.markdown else "") + line)
    print()
    head, body = table(impls, rows)
    (print_markdown if args.markdown else print_text)(head, body, sys.stdout)
    errors = [r for r in rows if r["error"]]
    for r in errors:
        print(f"ERROR {r['name']}: {r['error']}")
    for r in rows:
        for impl, (_, _, err) in r["base"].items():
            if err:
                print(f"baseline {impl} {r['name']}: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
