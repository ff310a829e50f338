"""Compile numba's kernels ahead of the first fit: ``daskauc warmup``.

Every kernel is compiled with ``cache=True``: the first process that calls it with a new type
signature compiles it (0.1-1 s a kernel) and writes the machine code to numba's on-disk cache
(``__pycache__`` beside the kernel's file, else the user's cache directory, or
``NUMBA_CACHE_DIR``); later processes load it in milliseconds. The cache starts empty after an
installation, and a kernel file's entries are dropped whenever the file changes (numba keys
them on its modification time and size), so without a warm-up the first fits after either pay
the compilation: 5-10 s for a preset on spambase, on each new machine or container.

:func:`warm_up` runs, on small data, what the default fits run: the shipped spambase file
ingested, split and standardized; every public estimator and transformer with its default
arguments (``KernelAUC`` with small grids and both routes: its default search is the same
kernels many more times) on numpy and on a dataset store (read-only chunks are another type
signature), and those that read sparse rows on a CSR matrix and a sparse store; the k-means
Nystroem embedding written to a store and a model fitted from it;
decision functions and the exact AUC. It takes seconds once the cache is populated, and
returns the seconds of each step.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import warnings

import dask.array as da
import numpy as np

#: rows of the small fits (several chunks of CHUNK_ROWS, both classes in each)
ROWS, CHUNK_ROWS = 300, 100

#: KernelAUC's default search with small grids: the kernels of the search and the width walk
_KERNEL_SMALL = dict(n_centres=64, selection_centres=16, cv=2, width_rows=300,
                     gamma_grid=[0.5, 1.0], lam_grid=[1e-2, 1e-4], random_state=0)


def _estimators() -> dict:
    """name -> a constructor of every registered estimator with its default arguments
    (``random_state=0`` where it has one), KernelAUC with the small settings of
    :data:`_KERNEL_SMALL` on each route and loss instead (its default search is the same
    kernels many more times)."""
    from .._registry import MODEL_CLASSES
    from .kernel import KernelAUC

    out = {}
    for name, cls in sorted(MODEL_CLASSES.items()):
        if not hasattr(cls, "decision_function") or cls is KernelAUC:
            continue
        seeded = "random_state" in cls().get_params()
        out[name] = (lambda cls=cls: cls(random_state=0)) if seeded else cls
    for solver in ("kernel", "embedding"):
        out[f"KernelAUC(solver={solver!r})"] = (
            lambda solver=solver: KernelAUC(solver=solver, **_KERNEL_SMALL))
    out["KernelAUC(loss='least_squares')"] = (
        lambda: KernelAUC(loss="least_squares", solver="kernel", **_KERNEL_SMALL))
    return out


def _transformers() -> dict:
    """name -> a constructor of every registered transformer (``random_state=0`` where it has
    one)."""
    from .._registry import MODEL_CLASSES

    out = {}
    for name, cls in sorted(MODEL_CLASSES.items()):
        if hasattr(cls, "decision_function"):
            continue
        seeded = "random_state" in cls().get_params()
        out[name] = (lambda cls=cls: cls(random_state=0)) if seeded else cls
    return out


def warm_up(workdir: str | None = None, *, only: tuple[str, ...] | None = None
            ) -> dict[str, float]:
    """Run what the default fits run on small data, so that numba compiles (or loads) every
    kernel they use; returns the seconds of each step.

    ``workdir``: where the small dataset stores go (a temporary directory, removed, by
    default); ``only``: the names of the estimators and transformers to fit (all by default;
    the ingest, split and embedding steps always run). Runs on the current Dask scheduler.
    """
    import scipy.sparse

    from ..data.default import default_dataset_path
    from ..data.ingest import ingest, ingest_array, write_dataset
    from ..data.scale import StandardScaler
    from ..data.split import split_store
    from ..embed import KMeansNystroem
    from ..metrics import roc_auc
    from ..store.dataset import open_dataset
    from .pairwise_sgd import PairwiseHingeSGD

    seconds: dict[str, float] = {}

    def step(name, fn):
        tic = time.perf_counter()
        out = fn()
        seconds[name] = time.perf_counter() - tic
        return out

    log = logging.getLogger("daskauc")
    level = log.level
    log.setLevel(max(logging.WARNING, log.getEffectiveLevel()))  # the small fits' log lines
    try:
        with tempfile.TemporaryDirectory(prefix="daskauc-warmup-", dir=workdir) as tmp, \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = lambda name: os.path.join(tmp, name)  # noqa: E731
            step("ingest", lambda: ingest(default_dataset_path(), p("all.zarr"), shuffle=True,
                                          random_state=0, chunk_rows=1000))
            step("split", lambda: split_store(p("all.zarr"), p("train.zarr"), p("test.zarr"),
                                              random_state=0))
            train = open_dataset(p("train.zarr"))
            scaler = step("standardize", lambda: StandardScaler().fit(train.X))
            X = np.asarray(scaler.transform(train.X[:ROWS]).compute(), dtype=np.float64)
            y = np.asarray(train.y[:ROWS].compute())
            step("small store", lambda: write_dataset(
                da.from_array(X, chunks=(CHUNK_ROWS, -1)), da.from_array(y, chunks=CHUNK_ROWS),
                p("small.zarr")))
            fmap = KMeansNystroem(n_components=64, random_state=0)
            step("embedding store", lambda: fmap.fit(X).write_embedding(
                p("small.zarr"), p("emb.zarr")))
            emb = open_dataset(p("emb.zarr"))
            step("fit on the embedding store",
                 lambda: PairwiseHingeSGD(random_state=0).fit(emb.X, emb.y).decision_function(
                     emb.X).compute())
            # sparse rows: in memory (int32 row pointers) and from a sparse store (int64)
            Xs = scipy.sparse.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0))
            step("sparse store", lambda: ingest_array(Xs, y, p("sparse.zarr"),
                                                      chunk_rows=CHUNK_ROWS))
            transformers = _transformers()
            for name, make in {**transformers, **_estimators()}.items():
                if only is not None and name not in only:
                    continue
                kinds = [("numpy", (X, y)), ("store", (p("small.zarr"), None))]
                if getattr(type(make()), "_sparse_rows", False):
                    kinds += [("sparse", (Xs, y)), ("sparse store", (p("sparse.zarr"), None))]
                for kind, (Xf, yf) in kinds:
                    def fit(make=make, Xf=Xf, yf=yf, name=name):
                        model = make()
                        if name in transformers:
                            model.fit(Xf)
                            return model.transform(X)
                        model.fit(Xf, yf)
                        return roc_auc(y, np.asarray(model.decision_function(X)))

                    step(f"{name} ({kind})", fit)
    finally:
        log.setLevel(level)
    return seconds
