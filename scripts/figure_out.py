"""What the issue 7 figure scripts (plot_attention_versions.py,
plot_one_row_steps.py, plot_one_row_timeline.py, plot_ab_*.py, ...) share:
their main() (run_figure: the --out and --force arguments, the refusal to
replace an existing file silently, input errors by name, matplotlib without
a display, an atomic save) and the readers of the ab.json files that
scripts/bench_ab.py writes.
"""
import argparse
import json
import os
import sys

FIGURES = os.path.join(os.path.dirname(__file__), "..", "docs", "figures")
# The raw data of issue 7's versions and experiments, which most figures draw.
VERSIONS_DIR = os.path.join(os.path.dirname(__file__), "..", "docs", "bench", "issue7-versions")


class FigureInputError(Exception):
    """A data file a figure needs is missing or malformed (the scripts exit 2)."""


def read_ab_runs(path):
    """{benchmark: (side a's per-process times, side b's)} of one ab.json."""
    try:
        with open(path) as f:
            rows = json.load(f)["benchmarks"]
        return {row["benchmark"]: (row["a"]["runs"], row["b"]["runs"]) for row in rows}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FigureInputError(f"cannot read {path}: {e}")


def read_ab_medians(path):
    """{benchmark: (side a's median, side b's median, change %)} of one ab.json, in its order."""
    try:
        with open(path) as f:
            rows = json.load(f)["benchmarks"]
        return {r["benchmark"]: (float(r["a"]["median"]), float(r["b"]["median"]), float(r["change_pct"]))
                for r in rows}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FigureInputError(f"cannot read {path}: {e}")


def parse_figure_args(doc, default_name):
    """Arguments of a figure script whose help text is `doc`; returns them,
    with args.out defaulting to docs/figures/<default_name>."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(FIGURES, default_name))
    ap.add_argument("--force", action="store_true", help="replace an existing output file")
    return ap.parse_args()


def refuses_to_replace(args, prog):
    """True (after saying why) when args.out exists and --force was not given."""
    if os.path.exists(args.out) and not args.force:
        print(f"{prog}: {args.out} exists (pass --force to replace it)", file=sys.stderr)
        return True
    return False


def save_figure(fig, out, dpi=110):
    """Writes fig to out through a temporary file: a reader never sees half a figure. An
    output that cannot be written (a missing folder, no permission) ends the script with a
    message naming it and exit status 2."""
    tmp = out + ".tmp.png"
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, out)
    except OSError as e:
        print(f"{os.path.basename(sys.argv[0])}: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        raise SystemExit(2)
    print(f"wrote {out}")


def phase_bars(plt, data, phases, colors, title, figsize=(10, 3.2), label_size=None):
    """A horizontal bar per (label, ends) in data, stacked from 0 in the phases' colours, each
    phase ending at its entry of ends (microseconds), the total written after the bar; prints
    each row's phases (its label's first line) and returns the figure."""
    fig, ax = plt.subplots(figsize=figsize)
    for row, (label, ends) in enumerate(data):
        start, parts = 0.0, []
        for k, (phase, end) in enumerate(zip(phases, ends)):
            ax.barh(row, end - start, left=start, color=colors[k], edgecolor="white",
                    label=phase if row == 0 else None)
            parts.append(f"{phase} {end - start:.2f}")
            start = end
        ax.text(start + 0.05, row, f"{start:.2f} us", va="center", fontsize=8)
        print(f"{label.splitlines()[0]}: " + ", ".join(parts) + f"; period {start:.2f} us")
    ax.set_yticks(range(len(data)))
    ax.set_yticklabels([label for label, _ in data], fontsize=label_size)
    ax.invert_yaxis()
    ax.set_xlim(0, max(ends[-1] for _, ends in data) + 0.9)
    ax.set_xlabel("us after the launch's first block is released by griddepcontrol.wait (median block)")
    ax.set_title(title, fontsize=9)
    ax.legend(ncol=4 if len(phases) > 6 else 3, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3),
              frameon=False)
    fig.tight_layout()
    return fig


def run_figure(doc, default_name, load, draw, errors=(FigureInputError,)):
    """The main() of a figure script whose help text is `doc`: load() reads the data (an
    exception in `errors` is reported with the script's name, exit 2), draw(plt, data) returns
    the figure, which goes to --out (default docs/figures/<default_name>) unless that exists
    and --force was not given (exit 2). Returns the exit status."""
    prog = os.path.basename(sys.argv[0])
    args = parse_figure_args(doc, default_name)
    if refuses_to_replace(args, prog):
        return 2
    try:
        data = load()
    except errors as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    save_figure(draw(plt, data), args.out)
    return 0
