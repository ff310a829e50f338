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

#: the test whose cases name the families (tests/test_faults.py's FAMILIES, one per case)
FAMILY_TEST = "test_a_worker_killed_mid_run_gives_the_same_result"
#: the estimator class a family's column is tested on where a test runs per class
CLASS_OF = {"nsauc": "NSAUC", "spam": "SPAM", "oam": "OAM", "newton": "RankSVM",
            "lsauc": "LSAUC", "kmeans": "MiniBatchKMeans", "embedding": "KMeansNystroem"}
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
#: faults tested per estimator class (tests elsewhere, parametrized by class name): fault ->
#: (test, the outcome a pass means, the test id's word for the case)
CLASS_FAULTS = {
    "default fit in nested progress(), threads": (
        "test_every_default_fit_inside_nested_progress_blocks_is_kept",
        "model kept, bars closed", "threads"),
    "default fit in nested progress(), cluster": (
        "test_every_default_fit_inside_nested_progress_blocks_is_kept",
        "model kept, bars closed", "cluster"),
    "X, y from dask DataFrames of 2-3 partitions": (
        "test_x_and_y_from_dask_dataframes_of_several_partitions", "same result", None),
}
#: the second probe's kinds (issue 40), each a test: test -> (kind, outcome, when)
PROBE_FAULTS = {
    "test_a_model_refuses_rows_from_a_map_it_was_not_fitted_on": (
        "scoring map or embedding of another map (predict --map, write_scores, evaluate, "
        "score)", "clear error", "before any work"),
    "test_a_raw_store_of_the_embedding_width_is_refused": (
        "raw store of the embedding's width scored by an embedding's model", "clear error",
        "before any work"),
    "test_a_damaged_parquet_page_is_named_not_ingested": (
        "Parquet data page altered (page checksums written): ingest", "clear error",
        "during the pass (the page is read); nothing written"),
    "test_a_damaged_parquet_page_is_named_not_scored": (
        "Parquet data page altered (page checksums written): predict", "clear error",
        "during the pass (the page is read); nothing written"),
    "test_two_features_with_one_name_are_refused_before_any_work": (
        "two features of one name (numeric 'c=v' beside one-hot 'c'; CSV or Parquet 'a,a')",
        "clear error", "before any work"),
    "test_a_category_unseen_at_ingest_is_refused_or_zeros_when_asked": (
        "a category unseen at ingest, scored", "clear error (zeros with "
        "handle_unknown='ignore')", "during the pass (the value is read); nothing written"),
    "test_parquet_files_that_disagree_are_named_before_any_work": (
        "Parquet directory whose files disagree (extra, missing, retyped column)",
        "clear error", "before any work"),
    "test_an_output_inside_another_store_is_refused_and_every_store_still_opens": (
        "an output (checkpoint, model, store, scores) inside another store", "clear error; "
        "every store still opens", "before any work"),
    "test_a_store_with_a_foreign_child_says_so": (
        "a store holding another store inside it (written by hand)", "clear error naming "
        "the child, not 'damaged'", "at open"),
    "test_load_model_refuses_what_save_model_refuses": (
        "model file whose Pipeline sets memory=", "clear error", "at load, before any "
        "estimator is built"),
    "test_a_boolean_label_stays_boolean": (
        "boolean label column, --positive true/True/1, positive=True", "works (booleans "
        "kept)", "-"),
    "test_an_output_name_that_is_not_utf8": (
        "Parquet output name not UTF-8", "works", "-"),
    "test_workers_without_the_clients_credentials_are_one_line_naming_the_url": (
        "S3 store read on a cluster whose workers lack the client's credentials",
        "one line naming the URL and the workers", "before any work (a store opened before "
        "the client: at its first read, nothing written)"),
    "test_nothing_at_an_s3_input_says_so_naming_the_url": (
        "missing S3 bucket or prefix as input (ingest, open, fit, predict)",
        "one line: nothing exists at the URL", "before any work"),
    "test_an_unreachable_s3_endpoint_is_one_line_naming_it_at_once": (
        "unreachable S3 endpoint", "one line naming the endpoint, in under 5 s",
        "before any work"),
    "test_class_weight_keys_are_matched_to_numeric_labels_as_a_positive_label_is": (
        "class_weight keys 1 / 1.0 on labels 1/2, 0/1 or a store's 1.0/2.0 (Python)",
        "same result; the text '1' refused as pos_label='1' is", "before any work"),
    "test_a_class_weight_by_a_numeric_label_from_the_command_line": (
        "--param 'class_weight={\"1\": 10}' on numeric labels", "same result as the "
        "number key", "-"),
    "test_kernel_auc_resumes_with_the_checkpoints_choices": (
        "KernelAUC resumed with other parameters", "one line naming the parameter",
        "before any work"),
    "test_resume_refuses_a_checkpoint_of_another_fit": (
        "a resume with other parameters (SPAM)", "one line naming the parameter",
        "before any work"),
}
#: the test files of CLASS_FAULTS and PROBE_FAULTS, beside the three of the matrix
PROBE_FILES = ["tests/test_user_view.py", "tests/test_input_checks.py", "tests/test_embed.py",
               "tests/test_tables.py", "tests/test_scoring.py", "tests/test_s3.py",
               "tests/test_calibration.py", "tests/test_cli.py", "tests/test_integrity.py"]
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


