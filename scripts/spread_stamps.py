#!/usr/bin/env python3
"""Summarises the spread decode kernel's stamps (docs/performance.md, issue 7's twenty-third
and twenty-sixth passes). The measurement builds are patches in docs/bench/issue7-versions/,
each applied to a copy of the tree at the commit it names (never to the working tree):
8cc6da3-spread-stamps.patch (eleven points), a56d177-spread-chain-variants.patch (thirteen)
and d8a59f2-spread-stamps.patch (fifteen). With QSA_SP_STAMPS=FILE, thread 0 of every block
writes %globaltimer at each point of each launch, and at its 1500th launch the process
appends 56 launches to FILE, one JSON line each: {"seq": n, "blocks": [[t0, ..., smid] per
block]} (0 where a block did not reach a point, or the build has no such point); a block's
length says which build wrote it. Times are printed in microseconds from the launch's first
block released by griddepcontrol.wait: for each point the median over launches of the median
block and of the last block, then the barrier's last arrival and releases, and the period
from one launch's first release to the next's.

The thirty-sixth pass's builds (df961a1-spread-stamps.patch) run with QSA_SP_DIAG=1 (the files
named *-chain) stamp four points of the slot chain in place of four later ones (8, 9, 12, 13);
such a file is told by those points all coming before the copies are issued, and they are
named so.

Usage: scripts/spread_stamps.py FILE.jsonl[.gz]
  e.g. scripts/spread_stamps.py docs/bench/issue7-versions/h200-2026-12-02-spread-stamps-pad.jsonl.gz
A missing or malformed file (not JSON lines of that shape, no launch) is an error naming it
(exit 2).
"""
import gzip
import json
import statistics
import sys

# Values per block -> the build's points (the last value is the block's SM), and the indices of
# the wait's release, the partials' stores and the barrier's release among them.
LAYOUTS = {
    12: (["entry", "wait released", "slots, copies issued", "first K landed", "attention done",
          "partials stored", "barrier passed", "merge loads landed", "maxima", "sums",
          "outputs stored"], 1, 5, 6),
    14: (["entry", "wait released", "request and count", "first ids", "slots resolved",
          "copies issued", "first K landed", "attention done", "partials stored",
          "barrier passed", "merge (m, l), maxima", "sums", "outputs stored"], 1, 8, 9),
    16: (["entry", "wait released", "request and count", "first ids", "slots resolved",
          "copies issued", "first K landed", "attention done", "PV results", "sigmoids",
          "partials stored", "barrier passed", "merge (m, l), maxima", "sums",
          "outputs stored"], 1, 10, 11),
}


# A chain run's points 8, 9, 12 and 13 (sixteen values per block, those points before point 5).
CHAIN_POINTS = {8: "Q copies issued", 9: "tiles computed", 12: "tile loop entered", 13: "slots stored"}


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            launches = [json.loads(line) for line in f if line.strip()]
        for r in launches:
            if not isinstance(r["seq"], int) or not r["blocks"]:
                raise ValueError("a launch without blocks")
            for b in r["blocks"]:
                if len(b) not in LAYOUTS or len(b) != len(launches[0]["blocks"][0]) or b[1] == 0:
                    raise ValueError(f"launch {r['seq']}: a block of {len(b)} values or without its wait stamp")
    except (OSError, ValueError, KeyError, TypeError, EOFError) as e:
        raise SystemExit(f"spread_stamps.py: {path}: {e}")
    if not launches:
        raise SystemExit(f"spread_stamps.py: {path}: no launch")
    return sorted(launches, key=lambda r: r["seq"])


def layout(launches):
    """The (point names, wait, stored, passed) of the build that wrote `launches` (load() has
    checked that every block has one known length)."""
    return LAYOUTS[len(launches[0]["blocks"][0])]


def point_times(launches):
    """{point index: ([median block per launch], [last block per launch])}, in microseconds from
    each launch's first block released by the wait, for the points some block stamped."""
    names, wait, _, _ = layout(launches)
    times = {}
    for r in launches:
        base = min(b[wait] for b in r["blocks"])
        for i in range(len(names)):
            t = [(b[i] - base) / 1e3 for b in r["blocks"] if b[i] != 0]
            if t:
                typical, last = times.setdefault(i, ([], []))
                typical.append(statistics.median(t))
                last.append(max(t))
    return times


def periods(launches):
    """Microseconds from each launch's first wait release to the next launch's, over the file's
    consecutive launches."""
    wait = layout(launches)[1]
    first = {r["seq"]: min(b[wait] for b in r["blocks"]) for r in launches}
    return [(first[s + 1] - first[s]) / 1e3 for s in sorted(first) if s + 1 in first]


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path = sys.argv[1]
    try:
        launches = load(path)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    med = statistics.median
    POINTS, WAIT, STORED, PASSED = layout(launches)
    times = point_times(launches)
    chain = len(POINTS) == 15 and 5 in times and all(
        i in times and med(times[i][0]) < med(times[5][0]) for i in CHAIN_POINTS)
    if chain:
        POINTS = [CHAIN_POINTS.get(i, name) for i, name in enumerate(POINTS)]
    SMID = len(POINTS)
    arrival, first_release, median_release, sms = [], [], [], set()
    for r in launches:
        blocks = r["blocks"]
        base = min(b[WAIT] for b in blocks)
        arrival.append((max(b[STORED] for b in blocks) - base) / 1e3)
        released = [(b[PASSED] - base) / 1e3 for b in blocks if b[PASSED] != 0]
        if released:
            first_release.append(min(released))
            median_release.append(med(released))
        sms.add(len({b[SMID] for b in blocks}))
    period = periods(launches)
    print(f"{path}: {len(launches)} launches of {len(launches[0]['blocks'])} blocks on "
          f"{'/'.join(str(n) for n in sorted(sms))} SMs; us from the first block's wait release"
          + ("; points 8, 9, 12, 13 along the slot chain (QSA_SP_DIAG)" if chain else ""))
    for i, name in enumerate(POINTS):
        if i in times:
            typical, last = times[i]
            print(f"  {name:22s} median block {med(typical):6.2f}  last block {med(last):6.2f}")
    if first_release:
        print(f"  barrier: last arrival {med(arrival):.2f}, first release {med(first_release):.2f}, "
              f"median release {med(median_release):.2f}")
    if period:
        print(f"  period {med(period):.2f} us (min {min(period):.2f}, max {max(period):.2f}, "
              f"{len(period)} consecutive pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
