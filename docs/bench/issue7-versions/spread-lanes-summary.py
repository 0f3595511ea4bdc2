#!/usr/bin/env python3
"""Thirty-second pass (docs/performance.md): a summary of the spread kernel's per-lane merge stamps.
dea0b05-spread-merge-lanes.patch (dea0b05's kernel with the twenty-eighth pass's stamps, thread 0's
O point and every thread's "merge loads landed" stamp) writes, with QSA_SP_STAMPS=FILE, FILE (the
stamps, as scripts/spread_stamps.py reads them) and FILE.lanes.jsonl (every fourth launch: per block
its index and each thread's landing in ns after the block's barrier release). This prints, over
the 64 merging blocks of each group and their 96 merging threads, when the lanes' loads landed
after the release, by part (splits part + 8k), and for the lanes that read the last block to store.
Not part of the build. Usage: spread-lanes-summary.py FILE (FILE.lanes.jsonl beside it; both
unzipped)."""
import json, sys, statistics as st
stamps = [json.loads(l) for l in open(sys.argv[1])]
lanes = [json.loads(l) for l in open(sys.argv[1] + '.lanes.jsonl')]
S = 65
by_seq = {r['seq']: r for r in stamps}
late_max, late_min, late_med, rel_part, last_vs = [], [], [], {p: [] for p in range(8)}, {'last': [], 'other': []}
for r in lanes:
    srow = by_seq.get(r['seq'])
    if srow is None:
        continue
    blocks = srow['blocks']
    # the producer that stored last in each group (stamp 10)
    last = {}
    for g in range(2):
        grp = blocks[g * S:(g + 1) * S]
        last[g] = max(range(len(grp)), key=lambda j: grp[j][10])
    for b in r['blocks']:
        blk, t = b[0], b[1:]
        g, j = divmod(blk, S)
        if j >= 64:
            continue
        live = [x for x in t[:96] if x >= 0]
        if len(live) < 96:
            continue
        lo = min(live)
        late_max.append(max(live)); late_min.append(lo); late_med.append(st.median(live))
        for i, x in enumerate(live):
            p = i % 8
            rel_part[p].append(x - lo)
            (last_vs['last'] if p == last[g] % 8 else last_vs['other']).append(x - lo)
print(f"blocks: {len(late_max)}; lanes' landing after the block's release, ns: min {st.median(late_min):.0f}, median {st.median(late_med):.0f}, max {st.median(late_max):.0f} (medians over blocks)")
print("by part (splits part + 8k), ns after the block's first lane: " + ", ".join(f"{p}: {st.median(v):.0f}" for p, v in rel_part.items()))
print(f"lanes reading the last-storing block's split: median {st.median(last_vs['last']):.0f} ns after the block's first lane; other lanes {st.median(last_vs['other']):.0f}")
q = sorted(x for v in rel_part.values() for x in v)
print("all lanes, ns after the block's first lane: p50 %.0f p90 %.0f p99 %.0f max %.0f" % (q[len(q)//2], q[int(len(q)*.9)], q[int(len(q)*.99)], q[-1]))
