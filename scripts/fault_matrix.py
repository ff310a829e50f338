"""The fault matrix as a table: runs tests/test_faults.py (solver family x fault, real scheduler
and worker processes killed by pid) and tests/test_checkpoint.py's SIGKILL-and-resume cases,
on a dataset of ``--rows`` rows, and writes docs/benchmarks/fault_matrix.{md,json}.

``python scripts/fault_matrix.py --rows 200000`` (the heavy version; the test suite runs the
same tests on 6,000 rows). Run it alone: it starts and kills many processes.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, md_table, write_results  # noqa: E402

FAMILIES = ["nsauc", "spam", "oam", "newton", "lsauc", "kmeans", "embedding"]
#: fault -> (test function, how its id names the family, the outcome a pass means)
FAULTS = {
    "worker SIGKILL mid-run": ("test_a_worker_killed_mid_run_gives_the_same_result",
                               "same result"),
    "scheduler lost": ("test_losing_the_scheduler_is_a_clear_error_for_every_family",
                       "clear error (exit 3)"),
    "kill -9 of the writer": ("test_killing_the_writing_process_leaves_the_whole_output_or_none",
                              "whole output or none; rerun same result"),
    "missing chunk": ("test_a_damaged_input_chunk_is_a_clear_error", "clear error"),
    "truncated chunk": ("test_a_damaged_input_chunk_is_a_clear_error", "clear error"),
    "concurrent writer": ("test_two_concurrent_writers_keep_one_output_and_refuse_the_other",
                          "one written, other clear error"),
    "tampered output": ("test_a_tampered_output_is_a_clear_error", "clear error"),
    "relative path, workers elsewhere": (
        "test_a_relative_path_with_workers_elsewhere_gives_the_same_result", "same result"),
}


def _cell(cases: dict, test: str, family: str, fault: str) -> str | None:
    """'pass' / 'FAIL' of the test cases of ``test`` for ``family`` (None: not run)."""
    outcomes = []
    for name, ok in cases.items():
        base, _, params = name.partition("[")
        if base != test:
            continue
        ids = re.split(r"[-\]]", params)
        if params and family not in ids:
            continue
        if fault == "missing chunk" and "truncated" in ids or \
                fault == "truncated chunk" and "missing" in ids:
            continue
        outcomes.append(ok)
    if not outcomes:
        return None
    return "pass" if all(outcomes) else "FAIL"


def _estimator(case: str) -> str:
    """The estimator a parametrized test id starts with: ``test_x[SPAM-params-3]`` -> SPAM."""
    return case.partition("[")[2].split("-")[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args(argv)
    junit = os.path.join(tempfile.mkdtemp(), "faults.xml")
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
         "tests/test_faults.py", "tests/test_checkpoint.py", "-k",
         "not partial_fit and not refuses"],
        cwd=ROOT, env={**os.environ, "DASKAUC_FAULT_ROWS": str(args.rows)})
    seconds = time.perf_counter() - t
    cases = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failed = any(c.tag in ("failure", "error") for c in case)
        cases[case.get("name")] = not failed
    rows = []
    for family in FAMILIES:
        row = {"family": family}
        for fault, (test, outcome) in FAULTS.items():
            cell = _cell(cases, test, family, fault)
            row[fault] = "-" if cell is None else (outcome if cell == "pass" else "FAIL")
        rows.append(row)
    resume = {k: v for k, v in cases.items() if k.startswith("test_a_fit_killed_mid_run")}
    md = ["# The fault matrix", "",
          f"`python scripts/fault_matrix.py --rows {args.rows}`: tests/test_faults.py on a "
          f"{args.rows:,}-row dataset (the test suite runs it on 6,000), real `dask scheduler` / "
          f"`dask worker` processes killed by pid; {len(cases)} cases in {seconds:.0f} s, "
          f"pytest exit status {proc.returncode}. Each cell is the outcome the test demands "
          "and got; FAIL otherwise.", "",
          md_table(rows, ["family", *FAULTS]), "",
          "A fit killed (SIGKILL) mid-run and resumed from its checkpoint "
          "(tests/test_checkpoint.py, 30,000 rows, the max abs coefficient difference against "
          "the uninterrupted fit must be 0.0): "
          + ", ".join(f"{_estimator(k)} {'pass' if v else 'FAIL'}"
                      for k, v in sorted(resume.items())) + ".", ""]
    write_results("fault_matrix", {"rows": args.rows, "cases": cases, "table": rows,
                                   "seconds": seconds, "exit": proc.returncode}, "\n".join(md))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
