#!/usr/bin/env python3
"""Tests of scripts/ncu_sass_summary.py (the per-instruction ncu profile summary) on small
hand-made exports in ncu's source-page CSV layout. Plain unittest:

    python3 tests/python/test_ncu_sass_summary.py            # from the repo root
"""
import csv
import gzip
import io
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ncu_sass_summary.py"

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
          "Instructions Executed", "L2 Theoretical Sectors Global Excessive", "L2 Theoretical Sectors Global",
          "stall_long_sb", "stall_wait", "stall_barrier", "stall_long_sb (Not Issued)"]

# A loop of two instructions run 1600 times, a prologue load and an epilogue store run 100
# times. Samples: 100 in all; long_sb 60 (loop branch 50, prologue 10), wait 25, barrier 15.
ROWS = [
    ["0x10", "LDG.E R2, desc[UR8][R4.64]", "10", "10", "100", "0", "400", "10", "0", "0", "10"],
    ["0x20", "@!P0  BRA 0x10", "50", "50", "1600", "0", "0", "50", "0", "0", "50"],
    ["0x30", "HMMA.16816.F32 R8, R12, R16, R8", "25", "20", "1,600", "0", "0", "0", "25", "0", "0"],
    ["0x40", "STG.E desc[UR8][R20.64], R7", "15", "15", "100", "300", "400", "0", "0", "15", "0"],
]


def export_text(rows=ROWS, header=HEADER):
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["Kernel Name", "void k(int)"])
    w.writerow(header)
    for r in rows:
        w.writerow(r)
    return out.getvalue()


def run(*args):
    p = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class SummaryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = self.dir / name
        path.write_text(text)
        return path

    def test_shares_of_reasons_rare_code_and_excess(self):
        code, out = run(self.write("p.csv", export_text()), "--top", "2")
        self.assertEqual(code, 0, out)
        self.assertIn("samples: 100", out)
        self.assertRegex(out, r"long_sb +60\.0%")
        self.assertRegex(out, r"wait +25\.0%")
        self.assertRegex(out, r"barrier +15\.0%")
        self.assertNotIn("Not Issued", out)  # the not-issued columns are not reasons of their own
        # The prologue load and the epilogue store run 100 times, under 1/8 of 1600: 25 samples.
        self.assertIn("most executed (1600 times): 25.0%", out)
        # Top 2 by samples: the loop branch (predicate dropped from nothing), then the mma.
        top = out.split("top 2 instructions by samples:")[1].splitlines()[1:3]
        self.assertIn("BRA", top[0])
        self.assertIn("50.0%", top[0])
        self.assertIn("HMMA", top[1])
        # By execution count: the loop (2 instructions run 1600 times) has 75 samples and
        # 3200 of the 3400 executed instructions; the prologue and epilogue (100 times) 25.
        groups = out.split("instructions by execution count")[1].splitlines()[1:3]
        self.assertRegex(groups[0], r"x1600 +2 instr +75\.0% of samples +94\.1% of executed +\[long_sb 67%, wait 33%\]")
        self.assertRegex(groups[1], r"x100 +2 instr +25\.0% of samples +5\.9% of executed +\[barrier 60%, long_sb 40%\]")
        # Excess sectors: 300 of 800 in all, all of them the store's.
        self.assertIn("excess L2 sectors: 300 of 800 (37.5%)", out)
        self.assertRegex(out, r"STG +100\.0% of the excess")

    def test_reads_gzip_like_the_kept_profiles(self):
        path = self.dir / "p.csv.gz"
        with gzip.open(path, "wt") as f:
            f.write(export_text())
        code, out = run(path)
        self.assertEqual(code, 0, out)
        self.assertIn("samples: 100", out)

    def test_predicated_opcodes_group_by_opcode(self):
        rows = [r[:] for r in ROWS]
        rows[0][1] = "@!P5  LDG.E.U16 R2, desc[UR8][R4.64]"
        rows[0][5] = "100"
        code, out = run(self.write("p.csv", export_text(rows)))
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"STG +75\.0% of the excess")
        self.assertRegex(out, r"LDG +25\.0% of the excess")

    def test_kept_profile_of_the_ninth_pass(self):
        # The numbers docs/performance.md quotes from the fp8 kernel at 64 rows (a31dfef).
        kept = ROOT / "docs" / "bench" / "issue7-versions" / "h200-2026-12-01-ncu-fp8-b64-a31dfef-sass.csv.gz"
        code, out = run(kept, "--top", "1")
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"long_sb +28\.7%")
        self.assertIn("most executed (33024 times): 28.7%", out)
        self.assertRegex(out, r"26\.2%  x16512 +@!P0  BRA")
        self.assertIn("excess L2 sectors: 314400 of 4686462 (6.7%)", out)

    def test_kept_prepare_profile_of_the_eighteenth_pass(self):
        # docs/performance.md, eighteenth pass: the indexer Q tasks (1024 warps, 364 instructions)
        # draw 53% of the samples; the main Q tasks (6144 warps, 504) issue 75% of the instructions.
        kept = ROOT / "docs" / "bench" / "issue7-versions" / "h200-2026-12-02-ncu-prepare-b256-f5da230-sass.csv.gz"
        code, out = run(kept, "--top", "0", "--groups", "2")
        self.assertEqual(code, 0, out)
        groups = out.split("instructions by execution count")[1].splitlines()[1:3]
        self.assertRegex(groups[0], r"x1024 +364 instr +53\.2% of samples +9\.1% of executed")
        self.assertRegex(groups[1], r"x6144 +504 instr +16\.7% of samples +75\.2% of executed")

    def test_bad_inputs_exit_2_naming_the_problem(self):
        code, out = run(self.dir / "missing.csv")
        self.assertEqual(code, 2)
        self.assertIn("cannot read", out)
        code, out = run(self.write("bench.csv", "name,iterations,real_time\nx,1,2\n"))
        self.assertEqual(code, 2)
        self.assertIn("not an ncu source-page CSV", out)
        no_samples = [h for h in HEADER if h != "Warp Stall Sampling (All Samples)"]
        code, out = run(self.write("cols.csv", export_text([r[:2] + r[3:] for r in ROWS], no_samples)))
        self.assertEqual(code, 2)
        self.assertIn("Warp Stall Sampling (All Samples)", out)
        code, out = run(self.write("empty.csv", export_text([])))
        self.assertEqual(code, 2)
        self.assertIn("no instruction rows", out)
        zero = [r[:2] + ["0"] + r[3:] for r in ROWS]
        code, out = run(self.write("zero.csv", export_text(zero)))
        self.assertEqual(code, 2)
        self.assertIn("no warp-stall samples", out)
        code, out = run(self.write("p.csv", export_text()), "--top", "-1")
        self.assertEqual(code, 2)
        self.assertIn("--top", out)
        code, out = run(self.write("p.csv", export_text()), "--groups", "-1")
        self.assertEqual(code, 2)
        self.assertIn("--groups", out)
        cut = export_text()
        code, out = run(self.write("cut.csv", cut[: cut.rindex(",")]))  # the last row loses a field
        self.assertEqual(code, 2)
        self.assertIn("line 6 has 10 fields where the header has 11", out)
        truncated = self.dir / "cut.csv.gz"
        truncated.write_bytes(gzip.compress(export_text().encode())[:40])
        code, out = run(truncated)
        self.assertEqual(code, 2)
        self.assertIn("cannot read", out)


if __name__ == "__main__":
    unittest.main()
