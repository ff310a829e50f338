"""The walk of ``X`` through an estimator's ``fit``: which daskauc modules run (on the client
and the threaded scheduler's threads), which calls climb back up the floors of
docs/architecture.md (a callee on a higher floor than its caller, or beside it in another
unit), and which estimators are constructed inside the fit.

    python -m tools.fit_walk KernelAUC '{"n_centres": 256}'
    python -m tools.fit_walk KernelAUC '{"n_centres": 256}' --store   # X a dataset store

It also counts what a fit repeats: the times a store is opened (``_store.open_store``), the
row draws (``_arrays.stratified_subsample`` and ``stratified_split``: a sample of rows drawn
by class) and the computes that bring labels to the client (a ``_compute.compute`` of a 1-D
integer dask array: the labels, their distinct values or their class counts).

A call up from the engine into a function it was handed (an epoch's chunk step) counts as a
climb too: read the edges, not only their number.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import pathlib
import sys
import threading
import warnings

import dask.array as da
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _floors():
    spec = importlib.util.spec_from_file_location("test_architecture",
                                                  ROOT / "tests" / "test_architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def walk(name: str, params: dict, n: int = 3000, d: int = 8, store: str | None = None) -> dict:
    import dask
    from sklearn.base import BaseEstimator

    import daskauc

    floors = _floors()
    package = str(pathlib.Path(daskauc.__file__).resolve().parent)

    def module_of(filename: str) -> str:
        parts = list(pathlib.Path(filename).relative_to(pathlib.Path(package).parent)
                     .with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    files, edges, built = set(), set(), []
    counts = collections.Counter()

    def count(callee: str, frame) -> None:
        fn = frame.f_code.co_name
        if callee == "daskauc.store.protocol" and fn == "open_store":
            counts["store_opens"] += 1
        elif callee == "daskauc._arrays" and fn in ("stratified_subsample", "stratified_split"):
            counts["row_draws"] += 1
        elif callee == "daskauc._compute" and fn == "compute":
            args = frame.f_locals.get("collections") or ()
            if any(isinstance(a, da.Array) and a.ndim == 1 and a.dtype.kind in "iub"
                   for a in args):
                counts["label_computes"] += 1

    def profile(frame, event, arg):
        if event != "call" or not frame.f_code.co_filename.startswith(package):
            return
        callee = module_of(frame.f_code.co_filename)
        files.add(callee)
        count(callee, frame)
        back = frame.f_back
        while back is not None and not back.f_code.co_filename.startswith(package):
            back = back.f_back
        if back is None:
            return
        caller = module_of(back.f_code.co_filename)
        if caller != callee:
            edges.add((caller, callee))
        if frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"),
                                                             BaseEstimator):
            built.append(type(frame.f_locals["self"]).__name__)

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.standard_normal(n) > 0, 1, -1)
    est = getattr(daskauc, name)(random_state=0, **params)
    if store is not None:
        daskauc.ingest_array(X, y, store, overwrite=True, chunk_rows=max(1, n // 4))
    with warnings.catch_warnings(), dask.config.set(scheduler="threads"):
        warnings.simplefilter("ignore")
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            if store is None:
                est.fit(X, y)
            else:
                est.fit(store)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    climbs = []
    for a, b in sorted(edges):
        fa, fb = floors.floor(a), floors.floor(b)
        if fb > fa or (fb == fa and fa > 0 and floors.unit(a) != floors.unit(b)):
            climbs.append(f"{a} -> {b}")
    return {"estimator": name, "params": params, "input": "store" if store else "numpy",
            "files": len(files), "store_opens": counts["store_opens"],
            "row_draws": counts["row_draws"], "label_computes": counts["label_computes"],
            "climbs": climbs,
            "estimators_built_inside_fit": dict(collections.Counter(built)),
            "modules": sorted(files)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("estimator")
    ap.add_argument("params", nargs="?", default="{}", help="constructor parameters as JSON")
    ap.add_argument("--store", action="store_true",
                    help="fit on a dataset store path (written first) instead of numpy")
    args = ap.parse_args(argv)
    if args.store:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            out = walk(args.estimator, json.loads(args.params), store=f"{tmp}/walk.zarr")
    else:
        out = walk(args.estimator, json.loads(args.params))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
