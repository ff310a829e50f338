"""Ingest of the same table from Parquet and from CSV, against dask.dataframe, and what a
3,000,000-wide sparse LIBSVM file does.

covtype.binary (all 581,012 rows, 54 features, label type 2 positive) is written as a
Parquet directory (4 files, row groups of 50,000 rows, snappy) and as a CSV file with a
header, once and 8 times over (4.6 million rows, a 1 GB store: the peak memory must not grow
with it). Each way of turning it into a row-chunked Zarr store runs in a fresh process, alone
on the machine, and reports its wall time and its peak resident memory (``VmHWM``):

* ``daskauc.ingest`` of the Parquet directory (column projection, record batches streamed);
* ``daskauc.ingest`` of the CSV file (the numba text parser);
* ``dask.dataframe.read_parquet(...).to_dask_array(lengths=True)`` written with
  ``dask.array.to_zarr`` (what a user would write by hand; threaded scheduler, 2 threads);
* the same dask array written with ``daskauc.ingest_array`` (the checked, committed write).

Then a 1,001-row LIBSVM file whose largest index is 3,000,000 (dense: 12 GB as float32) is
ingested: it is refused before anything is allocated, and the time and peak memory of the
refusal are reported.

``python -m benchmarks.ingest_formats`` writes docs/benchmarks/ingest_formats.{json,md}.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np

from benchmarks._harness import CACHE_DIR, Parser, command, load_dataset, md_table, write_results

WORK = os.path.join(CACHE_DIR, "ingest_formats")

_CHILD = r"""
import json, os, sys, time
spec = json.loads(sys.argv[1])
import dask, dask.array as da, dask.dataframe as dd, pyarrow.dataset, daskauc  # not timed
t = time.perf_counter()
out = {}
try:
    if spec["how"] == "dask read_parquet + to_zarr":
        df = dd.read_parquet(spec["source"])
        X = df[spec["features"]].to_dask_array(lengths=True).astype("float32")
        X = X.rechunk({0: spec["chunk_rows"], 1: -1})
        with dask.config.set(scheduler="threads", num_workers=2):
            da.to_zarr(X, spec["store"], component="X", overwrite=True)
    elif spec["how"] == "dask read_parquet + ingest_array":
        A = dd.read_parquet(spec["source"])[spec["features"] + ["label"]].to_dask_array(
            lengths=True)
        X, y = A[:, :-1], A[:, -1]
        with dask.config.set(scheduler="threads", num_workers=2):
            daskauc.ingest_array(X, y, spec["store"], dtype="float32", pos_label=2,
                                 chunk_rows=spec["chunk_rows"], overwrite=True)
    else:
        ds = daskauc.ingest(spec["source"], spec["store"], overwrite=True, **spec["kwargs"])
        out["positive"] = ds.attrs["classes"][1]
        out["shape"] = list(ds.X.shape)
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
out["seconds"] = time.perf_counter() - t
# VmHWM: this process's own peak (ru_maxrss keeps the parent's peak across fork and exec)
with open("/proc/self/status") as f:
    out["peak_mib"] = next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