def _pytest(files: list[str], select: str, env: dict) -> tuple[int, dict, dict]:
    """Run the tests of ``files`` that ``-k select`` picks; (exit status, test id -> passed
    (None: skipped), test id -> seconds)."""
    junit = os.path.join(tempfile.mkdtemp(), "faults.xml")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--junitxml={junit}", *files, "-k", select], cwd=ROOT, env=env)
    cases, durations = {}, {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failed = any(c.tag in ("failure", "error") for c in case)
        skipped = any(c.tag == "skipped" for c in case)
        cases[case.get("name")] = None if skipped else not failed
        durations[case.get("name")] = float(case.get("time", 0.0))
    return proc.returncode, cases, durations


def main(argv=None) -> int:
    # --quick: the test suite's size; no --seed (the tests' data are theirs)
    ap = Parser(__doc__, quick={"rows": 6000}, seed=None)
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args(argv)
    t = time.perf_counter()
    env = {**os.environ, "DASKAUC_FAULT_ROWS": str(args.rows)}
    status, cases, durations = _pytest(
        ["tests/test_faults.py", "tests/test_checkpoint.py", "tests/test_cli_faults.py"],
        "not partial_fit and (not refuses or test_resume_refuses_a_checkpoint_of_another_fit)",
        env)
    probe = " or ".join([*{t for t, _, _ in CLASS_FAULTS.values()}, *PROBE_FAULTS])
    probe_status, more, more_durations = _pytest(PROBE_FILES, probe, env)
    cases.update(more)
    durations.update(more_durations)
    seconds = time.perf_counter() - t
    status = status or probe_status
    families = [name.partition("[")[2].rstrip("]") for name in cases
                if name.partition("[")[0] == FAMILY_TEST]
    missing = sorted(set(families) - set(CLASS_OF))
    if missing:
        raise SystemExit(f"tools/fault_matrix.py: CLASS_OF has no class for the families "
                         f"{missing} of tests/test_faults.py")
    rows = []
    for family in families:
        row = {"family": family}
        for fault, (test, outcome, word) in FAULTS.items():
            cell = _cell(cases, test, family, word)
            row[fault] = "-" if cell is None else (outcome if cell == "pass" else "FAIL")
        for fault, (test, outcome, word) in CLASS_FAULTS.items():
            cell = _cell(cases, test, CLASS_OF[family], word)
            row[fault] = "-" if cell is None else (outcome if cell == "pass" else "FAIL")
        rows.append(row)
    probe_rows = []
    for test, (kind, outcome, when) in PROBE_FAULTS.items():
        runs = {n: ok for n, ok in cases.items() if n.partition("[")[0] == test}
        ran = [ok for ok in runs.values() if ok is not None]
        probe_rows.append({
            "kind": kind, "test": test,
            "outcome": "not run" if not runs else "skipped" if not ran
            else outcome if all(ran) else "FAIL",
            "when": when, "seconds": f"{sum(durations[n] for n in runs):.2f}"})
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
          f"pytest exit status {status}. Each cell is the outcome the test demands "
          "and got; FAIL otherwise.", "",
          md_table(rows, ["family", *FAULTS, *CLASS_FAULTS]), "",
          "The last three columns run per estimator class (the family's class: "
          + ", ".join(f"{f} {c}" for f, c in CLASS_OF.items()) + "; every registered class "
          "is tested, in tests/test_user_view.py and tests/test_input_checks.py).", "",
          "The second probe's kinds (issue 40): each is a test that failed before its fix. "
          "\"Before any work\" means before any output is created and before a cluster "
          "computes (the tests check that nothing was written); seconds are the test's:", "",
          md_table(probe_rows, ["kind", "outcome", "when", "test", "seconds"]), "",
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
                                   "cli": cli_rows, "probe": probe_rows,
                                   "seconds": seconds, "exit": status}, "\n".join(md),
                  out=args.out)
    return status


if __name__ == "__main__":
    sys.exit(main())
