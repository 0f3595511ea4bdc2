#!/usr/bin/env python3
"""Compare two builds of qsa_bench_gpu measured in alternating processes (scripts/bench-ab.sh).

Why alternating processes: at 64 decode rows the attention kernels' times move by several
percent between processes and machines (the K/V pool's allocation, docs/performance.md), so one
process per build cannot judge a change of a few percent. Runs A B A B ... on one machine put
the same conditions on both sides; within a machine the spread of one build is then well under
one percent.

Input: one Google Benchmark JSON per process and side. Output, per benchmark: each side's
median, min and max over its processes, B's median against A's in percent, and the exact
two-sided p-value of the Mann-Whitney rank-sum test: the probability, if the two builds were
the same (every ordering of the 2k runs equally likely), of a rank sum at least as far from its
mean as the one seen. With k processes per side and no ties, the smallest possible p-value is
2 / C(2k, k): 0.029 for 4, 0.0022 for 6. A change is only called when p <= --alpha (default
0.01, so 6 rounds or more are needed) and the medians differ by at least --min-change percent
(default 1): two builds of byte-identical kernels (A/A, 2026-12-01 on the H200) differed by
0.5% at p = 0.009 on one of eight benchmarks, so smaller differences are not taken as real.

Usage:
  python3 scripts/bench_ab.py --a A1.json A2.json ... --b B1.json B2.json ... \
      [--names A B] [--json OUT.json] [--markdown OUT.md] [--alpha 0.01] [--min-change 1]

Exit status: 0 on success; 2 on bad input (unreadable or malformed JSON, a benchmark missing
on one side, fewer than 2 runs per side, an output file that already exists).
"""

import argparse
import json
import math
import os
import statistics
import sys
import tempfile

from compare_bench import base_name  # a name without Google Benchmark's run settings


class InputError(Exception):
    pass


def load_runs(paths, side):
    """{benchmark: [real_time of each process]} of one side, in the order of `paths`."""
    runs = {}
    for path in paths:
        try:
            with open(path) as f:
                data = json.load(f)
        except OSError as e:
            raise InputError(f"side {side}: cannot read {path}: {e.strerror}")
        except json.JSONDecodeError as e:
            raise InputError(f"side {side}: {path} is not JSON ({e.msg} at line {e.lineno})")
        benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
        if not isinstance(benchmarks, list):
            raise InputError(f"side {side}: {path} has no 'benchmarks' list (not Google Benchmark JSON)")
        for b in benchmarks:
            if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
                continue
            t = b.get("real_time")
            if not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
                raise InputError(f"side {side}: {path}: {b.get('name')} has real_time {t!r}")
            runs.setdefault(base_name(b["name"]), []).append(float(t))
    return runs


def mann_whitney_p(a, b):
    """Exact two-sided p-value of the rank-sum test for samples a and b: over every way of
    choosing which len(a) of the pooled values are A's (all equally likely if the builds are the
    same), the share whose rank sum lies at least as far from its mean as A's does. Tied values
    share their mid-rank, so the distribution is the exact one given the ties, counted tie
    group by tie group (the number of A's in each group) instead of by enumeration."""
    m, n = len(a), len(b)
    pooled = sorted(list(a) + list(b))
    groups = []  # (value, size, twice the group's mid-rank)
    start = 0
    while start < len(pooled):
        end = start
        while end < len(pooled) and pooled[end] == pooled[start]:
            end += 1
        groups.append((pooled[start], end - start, start + end + 1))  # 2 · (start + (size + 1) / 2)
        start = end
    ways = {(0, 0): 1}  # (A values placed, twice their rank sum) -> orderings
    for _, size, mid2 in groups:
        nxt = {}
        for (k, s), w in ways.items():
            for j in range(min(size, m - k) + 1):
                key = (k + j, s + j * mid2)
                nxt[key] = nxt.get(key, 0) + w * math.comb(size, j)
        ways = nxt
    twice_mid = {value: mid2 for value, _, mid2 in groups}
    observed = sum(twice_mid[x] for x in a)
    mean = m * (m + n + 1)  # twice the expected rank sum
    extreme = sum(w for (k, s), w in ways.items() if k == m and abs(s - mean) >= abs(observed - mean))
    return extreme / math.comb(m + n, m)


