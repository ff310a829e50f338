"""The fault matrix as a table: runs tests/test_faults.py (solver family x fault, real scheduler
and worker processes killed by pid), tests/test_checkpoint.py's SIGKILL-and-resume cases on a
dataset of ``--rows`` rows, and tests/test_cli_faults.py (the command line under faults), and
writes docs/benchmarks/fault_matrix.{md,json}.

``python -m tools.fault_matrix --rows 200000`` (the heavy version; the test suite runs the
same tests on 6,000 rows). Run it alone: it starts and kills many processes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

from benchmarks._harness import ROOT, Parser, md_table, write_results

FAMILIES = ["nsauc", "spam", "oam", "newton", "lsauc", "kmeans", "embedding"]
#: fault -> (test function, the outcome a pass means, the test id's word for the fault)
FAULTS = {
    "worker SIGKILL mid-run": ("test_a_worker_killed_mid_run_gives_the_same_result",
                               "same result", None),
    "scheduler lost": ("test_losing_the_scheduler_is_a_clear_error_for_every_family",
                       "clear error (exit 3)", None),
    "kill -9 of the writer": ("test_killing_the_writing_process_leaves_the_whole_output_or_none",
                              "whole output or none; rerun same result", None),
    "missing chunk": ("test_a_damaged_input_chunk_is_a_clear_error", "clear error", "missing"),
    "truncated chunk": ("test_a_damaged_input_chunk_is_a_clear_error", "clear error",
                        "truncated"),
    "swapped chunks": ("test_a_damaged_input_chunk_is_a_clear_error", "clear error",
                       "swapped"),
    "concurrent writer": ("test_two_concurrent_writers_keep_one_output_and_refuse_the_other",
                          "one written, other clear error", None),
    "tampered output": ("test_a_tampered_output_is_a_clear_error", "clear error", None),
    "relative path, workers elsewhere": (
        "test_a_relative_path_with_workers_elsewhere_gives_the_same_result", "same result",
        None),
    "two stores in one client": (
        "test_no_task_key_reaches_the_scheduler_with_a_different_task",
        "same result, no key collision", None),
}
#: the command line's faults (tests/test_cli_faults.py): test (id prefix) -> (fault, outcome)
CLI_FAULTS = {
    "test_a_read_only_output_is_refused_before_any_work": (
        "read-only output (a read-only tmpfs)", "clear error before any work"),
    "test_a_full_disk_is_a_clear_error_and_keeps_what_was_there": (
        "full disk (a 1 MiB tmpfs): ingest, embed", "clear error; the previous store kept"),
    "test_a_signal_mid_fit_is_one_line_leaves_no_process_and_resumes_exactly": (
        "SIGINT / SIGTERM mid-fit", "one line, exit 130 / 143, no process left; resume "
        "gives the same model"),
    "test_a_store_path_that_is_not_utf8_runs_through_the_command_line": (
        "store path not UTF-8: ingest, embed, fit on a local cluster",
        "runs to the end (workers died, embed waited forever)"),
    "test_a_worker_memory_limit_below_what_a_worker_needs_is_refused_at_start": (
        "worker memory limit (150 MiB) below a worker's baseline", "clear error at start"),
    "test_outputs_never_replace_inputs_or_data": (
        "an output at an input, a dataset, a file, the model path", "clear error before any "
        "work; nothing replaced"),
    "test_a_normal_run_prints_no_error_or_warning_and_listens_on_localhost_only": (
        "a normal embed / fit / evaluate", "no ERROR or WARNING line; sockets on 127.0.0.1"),
    "test_cluster_command_listens_on_localhost_and_says_what_it_exposes": (
        "daskauc cluster", "sockets on 127.0.0.1, exposure said; no process left"),
    "test_a_taken_scheduler_port_is_one_line": ("scheduler port taken", "one line"),
    "test_options_are_never_abbreviated": ("an abbreviated option", "usage error"),
}


def _cell(cases: dict, test: str, family: str, word: str | None) -> str | None:
    """'pass' / 'FAIL' of the test cases of ``test`` for ``family`` (None: not run)."""
    outcomes = []
    for name, ok in cases.items():
        base, _, params = name.partition("[")
        if base != test:
            continue
        ids = re.split(r"[-\]]", params)
        if params and family not in ids or word is not None and word not in ids:
            continue
        outcomes.append(ok)
    if not outcomes:
        return None
    return "pass" if all(outcomes) else "FAIL"


def _estimator(case: str) -> str:
    """The estimator a parametrized test id starts with: ``test_x[SPAM-params-3]`` -> SPAM."""
    return case.partition("[")[2].split("-")[0]


def main(argv=None) -> int:
    # --quick: the test suite's size; no --seed (the tests' data are theirs)
    ap = Parser(__doc__, quick={"rows": 6000}, seed=None)
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args(argv)
    junit = os.path.join(tempfile.mkdtemp(), "faults.xml")
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
         "tests/test_faults.py", "tests/test_checkpoint.py", "tests/test_cli_faults.py", "-k",
         "not partial_fit and not refuses"],
        cwd=ROOT, env={**os.environ, "DASKAUC_FAULT_ROWS": str(args.rows)})
    seconds = time.perf_counter() - t
    cases, durations = {}, {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failed = any(c.tag in ("failure", "error") for c in case)
        skipped = any(c.tag == "skipped" for c in case)
        cases[case.get("name")] = None if skipped else not failed
        durations[case.get("name")] = float(case.get("time", 0.0))
    rows = []
    for family in FAMILIES:
        row = {"family": family}
        for fault, (test, outcome, word) in FAULTS.items():
            cell = _cell(cases, test, family, word)
            row[fault] = "-" if cell is None else (outcome if cell == "pass" else "FAIL")
        rows.append(row)
    cli_rows = []
    for test, (fault, outcome) in CLI_FAULTS.items():
        for name, ok in cases.items():
            if name.partition("[")[0] == test:
                case = name.partition("[")[2].rstrip("]")
                cli_rows.append({
                    "fault": fault + (f" [{case}]" if case else ""),
                    "outcome": "skipped" if ok is None else outcome if ok else "FAIL",
                    "seconds": f"{durations[name]:.2f}"})
    resume = {k: v for k, v in cases.items() if k.startswith("test_a_fit_killed_mid_run")}
    md = ["# The fault matrix", "",
          f"`python -m tools.fault_matrix --rows {args.rows}`: tests/test_faults.py on a "
          f"{args.rows:,}-row dataset (the test suite runs it on 6,000), real `dask scheduler` / "
          f"`dask worker` processes killed by pid; {len(cases)} cases in {seconds:.0f} s, "
          f"pytest exit status {proc.returncode}. Each cell is the outcome the test demands "
          "and got; FAIL otherwise.", "",
          md_table(rows, ["family", *FAULTS]), "",
          "The command line under faults (tests/test_cli_faults.py: real `daskauc` processes "
          "with their own local clusters, read-only and full file systems mounted for the "
          "test; seconds are the whole test case, an error \"before any work\" is also "
          "checked to come before a cluster starts):", "",
          md_table(cli_rows, ["fault", "outcome", "seconds"]), "",
          "A fit killed (SIGKILL) mid-run and resumed from its checkpoint "
          "(tests/test_checkpoint.py, 30,000 rows, the max abs coefficient difference against "
          "the uninterrupted fit must be 0.0): "
          + ", ".join(f"{_estimator(k)} {'pass' if v else 'FAIL'}"
                      for k, v in sorted(resume.items())) + ".", ""]
    write_results("fault_matrix", {"rows": args.rows, "cases": cases, "table": rows,
                                   "cli": cli_rows,
                                   "seconds": seconds, "exit": proc.returncode}, "\n".join(md),
                  out=args.out)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
