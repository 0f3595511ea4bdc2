#!/usr/bin/env python3
"""Times qsa_bench_gpu with neighbouring prefill rows sharing more or less of their
selections (QSA_BENCH_SHARE: docs/performance.md, "Inputs" and "Prefill attention and
neighbouring rows"), one process per share and round, and tabulates every benchmark's median
time, TFLOP/s and share of the matrix rate, share by share, with the prefill plan's reuse
(attended row-id pairs per entry loaded, the axis kAuto decides on) where a benchmark reports it.

Why: with independent selections (share 0, the benchmark's default) no prefill attention
kernel can reach issue 7's target, and how far a kernel that shares K/V between rows gets
depends on how much real rows overlap; `qsa inspect --selections` measures that on a trace.
This sweep gives the kernel's side. Rounds alternate the order of the shares.

Usage:
  python3 scripts/bench_share.py BINARY --filter REGEX [--shares 0,0.9,0.95,0.99]
      [--rounds 1] [--iterations 10] [--out DIR]
e.g. on the H200:
  python3 scripts/bench_share.py build/cuda-bench/harness/bench/qsa_bench_gpu \\
      --filter 'attention/prefill/c8192/ctx32768/bf16/'

Output in DIR ($OUT when set, else build/bench-share/<date>-<time>): share-<s>-r<round>.json
per process, share.md (the table) and share.json; a DIR that already holds results is refused.
Exit status: 0 on success; 2 on bad arguments or existing results; 1 when a process fails or
its JSON does not record the share it ran with (a binary older than QSA_BENCH_SHARE); 77
when the binary found no GPU (NOT RUN).
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

from bench_ab import write_new  # atomic, and never over an existing file
from compare_bench import load, median_us


class InputError(Exception):
    pass


class RunError(Exception):
    pass


def parse_shares(text):
    """'0,0.9,0.95' -> [0.0, 0.9, 0.95] (distinct, each in [0, 1], as QSA_BENCH_SHARE takes them)."""
    shares = []
    for part in text.split(","):
        try:
            s = float(part)
        except ValueError:
            raise InputError(f"--shares: '{part}' is not a number")
        if not (0.0 <= s <= 1.0):
            raise InputError(f"--shares: {part} is outside [0, 1]")
        if s in shares:
            raise InputError(f"--shares: {part} is listed twice")
        shares.append(s)
    return shares


def share_text(s):
    return f"{s:g}"


def result_dir(out):
    path = out or os.environ.get("OUT") or os.path.join("build", "bench-share", time.strftime("%Y%m%d-%H%M%S"))
    if os.path.isdir(path) and any(n.startswith("share") for n in os.listdir(path)):
        raise InputError(f"{path} already holds results (share*); pick another --out")
    os.makedirs(path, exist_ok=True)
    return path


def run_one(binary, pattern, share, iterations, path):
    env = dict(os.environ, QSA_BENCH_SHARE=share_text(share), QSA_BENCH_ITERATIONS=str(iterations))
    cmd = [binary, f"--benchmark_filter={pattern}", f"--benchmark_out={path}", "--benchmark_out_format=json"]
    print(f"== share {share_text(share)}: {' '.join(cmd)}", flush=True)
    rc = subprocess.call(cmd, env=env)
    if rc == 77:
        return False
    if rc != 0:
        raise RunError(f"{binary} exited {rc} at share {share_text(share)}; "
                       f"reproduce with: QSA_BENCH_SHARE={share_text(share)} {' '.join(cmd)}")
    return True


def collect(paths_by_share):
    """{benchmark: {share: (median of the rounds' medians in us, TFLOP/s at it, % of the matrix rate,
    the plan's reuse or None)}}."""
    table = {}
    for share, paths in paths_by_share.items():
        times, flops, matrix, reuse = {}, {}, {}, {}
        for path in paths:
            try:
                ctx, runs = load(path)
            except (OSError, json.JSONDecodeError) as e:
                raise RunError(f"{path}: not a benchmark JSON ({e})")
            recorded = ctx.get("qsa_selection_share")
            if recorded is None or not math.isclose(float(recorded), share, abs_tol=1e-12):
                raise RunError(f"{path}: ran with qsa_selection_share {recorded!r}, not {share_text(share)} "
                               "(a qsa_bench_gpu built before QSA_BENCH_SHARE ignores it)")
            tflops = float(ctx.get("qsa_matrix_TFLOPps", "nan"))
            for name, b in runs.items():
                us = median_us(b)
                if us is None:
                    continue
                times.setdefault(name, []).append(us)
                flops[name] = float(b.get("flops", 0.0))
                matrix[name] = tflops
                if "reuse" in b:  # a property of the inputs (seeded): the same in every round
                    reuse[name] = float(b["reuse"])
        for name, ts in times.items():
            t = statistics.median(ts)
            rate = flops[name] / (t * 1e-6) / 1e12 if flops[name] > 0 else None
            pct = 100.0 * rate / matrix[name] if rate is not None and matrix[name] > 0 else None
            table.setdefault(name, {})[share] = (t, rate, pct, reuse.get(name))
    return table


def cell(entry):
    if entry is None:
        return "-"
    t, rate, pct, reuse = entry
    text = f"{t / 1000:.2f} ms" if t >= 1000 else f"{t:.1f} us"
    if rate is not None:
        text += f", {rate:.0f} TFLOP/s ({pct:.1f}%)"
    if reuse is not None:
        text += f", reuse {reuse:.2f}"
    return text


def markdown(table, shares, rounds):
    lines = [f"Median over {rounds} round(s) per share; TFLOP/s on the kernel's FLOPs (the cost model's), "
             "% of the run's matrix rate; reuse: the prefill plan's attended (row, id) pairs per entry.", "",
             "| benchmark | " + " | ".join(f"share {share_text(s)}" for s in shares) + " |",
             "|---|" + "---:|" * len(shares)]
    for name in sorted(table):
        lines.append(f"| `{name}` | " + " | ".join(cell(table[name].get(s)) for s in shares) + " |")
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--filter", required=True, help="benchmark name regex")
    ap.add_argument("--shares", default="0,0.9,0.95,0.99")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--out")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        shares = parse_shares(args.shares)
        if args.rounds < 1 or args.iterations < 1:
            raise InputError("--rounds and --iterations must be at least 1")
        if not (os.path.isfile(args.binary) and os.access(args.binary, os.X_OK)):
            raise InputError(f"{args.binary} is not an executable file")
        out = result_dir(args.out)
    except InputError as e:
        print(f"bench_share.py: {e}", file=sys.stderr)
        return 2
    paths = {s: [] for s in shares}
    try:
        for r in range(args.rounds):
            for s in (shares if r % 2 == 0 else list(reversed(shares))):
                path = os.path.join(out, f"share-{share_text(s)}-r{r + 1}.json")
                if not run_one(args.binary, args.filter, s, args.iterations, path):
                    print("bench_share.py: no GPU, NOT RUN", file=sys.stderr)
                    return 77
                paths[s].append(path)
        table = collect(paths)
    except RunError as e:
        print(f"bench_share.py: {e}", file=sys.stderr)
        return 1
    text = markdown(table, shares, args.rounds)
    write_new(os.path.join(out, "share.md"), text)
    payload = {name: {share_text(s): {"median_us": v[0], "TFLOPps": v[1], "pct_matrix": v[2], "reuse": v[3]}
                      for s, v in by.items()} for name, by in table.items()}
    write_new(os.path.join(out, "share.json"), json.dumps(payload, indent=1) + "\n")
    print(text, end="")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