print(json.dumps(out))
"""


def _child(spec: dict) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], capture_output=True,
                       text=True, env=env, timeout=3600)
    if r.returncode:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _write_inputs(rows: int | None, copies: int) -> tuple[str, str, list[str], int]:
    """covtype as a Parquet directory (4 files a copy) and a CSV file, ``copies`` times."""
    import pandas as pd

    Xtr, ytr, Xte, yte, _ = load_dataset("covtype", shuffle=False)
    X = np.vstack([Xtr, Xte])[:rows]
    y = np.concatenate([ytr, yte])[:rows]
    features = [f"f{j}" for j in range(X.shape[1])]
    df = pd.DataFrame(X.astype(np.float32), columns=features)
    df["label"] = np.where(y > 0, 2, 1).astype(np.int8)  # covtype's types: 2 vs the rest
    pq, csv = os.path.join(WORK, "covtype-parquet"), os.path.join(WORK, "covtype.csv")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(pq)
    step = -(-len(df) // 4)
    for c in range(copies):
        for k in range(4):
            df.iloc[k * step:(k + 1) * step].to_parquet(
                os.path.join(pq, f"part-{c}-{k}.parquet"), row_group_size=50_000, index=False)
        df.to_csv(csv, index=False, mode="a" if c else "w", header=not c)
    return pq, csv, features, len(df) * copies


def _sparse_file(path: str) -> str:
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        for i in range(1000):
            idx = np.sort(rng.choice(np.arange(1, 100_000), 20, replace=False))
            f.write(f"{(-1) ** i} " + " ".join(f"{j}:1" for j in idx) + "\n")
        f.write("+1 5:1 3000000:1\n")
    return path


def _table_runs(n_rows: int | None, copies: int) -> list[dict]:
    pq, csv, features, n = _write_inputs(n_rows, copies)
    size = {"parquet": sum(os.path.getsize(os.path.join(pq, f)) for f in os.listdir(pq)),
            "csv": os.path.getsize(csv)}
    chunk_rows = 310_689  # daskauc's default for 54 float32 features (64 MiB), as the others
    store = os.path.join(WORK, "out.zarr")
    runs = [
        ("daskauc.ingest(Parquet directory)", {"source": pq, "kwargs": {"label": "label"}}),
        ("daskauc.ingest(CSV with a header)", {"source": csv, "kwargs": {"label": "label"}}),
        ("dask read_parquet + to_zarr", {"source": pq, "features": features,
                                         "chunk_rows": chunk_rows}),
        ("dask read_parquet + ingest_array", {"source": pq, "features": features,
                                              "chunk_rows": chunk_rows}),
    ]
    rows = []
    for how, spec in runs:
        out = _child({"how": how, "store": store, **spec})
        shutil.rmtree(store, ignore_errors=True)
        src = "csv" if "CSV" in how else "parquet"
        rows.append({"how": how, "copies": copies, "rows": n, "input MB": size[src] / 1e6,
                     "store MB": n * 54 * 4 / 1e6, "seconds": out["seconds"],
                     "rows/s": n / out["seconds"], "peak MiB": out["peak_mib"],
                     "positive": json.dumps(out.get("positive", "")),
                     "error": out.get("error", "")})
        print(rows[-1], flush=True)
    return rows


def main(argv=None) -> None:
    parser = Parser(__doc__, quick={"rows": 50_000}, seed=None)
    parser.add_argument("--rows", type=int, default=None, help="rows of covtype (default: all)")
    parser.add_argument("--copies", default="1,8",
                        help="comma-separated numbers of copies of the table (default: 1,8)")
    args = parser.parse_args(argv)
    rows = []
    for copies in (int(c) for c in args.copies.split(",")):
        rows += _table_runs(args.rows, copies)
    store = os.path.join(WORK, "out.zarr")
    sparse = _sparse_file(os.path.join(WORK, "wide.svm"))
    out = _child({"how": "sparse", "store": store, "source": sparse, "kwargs": {}})
    sparse_row = {"how": "daskauc.ingest(1,001 rows, largest index 3,000,000)",
                  "seconds": out["seconds"], "peak MiB": out["peak_mib"],
                  "outcome": (out.get("error") or "written")[:400]}
    baseline = _child({"how": "sparse", "store": store, "source": sparse + ".none",
                       "kwargs": {}})
    sparse_row["peak MiB of a process that imports daskauc and fails at once"] = \
        baseline["peak_mib"]
    shutil.rmtree(WORK, ignore_errors=True)
    md = [f"# Ingest: Parquet, CSV and dask.dataframe\n\n`{command('benchmarks.ingest_formats')}`"
          f"\n\ncovtype.binary, {rows[0]['rows'] // rows[0]['copies']:,} rows x 54 features "
          "(float32), label column `label` (2 positive), written `copies` times over "
          "(distinct files). Each row: a fresh process "
          "(imports not timed), alone on the machine (2 cores); peak = its `VmHWM`, imports "
          "included.\n",
          md_table([{k: v for k, v in r.items() if k != "error"} for r in rows],
                   ["how", "copies", "rows", "input MB", "store MB", "seconds", "rows/s",
                    "peak MiB", "positive"]),
          "\n## A sparse file 3,000,000 features wide\n",
          md_table([sparse_row])]
    write_results("ingest_formats", {"table": rows, "sparse": sparse_row}, "\n".join(md),
                  out=args.out)


if __name__ == "__main__":
    main()
