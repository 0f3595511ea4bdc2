#!/usr/bin/env python3
"""Tests of scripts/bench_ab.py (the A/B comparison) and scripts/bench-ab.sh (its driver), with
stand-in benchmark binaries: no GPU needed. Plain unittest:

    python3 tests/python/test_bench_ab.py            # from the repo root
"""
import itertools
import json
import math
import os
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_ab  # noqa: E402


def brute_force_p(a, b):
    """The two-sided rank-sum p-value by enumerating every split of the pooled values."""
    pooled = list(a) + list(b)
    m, n = len(a), len(b)

    def u_of(xs, ys):
        return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in xs for y in ys)

    mean = m * n / 2.0
    seen = abs(u_of(a, b) - mean)
    hits = total = 0
    for idx in itertools.combinations(range(m + n), m):
        xs = [pooled[i] for i in idx]
        ys = [pooled[i] for i in range(m + n) if i not in idx]
        total += 1
        hits += abs(u_of(xs, ys) - mean) >= seen - 1e-9
    return hits / total


def gbench_json(times):
    """Google Benchmark JSON with one iteration run per {name: real_time}."""
    return {"context": {"date": "2026-12-01"},
            "benchmarks": [{"name": f"{n}/iterations:10/manual_time", "run_type": "iteration", "real_time": t,
                            "time_unit": "us"} for n, t in times.items()]}


