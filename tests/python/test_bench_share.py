#!/usr/bin/env python3
"""scripts/bench_share.py against a stand-in for qsa_bench_gpu: one process per share with
QSA_BENCH_SHARE set, the table of medians over rounds, and its refusals (bad shares, results
already there, a binary that ignores the share, a failing process, no GPU)."""
import json
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "bench_share.py")

# A stand-in binary: times that fall with the share (1000 us at 0, 200 us at 1), the round
# number taken from a counter file so that rounds differ; FAKE_MODE picks a failure.
FAKE = textwrap.dedent("""\
    #!/usr/bin/env python3
    import json, os, sys
    mode = os.environ.get("FAKE_MODE", "")
    if mode == "nogpu":
        print("qsa_bench_gpu: no GPU available, NOT RUN"); sys.exit(77)
    if mode == "fail":
        sys.exit(3)
    out = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark_out=")][0]
    share = float(os.environ["QSA_BENCH_SHARE"])
    counter = os.environ["FAKE_COUNTER"]
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(n + 1))
    ctx = {"qsa_matrix_TFLOPps": "800.0"}
    if mode != "old":
        ctx["qsa_selection_share"] = os.environ["QSA_BENCH_SHARE"]
    t = 1000.0 - 800.0 * share + n  # us; each process 1 us slower than the one before
    b = {"name": "attention/prefill/c8/ctx16/bf16/iterations:10/manual_time", "run_type": "iteration",
         "real_time": t, "time_unit": "us", "median_us": t, "flops": 4.0e8, "reuse": 1.0 + 3.0 * share}
    d = {"name": "attention/prefill/c8/ctx16/bf16/decode_kernel/iterations:10/manual_time",
         "run_type": "iteration", "real_time": 700.0, "time_unit": "us", "median_us": 700.0, "flops": 4.0e8}
    json.dump({"context": ctx, "benchmarks": [b, d]}, open(out, "w"))
""")


class BenchShareTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.bin = os.path.join(self.tmp.name, "fake_bench")
        with open(self.bin, "w") as f:
            f.write(FAKE)
        os.chmod(self.bin, os.stat(self.bin).st_mode | stat.S_IXUSR)
        self.env = dict(os.environ, FAKE_COUNTER=os.path.join(self.tmp.name, "count"))
        self.env.pop("OUT", None)

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, *args, mode=""):
        env = dict(self.env, FAKE_MODE=mode)
        return subprocess.run([sys.executable, SCRIPT, self.bin, "--filter", "prefill", *args], env=env,
                              capture_output=True, text=True, cwd=self.tmp.name)

    def test_table_of_medians_by_share(self):
        out = os.path.join(self.tmp.name, "r")
        p = self.run_script("--shares", "0,0.5,1", "--rounds", "3", "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        names = sorted(n for n in os.listdir(out) if n.endswith(".json") and n != "share.json")
        self.assertEqual(len(names), 9)
        with open(os.path.join(out, "share.json")) as f:
            data = json.load(f)
        row = data["attention/prefill/c8/ctx16/bf16"]
        # Processes run 0, 0.5, 1 | 1, 0.5, 0 | 0, 0.5, 1: share 0 took 1000 + {0, 5, 6} us, median 1005.
        self.assertAlmostEqual(row["0"]["median_us"], 1005.0)
        self.assertAlmostEqual(row["0.5"]["median_us"], 600.0 + 4.0)
        self.assertAlmostEqual(row["1"]["median_us"], 200.0 + 3.0)
        # 4e8 FLOPs in 203 us: 1.97 TFLOP/s, 0.246% of 800.
        self.assertAlmostEqual(row["1"]["TFLOPps"], 4.0e8 / 203e-6 / 1e12)
        self.assertAlmostEqual(row["1"]["pct_matrix"], 100.0 * 4.0e8 / 203e-6 / 1e12 / 800.0)
        # The plan's reuse rides along where the benchmark reports it, and only there.
        self.assertAlmostEqual(row["0.5"]["reuse"], 2.5)
        self.assertIsNone(data["attention/prefill/c8/ctx16/bf16/decode_kernel"]["0.5"]["reuse"])
        with open(os.path.join(out, "share.md")) as f:
            md = f.read()
        self.assertIn("| share 0 | share 0.5 | share 1 |", md)
        self.assertIn("1.00 ms", md)
        self.assertIn("reuse 4.00", md)
        self.assertIn(md.splitlines()[-1], p.stdout)

    def test_refuses_existing_results_and_bad_arguments(self):
        out = os.path.join(self.tmp.name, "r")
        self.assertEqual(self.run_script("--shares", "0", "--out", out).returncode, 0)
        p = self.run_script("--shares", "0", "--out", out)
        self.assertEqual(p.returncode, 2)
        self.assertIn("already holds results", p.stderr)
        for bad in ("0,1.5", "x", "0.5,0.5", "-0.1"):
            p = self.run_script("--shares", bad, "--out", os.path.join(self.tmp.name, "b"))
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn("--shares", p.stderr)
        self.assertEqual(self.run_script("--rounds", "0", "--out", os.path.join(self.tmp.name, "c")).returncode, 2)

    def test_a_binary_that_ignores_the_share_is_an_error(self):
        p = self.run_script("--shares", "0.9", "--out", os.path.join(self.tmp.name, "o"), mode="old")
        self.assertEqual(p.returncode, 1)
        self.assertIn("qsa_selection_share", p.stderr)

    def test_failures_and_no_gpu(self):
        p = self.run_script("--shares", "0.9", "--out", os.path.join(self.tmp.name, "f"), mode="fail")
        self.assertEqual(p.returncode, 1)
        self.assertIn("reproduce with: QSA_BENCH_SHARE=0.9", p.stderr)
        p = self.run_script("--shares", "0.9", "--out", os.path.join(self.tmp.name, "n"), mode="nogpu")
        self.assertEqual(p.returncode, 77)
        self.assertIn("NOT RUN", p.stderr)


if __name__ == "__main__":
    unittest.main()
