#!/usr/bin/env python3
"""Figures from a `qsa sweep` CSV (docs/accuracy.md).

For each trace in the CSV, three PNGs in the output folder (over all scored
rows, or one position bucket with --bucket):
  recall-<trace>.png   mass recall (mean, with the p5-p95 band) against the
                       budget, one panel per ratio, one line per policy;
                       other indexer dtypes add "indexer (<dtype>)" lines
  heatmap-<trace>.png  the indexer's mean mass recall over budget x ratio,
                       one panel per indexer dtype
  errors-<trace>.png   relative L2 error of the layer output by KV dtype at
                       one (ratio, budget): the KV dtype alone, sparsity
                       alone, and both

Needs Debian's python3-matplotlib (scripts/setup.sh --plots); run it with
/usr/bin/python3. Files are written to a temporary name and renamed, and an
existing file is replaced only with --force. Exit 0 on success, 2 on bad
input or an existing output.

  /usr/bin/python3 scripts/plot_sweep.py sweep.csv -o docs/figures
  /usr/bin/python3 scripts/plot_sweep.py sweep.csv -o figs --ratio 4 --budget 32 --force
"""
import argparse
import csv
import math
import os
import re
import sys

POLICY_STYLE = {  # colour, marker, line style
    "indexer": ("tab:blue", "o", "-"),
    "oracle_max": ("tab:green", "^", "--"),
    "oracle_sum": ("tab:olive", "v", ":"),
    "window": ("tab:orange", "s", "-."),
    "random": ("tab:gray", "x", (0, (1, 2))),
}
BANDS = ("indexer", "oracle_sum")  # more bands than this hide the lines
EXTRA_INDEXER_COLOURS = ["tab:purple", "tab:red", "tab:brown"]


class InputError(Exception):
    pass