def compare(runs_a, runs_b, alpha, min_change=1.0):
    missing = sorted(set(runs_a) ^ set(runs_b))
    if missing:
        raise InputError("benchmarks measured on one side only: " + ", ".join(missing))
    if not runs_a:
        raise InputError("no benchmark results on either side")
    rows = []
    for name in sorted(runs_a):
        a, b = runs_a[name], runs_b[name]
        if len(a) < 2 or len(b) < 2:
            raise InputError(f"{name}: {len(a)} runs of A and {len(b)} of B; the test needs at least 2 per side")
        ma, mb = statistics.median(a), statistics.median(b)
        p = mann_whitney_p(a, b)
        change = 100.0 * (mb / ma - 1.0)
        called = p <= alpha and abs(change) >= min_change
        rows.append({
            "benchmark": name,
            "a": {"median": ma, "min": min(a), "max": max(a), "runs": a},
            "b": {"median": mb, "min": min(b), "max": max(b), "runs": b},
            "change_pct": change,
            "p_value": p,
            "verdict": ("faster" if mb < ma else "slower") if called else "no detectable change",
        })
    return rows


def markdown(rows, names, alpha, min_change):
    na, nb = names
    lines = [
        f"| benchmark | {na} median [min-max] | {nb} median [min-max] | {nb} vs {na} | p | "
        f"verdict (p <= {alpha}, >= {min_change}%) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        a, b = r["a"], r["b"]
        verdict = r["verdict"] if r["verdict"] == "no detectable change" else f"{nb} {r['verdict']}"
        lines.append(
            f"| `{r['benchmark']}` | {a['median']:.2f} [{a['min']:.2f}-{a['max']:.2f}] | "
            f"{b['median']:.2f} [{b['min']:.2f}-{b['max']:.2f}] | {r['change_pct']:+.1f}% | {r['p_value']:.4f} | "
            f"{verdict} |")
    return "\n".join(lines) + "\n"


def write_new(path, text):
    """Writes text to a new file atomically; an existing file is an error, never overwritten."""
    if os.path.exists(path):
        raise InputError(f"{path} already exists; choose another name or remove it first")
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".bench_ab.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.link(tmp, path)  # fails if the path appeared meanwhile
    finally:
        os.unlink(tmp)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", nargs="+", required=True, metavar="JSON", help="side A's per-process results")
    ap.add_argument("--b", nargs="+", required=True, metavar="JSON", help="side B's per-process results")
    ap.add_argument("--names", nargs=2, default=["A", "B"], metavar=("A", "B"), help="labels of the two sides")
    ap.add_argument("--alpha", type=float, default=0.01, help="p-value at or below which a change is called")
    ap.add_argument("--min-change", type=float, default=1.0,
                    help="smallest difference of the medians, in percent, that is called a change")
    ap.add_argument("--json", help="write the comparison here (a new file)")
    ap.add_argument("--markdown", help="write the table here (a new file)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        if not 0.0 < args.alpha < 1.0:
            raise InputError(f"--alpha {args.alpha} must lie in (0, 1)")
        if not args.min_change >= 0.0:
            raise InputError(f"--min-change {args.min_change} must be >= 0")
        rows = compare(load_runs(args.a, "A"), load_runs(args.b, "B"), args.alpha, args.min_change)
        table = markdown(rows, args.names, args.alpha, args.min_change)
        result = {"names": args.names, "alpha": args.alpha, "min_change_pct": args.min_change,
                  "files": {"a": args.a, "b": args.b}, "benchmarks": rows}
        if args.json:
            write_new(args.json, json.dumps(result, indent=1) + "\n")
        if args.markdown:
            write_new(args.markdown, table)
    except InputError as e:
        print(f"bench_ab.py: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