class TempDirTest(unittest.TestCase):
    """A test with a fresh temporary directory, self.tmp."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tmp = Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()


class BenchAbTest(TempDirTest):
    def write_runs(self, side, runs):
        """One file per process: runs is a list of {name: time}."""
        paths = []
        for i, times in enumerate(runs):
            p = self.tmp / f"{side}-{i}.json"
            p.write_text(json.dumps(gbench_json(times)))
            paths.append(str(p))
        return paths

    def run_main(self, args):
        return bench_ab.main(args)

    def test_exact_p_value_matches_enumeration(self):
        cases = [([1, 2, 3], [4, 5, 6]), ([1, 3, 5, 7], [2, 4, 6, 8]), ([10, 11, 12, 13, 14, 15], [1, 2, 3, 4, 5, 16]),
                 ([1, 2, 2, 3], [2, 3, 4]), ([5, 5], [5, 5])]
        for a, b in cases:
            with self.subTest(a=a, b=b):
                self.assertAlmostEqual(bench_ab.mann_whitney_p(a, b), brute_force_p(a, b), places=12)
        # The smallest p-value of k runs per side is 2 / C(2k, k).
        self.assertAlmostEqual(bench_ab.mann_whitney_p(range(6), range(6, 12)), 2 / math.comb(12, 6))

    def test_separated_sides_are_called_and_overlapping_ones_are_not(self):
        a = self.write_runs("a", [{"k/b64": 50.0 + 0.1 * i, "k/b1": 11.0 + 0.01 * (i % 2)} for i in range(6)])
        b = self.write_runs("b", [{"k/b64": 48.0 + 0.1 * i, "k/b1": 11.0 + 0.01 * ((i + 1) % 2)} for i in range(6)])
        out = self.tmp / "ab.json"
        self.assertEqual(self.run_main(["--a", *a, "--b", *b, "--names", "old", "new", "--json", str(out)]), 0)
        rows = {r["benchmark"]: r for r in json.loads(out.read_text())["benchmarks"]}
        self.assertEqual(set(rows), {"k/b64", "k/b1"})  # run settings stripped from the names
        self.assertEqual(rows["k/b64"]["verdict"], "faster")
        self.assertAlmostEqual(rows["k/b64"]["p_value"], 2 / 924)
        self.assertAlmostEqual(rows["k/b64"]["change_pct"], 100 * (48.25 / 50.25 - 1))
        self.assertEqual(rows["k/b1"]["verdict"], "no detectable change")
        # A slower B the other way round.
        out2 = self.tmp / "ba.json"
        self.assertEqual(self.run_main(["--a", *b, "--b", *a, "--json", str(out2)]), 0)
        rows2 = {r["benchmark"]: r for r in json.loads(out2.read_text())["benchmarks"]}
        self.assertEqual(rows2["k/b64"]["verdict"], "slower")

    def test_a_significant_but_small_difference_is_not_called(self):
        a = self.write_runs("a", [{"k": 100.0 + 0.01 * i} for i in range(6)])
        b = self.write_runs("b", [{"k": 99.5 + 0.01 * i} for i in range(6)])  # -0.5%, every B below every A
        out = self.tmp / "ab.json"
        self.assertEqual(self.run_main(["--a", *a, "--b", *b, "--json", str(out)]), 0)
        row = json.loads(out.read_text())["benchmarks"][0]
        self.assertAlmostEqual(row["p_value"], 2 / 924)
        self.assertEqual(row["verdict"], "no detectable change")
        out2 = self.tmp / "ab2.json"
        self.assertEqual(self.run_main(["--a", *a, "--b", *b, "--min-change", "0.25", "--json", str(out2)]), 0)
        self.assertEqual(json.loads(out2.read_text())["benchmarks"][0]["verdict"], "faster")
        self.assertEqual(self.run_main(["--a", *a, "--b", *b, "--min-change", "-1"]), 2)

    def test_four_rounds_cannot_reach_the_default_alpha(self):
        a = self.write_runs("a", [{"k": 10.0 + i} for i in range(4)])
        b = self.write_runs("b", [{"k": 20.0 + i} for i in range(4)])
        out = self.tmp / "ab.json"
        self.assertEqual(self.run_main(["--a", *a, "--b", *b, "--json", str(out)]), 0)
        row = json.loads(out.read_text())["benchmarks"][0]
        self.assertAlmostEqual(row["p_value"], 2 / 70)
        self.assertEqual(row["verdict"], "no detectable change")

    def test_bad_inputs_exit_2_and_touch_nothing(self):
        a = self.write_runs("a", [{"k": 1.0, "only_a": 2.0}, {"k": 1.1, "only_a": 2.1}])
        b = self.write_runs("b", [{"k": 1.0}, {"k": 1.2}])
        self.assertEqual(self.run_main(["--a", *a, "--b", *b]), 2)  # a benchmark on one side only
        one = self.write_runs("c", [{"k": 1.0}])
        self.assertEqual(self.run_main(["--a", *one, "--b", *b]), 2)  # one run: no test possible
        bad = self.tmp / "bad.json"
        bad.write_text('{"benchmarks": [')
        self.assertEqual(self.run_main(["--a", str(bad), *a, "--b", *b]), 2)  # truncated JSON
        self.assertEqual(self.run_main(["--a", str(self.tmp / "missing.json"), "--b", *b]), 2)
        nan = self.tmp / "nan.json"
        nan.write_text(json.dumps(gbench_json({"k": float("nan")})))
        self.assertEqual(self.run_main(["--a", str(nan), str(nan), "--b", *b]), 2)
        self.assertEqual(self.run_main(["--a", *b, "--b", *b, "--alpha", "1.5"]), 2)
        self.assertEqual(self.run_main(["--a", *b]), 2)  # no side B
        # An existing output file is refused and kept as it was.
        kept = self.tmp / "kept.md"
        kept.write_text("the user's table\n")
        self.assertEqual(self.run_main(["--a", *b, "--b", *b, "--markdown", str(kept)]), 2)
        self.assertEqual(kept.read_text(), "the user's table\n")


class BenchAbDriverTest(TempDirTest):
    """scripts/bench-ab.sh with two stand-in binaries that print Google Benchmark JSON."""

    def fake_binary(self, name, time_us):
        p = self.tmp / name
        # Checks that the driver passes the filter and the iteration count through.
        p.write_text("#!/bin/sh\n"
                     "case \"$1\" in --benchmark_filter=attention/decode) ;; *) echo \"bad filter $1\" >&2; exit 3;; esac\n"
                     "[ \"$QSA_BENCH_ITERATIONS\" = 7 ] || { echo 'iterations not passed' >&2; exit 3; }\n"
                     f"echo '{json.dumps(gbench_json({'attention/decode/b64': time_us}))}'\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
        return str(p)

    def driver(self, args, out):
        env = dict(os.environ, OUT=str(out))
        return subprocess.run(["bash", str(ROOT / "scripts" / "bench-ab.sh"), *args], env=env, capture_output=True,
                              text=True)

    def test_runs_both_sides_and_compares(self):
        out = self.tmp / "run"
        r = self.driver(["--filter", "attention/decode", "--rounds", "6", "--iterations", "7", "--names", "old", "new",
                         self.fake_binary("a", 50.0), self.fake_binary("b", 40.0)], out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(p.name for p in out.glob("[ab]-*.json")),
                         sorted([f"a-{i}.json" for i in range(1, 7)] + [f"b-{i}.json" for i in range(1, 7)]))
        table = (out / "ab.md").read_text()
        self.assertIn("new median", table)
        self.assertIn("-20.0%", table)
        self.assertIn("| 0.0022 | new faster |", table)

    def test_bad_arguments_exit_2(self):
        a, b = self.fake_binary("a", 1.0), self.fake_binary("b", 1.0)
        cases = [[a, b],  # no filter
                 ["--filter", "x", a],  # one side
                 ["--filter", "x", "--rounds", "1", a, b],
                 ["--filter", "x", "--rounds", "many", a, b],
                 ["--filter", "x", "--iterations", "0", a, b],
                 ["--filter", "x", "--bogus", a, b],
                 ["--filter", "x", a, str(self.tmp / "missing")]]
        for i, args in enumerate(cases):
            with self.subTest(args=args):
                r = self.driver(args, self.tmp / f"bad{i}")
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("bench-ab.sh:", r.stderr)

    def test_refuses_a_directory_with_results(self):
        out = self.tmp / "used"
        out.mkdir()
        (out / "ab.md").write_text("earlier results\n")
        r = self.driver(["--filter", "attention/decode", self.fake_binary("a", 1.0), self.fake_binary("b", 1.0)], out)
        self.assertEqual(r.returncode, 2)
        self.assertEqual((out / "ab.md").read_text(), "earlier results\n")

    def test_a_failing_process_fails_the_run(self):
        out = self.tmp / "fail"
        r = self.driver(["--filter", "other", "--iterations", "7", self.fake_binary("a", 1.0),
                         self.fake_binary("b", 1.0)], out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("failed", r.stderr)


if __name__ == "__main__":
    unittest.main()