def load(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise InputError(f"cannot read '{path}': {e.strerror}")
    need = {"trace", "policy", "ratio", "budget", "kv_dtype", "indexer_dtype", "metric", "bucket", "mean", "p5", "p95"}
    if not rows or not need <= set(rows[0]):
        raise InputError(f"'{path}' is not a qsa sweep CSV (needs the columns {', '.join(sorted(need))})")
    for r in rows:
        r["ratio"], r["budget"] = int(r["ratio"]), int(r["budget"])
        for k in ("mean", "median", "p5", "p95", "min", "max"):
            if k in r:
                r[k] = float(r[k])
    return rows


def stem(trace):
    base = os.path.basename(trace)
    base = base[:-3] if base.endswith(".h5") else base
    return re.sub(r"[^A-Za-z0-9_.-]", "_", base)


def pick(rows, **key):
    return [r for r in rows if all(r[k] == v for k, v in key.items())]


def recall_figure(plt, rows, trace, bucket):
    sel = pick(rows, trace=trace, metric="mass_recall", bucket=bucket, kv_dtype="exact")
    if not sel:
        return None
    ratios = sorted({r["ratio"] for r in sel})
    dtypes = sorted({r["indexer_dtype"] for r in sel}, key=lambda d: (d != "bf16", d))
    fig, axes = plt.subplots(1, len(ratios), figsize=(3.2 * len(ratios), 3.2), sharey=True, squeeze=False)
    for ax, ratio in zip(axes[0], ratios):
        lines = [(p, dtypes[0], p) for p in POLICY_STYLE]
        lines += [("indexer", d, f"indexer ({d})") for d in dtypes[1:]]
        for i, (policy, dtype, label) in enumerate(lines):
            pts = sorted(pick(sel, ratio=ratio, policy=policy, indexer_dtype=dtype), key=lambda r: r["budget"])
            if not pts:
                continue
            colour, marker, style = POLICY_STYLE[policy]
            if label != policy:
                colour = EXTRA_INDEXER_COLOURS[(i - len(POLICY_STYLE)) % len(EXTRA_INDEXER_COLOURS)]
                style = (0, (4, 1, 1, 1))
            x = [r["budget"] for r in pts]
            ax.plot(x, [r["mean"] for r in pts], marker=marker, color=colour, ls=style, label=label, lw=1.2, ms=4)
            if label in BANDS:
                ax.fill_between(x, [r["p5"] for r in pts], [r["p95"] for r in pts], color=colour, alpha=0.12, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_title(f"ratio {ratio}")
        ax.set_xlabel("budget K (tokens)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mass recall (mean; p5-p95 bands: " + ", ".join(BANDS) + ")", fontsize=8)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    rows_note = "all scored rows" if bucket == "all" else f"rows in position bucket {bucket}"
    fig.suptitle(f"{trace}: dense attention mass kept ({rows_note})", fontsize=9)
    fig.tight_layout()
    return fig


def heatmap_figure(plt, rows, trace, bucket):
    sel = pick(rows, trace=trace, metric="mass_recall", bucket=bucket, kv_dtype="exact", policy="indexer")
    if not sel:
        return None
    dtypes = sorted({r["indexer_dtype"] for r in sel}, key=lambda d: (d != "bf16", d))
    budgets = sorted({r["budget"] for r in sel})
    ratios = sorted({r["ratio"] for r in sel})
    fig, axes = plt.subplots(1, len(dtypes), figsize=(1.6 + 0.8 * len(budgets) * len(dtypes), 1.4 + 0.45 * len(ratios)),
                             squeeze=False, constrained_layout=True)
    for ax, dtype in zip(axes[0], dtypes):
        grid = [[math.nan] * len(budgets) for _ in ratios]
        for r in pick(sel, indexer_dtype=dtype):
            grid[ratios.index(r["ratio"])][budgets.index(r["budget"])] = r["mean"]
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if not math.isnan(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < 0.6 else "k")
        ax.set_xticks(range(len(budgets)), [str(b) for b in budgets])
        ax.set_yticks(range(len(ratios)), [str(r) for r in ratios])
        ax.set_xlabel("budget K")
        ax.set_ylabel("ratio r")
        ax.set_title(f"indexer ({dtype}) mean mass recall", fontsize=8)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.9)
    fig.suptitle(trace if bucket == "all" else f"{trace} (position bucket {bucket})", fontsize=8)
    return fig


def error_figure(plt, rows, trace, bucket, ratio, budget, policy):
    sel = pick(rows, trace=trace, bucket=bucket)
    if not pick(sel, metric="out_err_kv") or not pick(sel, policy=policy):
        return None
    dtype = sorted({r["indexer_dtype"] for r in sel}, key=lambda d: (d != "bf16", d))[0]
    sel = pick(sel, indexer_dtype=dtype)
    ratios = sorted({r["ratio"] for r in sel})
    if ratio is None:
        ratio = min(ratios, key=lambda r: abs(r - 4))
    budgets = sorted({r["budget"] for r in pick(sel, ratio=ratio, policy=policy)})
    if ratio not in ratios or not budgets:
        raise InputError(f"trace '{trace}' has no points at ratio {ratio} for policy {policy}")
    if budget is None:
        budget = budgets[(len(budgets) - 1) // 2]
    if budget not in budgets:
        raise InputError(f"trace '{trace}' has no budget {budget} at ratio {ratio} (has {budgets})")
    kvs = [r["kv_dtype"] for r in pick(sel, ratio=ratio, policy="dense", metric="out_err_kv")]
    sparsity = pick(sel, ratio=ratio, policy=policy, budget=budget, metric="out_err_sparsity")[0]
    series = [("KV dtype alone", "tab:purple", lambda kv: pick(sel, ratio=ratio, policy="dense", kv_dtype=kv,
                                                                metric="out_err_kv")[0]),
              ("sparsity alone", "tab:blue", lambda kv: sparsity),
              ("both", "tab:red", lambda kv: pick(sel, ratio=ratio, policy=policy, budget=budget, kv_dtype=kv,
                                                  metric="out_err_both")[0])]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(kvs), 3.2))
    width = 0.8 / len(series)
    for i, (label, colour, get) in enumerate(series):
        xs = [k + (i - 1) * width for k in range(len(kvs))]
        vals = [get(kv) for kv in kvs]
        lo = [max(v["mean"] - v["p5"], 0) for v in vals]
        hi = [max(v["p95"] - v["mean"], 0) for v in vals]
        ax.bar(xs, [v["mean"] for v in vals], width, color=colour, label=label, yerr=[lo, hi], capsize=2,
               error_kw={"lw": 0.8})
    ax.set_xticks(range(len(kvs)), kvs)
    ax.set_yscale("log")
    ax.set_ylabel("layer output rel. L2 error (mean, p5-p95)")
    where = "" if bucket == "all" else f", position bucket {bucket}"
    ax.set_title(f"{trace}\n{policy}, ratio {ratio}, budget {budget}{where}", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def save(fig, path, dpi):
    tmp = f"{path}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=dpi)
    os.replace(tmp, path)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="OUT.csv of qsa sweep")
    ap.add_argument("-o", "--output", required=True, help="folder for the PNGs (created if missing)")
    ap.add_argument("--trace", action="append", help="only this trace label (repeatable)")
    ap.add_argument("--ratio", type=int, help="ratio of the error figure (default: the one nearest 4)")
    ap.add_argument("--budget", type=int, help="budget of the error figure (default: the middle one)")
    ap.add_argument("--policy", default="indexer", help="policy of the error figure (default: indexer)")
    ap.add_argument("--bucket", default="all", choices=["all", "q1", "q2", "q3", "q4"],
                    help="rows to plot: all, or a quarter of the requests' final length (default: all)")
    ap.add_argument("--dpi", type=int, default=100)
    ap.add_argument("--force", action="store_true", help="replace existing PNGs")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_sweep.py: error: needs matplotlib: apt-get install python3-matplotlib "
              "(scripts/setup.sh --plots), then run with /usr/bin/python3", file=sys.stderr)
        return 2
    try:
        rows = load(a.csv)
        traces = list(dict.fromkeys(r["trace"] for r in rows))
        for t in a.trace or []:
            if t not in traces:
                raise InputError(f"trace '{t}' is not in '{a.csv}' (it has: {', '.join(traces)})")
        traces = a.trace or traces
        jobs = []
        for t in traces:
            s = stem(t)
            jobs += [(os.path.join(a.output, f"recall-{s}.png"), lambda t=t: recall_figure(plt, rows, t, a.bucket)),
                     (os.path.join(a.output, f"heatmap-{s}.png"), lambda t=t: heatmap_figure(plt, rows, t, a.bucket)),
                     (os.path.join(a.output, f"errors-{s}.png"),
                      lambda t=t: error_figure(plt, rows, t, a.bucket, a.ratio, a.budget, a.policy))]
        existing = [p for p, _ in jobs if os.path.exists(p)]
        if existing and not a.force:
            raise InputError(f"'{existing[0]}' exists; pass --force to replace it")
        os.makedirs(a.output, exist_ok=True)
        for path, make in jobs:
            fig = make()
            if fig is None:
                print(f"skip {path}: the CSV has no rows for it (bucket {a.bucket}, policy {a.policy})")
                continue
            save(fig, path, a.dpi)
            plt.close(fig)
    except InputError as e:
        print(f"plot_sweep.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
