"""The cost of store integrity on the covtype embedding (464,810 x ~1,600 float32, ~3 GB).

Writes the embedding with and without the per-chunk CRC32C checksums (``_config.CHECKSUMS``),
alternating, and measures the write, the open (listing every chunk file against the commit's
record) and a full read pass (Zarr verifying every checksum, daskauc checking every chunk's
presence on the worker that reads it). Run alone: ``python -m benchmarks.integrity``
(LocalCluster 2 workers x 1 thread; about 5 minutes). Writes docs/benchmarks/integrity.*.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

import numpy as np

from benchmarks._harness import CACHE_DIR, Parser, fit_map, load_dataset, md_table, write_results

OUT = os.path.join(CACHE_DIR, "integrity")


def main(argv=None) -> int:
    ap = Parser(__doc__, quick={"landmarks": 200, "repeat": 1})
    ap.add_argument("--landmarks", type=int, default=1600)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)

    from distributed import Client, LocalCluster

    from daskauc import _config
    from daskauc.data import ingest_array, open_dataset
    from daskauc.store.protocol import open_store

    os.makedirs(OUT, exist_ok=True)
    Xtr, ytr, _, _, _ = load_dataset("covtype")
    src = os.path.join(OUT, "covtype-train.zarr")
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="8GiB",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        ingest_array(Xtr.astype(np.float32), ytr, src, overwrite=True)
        scaler, fmap = fit_map(open_dataset(src).X, args.landmarks, landmarks="random",
                               random_state=args.seed)
        rows = []
        for rep in range(args.repeat):
            for checksums in (True, False):
                _config.CHECKSUMS = checksums
                out = os.path.join(OUT, f"emb-{'crc' if checksums else 'plain'}.zarr")
                shutil.rmtree(out, ignore_errors=True)
                client.run(_config.__setattr__, "CHECKSUMS", checksums)
                t = time.perf_counter()
                emb = fmap.write_embedding(src, out, scaler=scaler, overwrite=True)
                write = time.perf_counter() - t
                t = time.perf_counter()
                open_store(out)  # the chunk listing against the commit's record
                open_verified = time.perf_counter() - t
                t = time.perf_counter()
                open_store(out, verify=False)
                open_plain = time.perf_counter() - t
                X = open_dataset(out).X
                t = time.perf_counter()
                X.sum(axis=0).compute()
                read = time.perf_counter() - t
                n_chunks = len(open_store(out).attrs["daskauc_chunks"])
                rows.append({"repeat": rep, "checksums": checksums, "write_s": write,
                             "open_verified_s": open_verified, "open_unverified_s": open_plain,
                             "read_pass_s": read, "gbytes": emb.X.nbytes / 1e9,
                             "chunks": n_chunks})
                print(rows[-1], flush=True)
        _config.CHECKSUMS = True
    best = {c: {k: min(r[k] for r in rows if r["checksums"] == c)
                for k in ("write_s", "open_verified_s", "open_unverified_s", "read_pass_s")}
            for c in (True, False)}
    on, off = best[True], best[False]
    summary = {
        "write_overhead": on["write_s"] / off["write_s"] - 1,
        "open_check_over_write": (on["open_verified_s"] - on["open_unverified_s"]) / on["write_s"],
        "read_overhead": on["read_pass_s"] / off["read_pass_s"] - 1,
    }
    gb = rows[0]["gbytes"]
    md = [
        "# Store integrity: its cost on the covtype embedding", "",
        f"covtype training rows (464,810) embedded with {args.landmarks} random landmarks: "
        f"{gb:.2f} GB of float32 in {rows[0]['chunks']} chunk files (X and y), uncompressed. "
        "LocalCluster 2 workers x 1 thread; best of "
        f"{args.repeat} alternating runs each; nothing else ran on the machine. "
        "Command: `python -m benchmarks.integrity`.", "",
        md_table([{"checksums": "CRC32C per chunk" if c else "none", **best[c]}
                  for c in (True, False)],
                 ["checksums", "write_s", "open_verified_s", "open_unverified_s",
                  "read_pass_s"]), "",
        f"- write: checksums cost {100 * summary['write_overhead']:+.1f}% of the write "
        "(the target was under 5%);",
        f"- open: checking every chunk file against the commit's record costs "
        f"{100 * summary['open_check_over_write']:.2f}% of the write;",
        f"- a full read pass verifying every checksum: {100 * summary['read_overhead']:+.1f}% "
        "(both rows check each chunk's presence on the reading worker).", "",
        "All runs:", "", md_table(rows), "",
    ]
    write_results("integrity", {"runs": rows, "best": {str(k): v for k, v in best.items()},
                                "summary": summary}, "\n".join(md), out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
