#!/usr/bin/env python3
"""Summarizes one kernel's per-instruction ncu profile, as exported by

    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > FILE.csv

(the report taken with --section WarpStateStats --section SourceCounters; docs/performance.md,
"How to run"), so that the numbers quoted from a profile can be recomputed from the file kept
next to them (docs/bench/issue7-versions/*-sass.csv.gz). It prints:
  - the warp-stall samples by reason, as shares of all samples;
  - the share of samples in instructions executed less than 1/8 as often as the most executed
    one: code a warp runs once or a few times (prologue, epilogue), not its loop;
  - the instructions grouped by how often they ran, the groups with the most samples first:
    code that runs equally often is usually one piece of the kernel (a loop's body, an
    epilogue, the tasks of one kind), so this says which piece the time goes to, and how many
    instructions it has (docs/performance.md, eighteenth pass);
  - the instructions with the most samples and their top reasons;
  - the excess L2 sectors of global accesses ("L2 Theoretical Sectors Global Excessive") by
    opcode, as shares of all sectors and of the excess.

Usage: scripts/ncu_sass_summary.py FILE.csv[.gz] [--top N] [--groups N]
A missing or malformed file (no header row with "Address", "Source" and the sample column, or a
row with another number of fields, as in a truncated export) is an error naming it (exit 2).
"""
import argparse
import collections
import csv
import gzip
import io
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
EXCESS = "L2 Theoretical Sectors Global Excessive"
SECTORS = "L2 Theoretical Sectors Global"
LOOP_FRACTION = 8  # "runs less than 1/8 as often as the most executed instruction"


class InputError(Exception):
    pass


def number(text):
    text = text.replace(",", "").strip()
    return float(text) if text else 0.0


def read_rows(path):
    """(header, rows) of the export: the kernel-name line first, then the table."""
    try:
        raw = gzip.open(path, "rt") if path.endswith(".gz") else open(path, newline="")
        with raw as f:
            lines = list(csv.reader(io.StringIO(f.read())))
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"cannot read {path}: {e}")
    for k, row in enumerate(lines):
        if "Address" in row and "Source" in row:
            header = row
            missing = [c for c in (SAMPLES, EXECUTED) if c not in header]
            if missing:
                raise InputError(f"{path}: no column {', '.join(repr(c) for c in missing)} "
                                 "(export with --page source --csv --print-source sass from a report with "
                                 "--section WarpStateStats --section SourceCounters)")
            rows = []
            for n, r in enumerate(lines[k + 1:], start=k + 2):
                if not r:
                    continue
                if len(r) != len(header):
                    raise InputError(f"{path}: line {n} has {len(r)} fields where the header has "
                                     f"{len(header)} (a truncated or edited export?)")
                rows.append(r)
            if not rows:
                raise InputError(f"{path}: a header but no instruction rows")
            return header, rows
    raise InputError(f"{path}: no header row with 'Address' and 'Source' (not an ncu source-page CSV)")


def opcode(source):
    """The opcode of a SASS line, predicate and modifiers dropped: '@!P0 BRA 0x..' -> 'BRA'."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def by_count(rows, col, reasons, samples, executed, total, groups):
    """Lines for the `groups` execution counts with the most samples."""
    all_executed = sum(executed) or 1.0
    acc = collections.defaultdict(lambda: [0, 0.0, 0.0, collections.Counter()])
    for r, s, e in zip(rows, samples, executed):
        g = acc[e]
        g[0] += 1
        g[1] += s
        g[2] += e
        for h in reasons:
            v = number(r[col[h]])
            if v:
                g[3][h[len("stall_"):]] += v
    out = [f"instructions by execution count, top {groups} by samples "
           "(count: instructions, share of samples, share of executed instructions, top reasons):"]
    for count, (n, s, e, why) in sorted(acc.items(), key=lambda kv: (-kv[1][1], -kv[0]))[:groups]:
        reasons_text = ", ".join(f"{h} {100.0 * v / s:.0f}%" for h, v in why.most_common(3)) if s else "-"
        out.append(f"  x{count:<10.0f} {n:5d} instr  {100.0 * s / total:5.1f}% of samples  "
                   f"{100.0 * e / all_executed:5.1f}% of executed  [{reasons_text}]")
    return out


def summarize(header, rows, top, groups=8):
    col = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]
    samples = [number(r[col[SAMPLES]]) for r in rows]
    executed = [number(r[col[EXECUTED]]) for r in rows]
    total = sum(samples)
    if total <= 0:
        raise InputError("the profile holds no warp-stall samples (was WarpStateStats collected?)")
    out = [f"instructions: {len(rows)}, samples: {total:.0f}, "
           f"executed (warp-level): {sum(executed):.0f}"]

    by_reason = {h: sum(number(r[col[h]]) for r in rows) for h in reasons}
    out.append("stall reasons (share of all samples):")
    for h, v in sorted(by_reason.items(), key=lambda kv: -kv[1]):
        if v > 0:
            out.append(f"  {h[len('stall_'):]:<20} {100.0 * v / total:5.1f}%")

    most = max(executed)
    rare = sum(s for s, e in zip(samples, executed) if e < most / LOOP_FRACTION)
    out.append(f"samples in instructions run < 1/{LOOP_FRACTION} as often as the most executed "
               f"({most:.0f} times): {100.0 * rare / total:.1f}%")

    out.extend(by_count(rows, col, reasons, samples, executed, total, groups))

    out.append(f"top {top} instructions by samples:")
    order = sorted(range(len(rows)), key=lambda i: -samples[i])[:top]
    for i in order:
        r = rows[i]
        tops = sorted(((h, number(r[col[h]])) for h in reasons), key=lambda kv: -kv[1])[:2]
        why = ", ".join(f"{h[len('stall_'):]} {v:.0f}" for h, v in tops if v > 0)
        out.append(f"  {100.0 * samples[i] / total:5.1f}%  x{executed[i]:<8.0f} "
                   f"{r[col['Source']].strip()[:60]:<60}  [{why}]")

    if EXCESS in col and SECTORS in col:
        sectors = sum(number(r[col[SECTORS]]) for r in rows)
        excess = collections.Counter()
        for r in rows:
            e = number(r[col[EXCESS]])
            if e:
                excess[opcode(r[col["Source"]])] += e
        all_excess = sum(excess.values())
        share = 100.0 * all_excess / sectors if sectors else 0.0
        out.append(f"excess L2 sectors: {all_excess:.0f} of {sectors:.0f} ({share:.1f}%), by opcode:")
        for op, e in excess.most_common():
            out.append(f"  {op:<12} {100.0 * e / all_excess:5.1f}% of the excess")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=10, help="instructions to list (default 10)")
    ap.add_argument("--groups", type=int, default=8, help="execution-count groups to list (default 8)")
    args = ap.parse_args()
    if args.top < 0 or args.groups < 0:
        print("ncu_sass_summary.py: --top and --groups must be >= 0", file=sys.stderr)
        return 2
    try:
        header, rows = read_rows(args.file)
        print("\n".join(summarize(header, rows, args.top, args.groups)))
    except InputError as e:
        print(f"ncu_sass_summary.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
