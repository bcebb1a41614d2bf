"""CTest gpu_evidence.cpu_smoke: runs `bash tools/gpu_evidence.sh --cpu-smoke` and checks what
it wrote, not only its exit status: every section's CSV has measured rows with finite positive
times, results.json names the machine, the page renders every section and carries no history,
dcp's predictions where the bindings import; and bad arguments are refused by name.
Prints DCP_TEST_SKIPPED (CTest's skip marker) when this python3 cannot import torch."""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "tools", "gpu_evidence.sh")
sys.path.insert(0, HERE)
from common import OK, SECTIONS, as_float, read_csv  # noqa: E402


def has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def run_script(*args: str, out: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OUT=out, PYTHON=sys.executable)
    return subprocess.run(["bash", SCRIPT, *args], env=env, capture_output=True, text=True, timeout=300)


def importable_dcp() -> bool:
    return subprocess.run([sys.executable, "-c", "import dcp"], capture_output=True).returncode == 0


class CpuSmokeRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.out = tempfile.mkdtemp(prefix="gpu-evidence-smoke-")
        cls.smoke = run_script("--cpu-smoke", out=cls.out)

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.out, ignore_errors=True)

    def test_the_script_succeeds(self) -> None:
        self.assertEqual(self.smoke.returncode, 0, self.smoke.stdout[-3000:] + self.smoke.stderr[-3000:])

    def test_every_section_measured_its_rows(self) -> None:
        for section in SECTIONS:
            with self.subTest(section=section.letter):
                rows = read_csv(os.path.join(self.out, section.csv))
                measured = [row for row in rows if row["status"] == OK]
                self.assertTrue(measured, f"{section.csv}: no measured row in {rows}")
                self.assertEqual([r for r in rows if r["status"] not in (OK, "skipped")], [])
                for row in measured:
                    for column in section.time_columns:
                        value = as_float(row[column])
                        self.assertTrue(math.isfinite(value) and value > 0, f"{section.csv}: {column} = {row[column]}")

    def test_results_name_the_machine_and_the_command(self) -> None:
        with open(os.path.join(self.out, "results.json")) as f:
            results = json.load(f)
        self.assertEqual(results["mode"], "cpu-smoke")
        self.assertEqual(results["command"], "bash tools/gpu_evidence.sh --cpu-smoke")
        self.assertRegex(results["date_utc"], r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")
        self.assertTrue(results["machine"]["torch"])
        self.assertEqual(sorted(results["sections"]), [s.letter for s in SECTIONS])

    def test_the_page_renders_every_section_without_history(self) -> None:
        with open(os.path.join(self.out, "gpu-results.md")) as f:
            page = f.read()
        for section in SECTIONS:
            self.assertIn(f"## {section.letter}. {section.title}", page)
            measured = sum(1 for row in read_csv(os.path.join(self.out, section.csv)) if row["status"] == OK)
            body = page.split(f"## {section.letter}. ")[1].split("\n## ")[0]
            self.assertGreaterEqual(body.count("| ok |"), measured, section.letter)
        cmake = shutil.which("cmake")
        if cmake:
            check = os.path.join(ROOT, "tests", "docs", "check_no_history.cmake")
            result = subprocess.run([cmake, f"-DFILES={os.path.join(self.out, 'gpu-results.md')}", "-P", check],
                                    capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)

    def test_predictions_where_the_bindings_import(self) -> None:
        with open(os.path.join(self.out, "prediction.json")) as f:
            summary = json.load(f)
        if not importable_dcp():
            self.assertIn("no prediction", summary["status"])
            return
        self.assertEqual(summary["status"], "ok")
        measured = [r for r in read_csv(os.path.join(self.out, "d_stack.csv")) if r["status"] == OK]
        predicted = read_csv(os.path.join(self.out, "d_prediction.csv"))
        self.assertEqual([r["case"] for r in predicted], [r["case"] for r in measured])
        self.assertTrue(all(as_float(r["predicted_s"]) > 0 for r in predicted))
        calibration = read_csv(os.path.join(self.out, "calibration.csv"))
        self.assertEqual(calibration[0]["observed"], "0")
        self.assertEqual(int(calibration[-1]["observed"]), len(measured))

    def test_the_docs_page_takes_no_smoke_run(self) -> None:
        result = subprocess.run([sys.executable, os.path.join(HERE, "render.py"), "--docs", self.out],
                                capture_output=True, text=True)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--cpu-smoke run", result.stderr)


class WikipediaLengths(unittest.TestCase):
    def test_draws_match_the_embedded_profile(self) -> None:
        import random
        import lengths
        points = lengths.wikipedia_points()
        self.assertEqual((points[0][0], points[-1][0]), (0.0, 1.0))
        rng = random.Random(1)
        draws = sorted(lengths.draw_length(rng) for _ in range(100_000))
        # The header's summary: mean 1013.6 (1012.8 interpolated), median 347.
        self.assertAlmostEqual(sum(draws) / len(draws) / 1012.8, 1.0, delta=0.1)
        self.assertAlmostEqual(draws[len(draws) // 2] / 347, 1.0, delta=0.05)
        batch = lengths.packed_micro_batch(65536, seed=3)
        self.assertEqual(sum(batch), 65536)
        self.assertGreater(len(batch), 10)


class BadArguments(unittest.TestCase):
    def refused(self, *args: str) -> str:
        with tempfile.TemporaryDirectory() as out:
            result = run_script(*args, out=out)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        return result.stderr

    def test_each_bad_argument_is_named_with_what_is_allowed(self) -> None:
        self.assertIn("--budget 'soon': not allowed; give whole seconds from 60 to 3600",
                      self.refused("--cpu-smoke", "--budget", "soon"))
        self.assertIn("--budget '5': not allowed", self.refused("--budget", "5"))
        self.assertIn("--sections 'a,x': not allowed; give letters of abcdef", self.refused("--sections", "a,x"))
        self.assertIn("unknown argument '--fast'; allowed: --cpu-smoke", self.refused("--fast"))
        self.assertIn("--dcp-python '/nonexistent': no dcp package there", self.refused("--dcp-python", "/nonexistent"))


if __name__ == "__main__":
    if not has_torch():
        print(f"DCP_TEST_SKIPPED: {sys.executable} cannot import torch")
        sys.exit(0)
    unittest.main(verbosity=2)
