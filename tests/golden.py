"""Golden fits: a fixed set of fits whose fitted arrays, scores and selections were recorded
from main before the floor-plan renovation (issue 26), so that moving code can be checked to
change nothing a user sees.

``python tests/golden.py --record`` writes ``tests/golden/<scheduler>.npz`` (run it only when a
change of results is intended, and say why in the commit); ``tests/test_golden.py`` compares.

Every public estimator and transformer is fitted with its defaults (``random_state=0`` where it
has one) on a numpy array, and with a non-default setting on a dask array and on a Zarr store;
on the 2-worker LocalCluster, on a store (with the exceptions below, for the suite's time).
"""

from __future__ import annotations

import numbers
import pathlib
import sys

import numpy as np

GOLDEN_DIR = pathlib.Path(__file__).resolve().parent / "golden"
N_ROWS, N_FEATURES, CHUNK_ROWS = 360, 5, 90

#: (estimator name[:variant], non-default parameters). Both add ``random_state=0`` when the
#: estimator has one; a variant (``name:variant``) has no default case of its own.
ESTIMATORS = {
    "PairwiseHingeSGD": dict(lam=1e-4, n_epochs=3, average=False, n_chains=2),
    "RankSVM": dict(C=0.5, precondition=False),
    "OAM": dict(update="gra", n_epochs=2, average=True, n_chains=2),
    "UnivariateAUC": dict(loss="square", n_epochs=3, n_chains=2),
    "NSAUC": dict(n_landmarks=48, n_epochs=4, landmarks="random"),
    "NSVMSGD2": dict(n_landmarks=32, n_epochs=3, standardize=False),
    "NBAUC": dict(C=1.0, n_landmarks=48),
    "RFAUC": dict(C=1.0, n_landmarks=48),
    "KernelRankSVM": dict(C=1.0),
    "NOAM": dict(n_landmarks=48, n_epochs=2),
    "NSOLAM": dict(n_landmarks=48, n_epochs=4),
    "KernelAUC": dict(n_centres=64, gamma=0.2, lam=1e-4, centres="kmeans"),
    "KernelAUC:walk": dict(n_centres=64, selection_centres=16, cv=2, width_rows=300,
                           gamma_grid=[0.5, 1.0, 2.0], lam_grid=[1e-2, 1e-4]),
    "KernelAUC:least_squares": dict(loss="least_squares", n_centres=64, gamma=0.2, lam=1e-3,
                                    solver="kernel"),
    "KernelAUC:embedding": dict(n_centres=48, gamma="rule", lam=1e-4, solver="embedding"),
    "LSAUC": dict(lam=0.1),
    "TwoPassAUC": dict(schedule="invsqrt", n_epochs=3, n_chains=2),
    "OPAUC": dict(n_epochs=2),
    "SOLAM": dict(zeta=1.0, n_epochs=4, n_chains=2),
    "SPAM": dict(l1=1e-3, average=True, n_epochs=5),
    "SPDAM": dict(batch_size=4, n_epochs=3),
    "MiniBatchKMeans": dict(n_clusters=6, n_epochs=2),
    "KMeansNystroem": dict(n_components=24, landmarks="random"),
    "RandomFourierFeatures": dict(n_components=32, gamma=0.3),
    "StandardScaler": dict(with_std=False),
    "MinMaxScaler": dict(feature_range=(0, 1), clip=True),
}

#: on the cluster these run their non-default setting: with their defaults they choose C, or
#: gamma and lam, by dozens of small fits (checked threaded), each compute a round trip
#: to the workers (the suite's time); the fixed-C / fixed-gamma fit takes the same route
CLUSTER_NON_DEFAULT = {"KernelAUC", "RankSVM", "RFAUC"}

#: presets not fitted again on the cluster: each is a scaler, a k-means Nystroem map and a
#: solver that are each fitted there already (NSAUC's map and scaler; RankSVM, OAM, SOLAM and
#: PairwiseHingeSGD), and together they took 17 s of the suite
CLUSTER_SKIP = {"NBAUC", "KernelRankSVM", "NSVMSGD2", "NSOLAM", "NOAM"}

#: rows of the default (numpy) case, where not all: KernelAUC's default search fits
#: 3 folds x 9 widths x about 13 lambdas (26 s on 360 rows, 10 s on 150)
DEFAULT_ROWS = {"KernelAUC": 150}

#: attribute names that hold timings, measured machine rates or paths, not results
SKIP_KEYS = ("time", "timing", "seconds", "elapsed", "rate", "wall", "client", "store", "path",
             "route_costs", "memory", "input_sha256")


def make_data():
    rng = np.random.default_rng(20261126)
    X = rng.standard_normal((N_ROWS, N_FEATURES))
    y = np.where(X[:, 0] * X[:, 1] + 0.5 * X[:, 2] + 0.4 * rng.standard_normal(N_ROWS) > 0,
                 1, -1)
    X_test = rng.standard_normal((120, N_FEATURES))
    return X, y, X_test


def make_estimator(name: str, non_default: bool):
    import inspect

    import daskauc

    cls = getattr(daskauc, name.split(":")[0])
    params = dict(ESTIMATORS[name]) if non_default else {}
    if "random_state" in inspect.signature(cls).parameters:
        params["random_state"] = 0
    return cls(**params)


def _flatten(prefix: str, value, out: dict) -> None:
    if any(s in prefix.lower() for s in SKIP_KEYS):
        return
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufc":
        out[prefix] = value
    elif isinstance(value, (bool, np.bool_, numbers.Number)) and not isinstance(value, complex):
        out[prefix] = np.asarray(value)
    elif isinstance(value, str):
        out[prefix] = np.asarray(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, (list, tuple)) and len(value) <= 1000:
        for i, v in enumerate(value):
            _flatten(f"{prefix}[{i}]", v, out)
    elif hasattr(value, "__dict__") and type(value).__module__.startswith("daskauc") \
            and not callable(value):
        for k, v in vars(value).items():
            if not k.startswith("_"):
                _flatten(f"{prefix}.{k}", v, out)


def fitted_values(est, X_test) -> dict:
    """Every public fitted attribute (numbers, arrays, strings, recursively through dicts,
    lists and daskauc result objects), and the model's outputs on ``X_test``."""
    out: dict = {}
    for k, v in vars(est).items():
        if k.endswith("_") and not k.startswith("_"):
            _flatten(k, v, out)
    for method in ("decision_function", "transform", "predict"):
        if hasattr(est, method):
            try:
                r = getattr(est, method)(X_test)
            except Exception as e:  # a transformer's predict, say: record that it refused
                out[method] = np.asarray(type(e).__name__)
            else:
                out[method] = np.asarray(r)
            break
    return out


def cases(scheduler: str):
    """(case name, estimator name, non_default, input kind) for ``scheduler``."""
    for name in ESTIMATORS:
        if scheduler == "threads":
            if ":" not in name:
                yield f"{name}/default/numpy", name, False, "numpy"
            yield f"{name}/set/dask", name, True, "dask"
            yield f"{name}/set/store", name, True, "store"
        elif ":" not in name and name not in CLUSTER_SKIP:
            non_default = name in CLUSTER_NON_DEFAULT
            yield f"{name}/{'set' if non_default else 'default'}/store", name, non_default, \
                "store"


#: machine rates the cost model sees during the golden fits. KernelAUC(solver="auto") takes
#: the route its cost model finds cheaper from rates measured while it runs, so on a loaded
#: machine the same call can take the other route (seen: load 7 on 2 cores); the golden
#: fits see these rates (this machine's, idle) and so always the recorded route.
MACHINE_RATES = {"tile_flops": 1.2e11, "gemm32_flops": 1.25e11, "gemm64_flops": 6.0e10,
                 "read_bytes": 2.4e10}


def run_cases(scheduler: str, tmp_dir: pathlib.Path) -> dict:
    """{case name: {value name: array}} for every case, on the current dask scheduler.

    BLAS runs one thread throughout: daskauc limits BLAS per task and lets concurrent
    requests share one process-wide setting (``_config.blas_limit``), so with the default
    threads a product's thread count, and in float64 its last bits, depended on which tasks
    happened to overlap (seen: KernelRankSVM differing by 1e-12 after a long suite)."""
    import importlib
    from unittest import mock

    from daskauc import _config

    # the cost model's module before and after the renovation (the recording ran on both)
    for name in ("daskauc.engine.cost", "daskauc.solvers.cost"):
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        break
    with mock.patch(f"{name}.machine_rates", return_value=MACHINE_RATES), \
            _config.blas_limit(1):
        return _run_cases(scheduler, tmp_dir)


def _run_cases(scheduler: str, tmp_dir: pathlib.Path) -> dict:
    import warnings

    import dask.array as da

    import daskauc

    X, y, X_test = make_data()
    store = str(tmp_dir / "golden.zarr")
    if not pathlib.Path(store).exists():
        daskauc.write_dataset(da.from_array(X, chunks=(CHUNK_ROWS, N_FEATURES)),
                              da.from_array(y, chunks=CHUNK_ROWS), store)
    inputs = {
        "numpy": lambda: (X, y),
        "dask": lambda: (da.from_array(X, chunks=(CHUNK_ROWS, N_FEATURES)),
                         da.from_array(y, chunks=CHUNK_ROWS)),
        "store": lambda: (store, None),
    }
    results = {}
    for case, name, non_default, kind in cases(scheduler):
        est = make_estimator(name, non_default)
        Xf, yf = inputs[kind]()
        if kind == "numpy" and not non_default and name in DEFAULT_ROWS:
            Xf, yf = Xf[:DEFAULT_ROWS[name]], yf[:DEFAULT_ROWS[name]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if yf is None:
                est.fit(Xf)
            else:
                est.fit(Xf, yf)
            results[case] = condensed(fitted_values(est, X_test))
    return results


#: arrays larger than this are kept as a digest (exact) and a strided sample (tolerant)
MAX_STORED = 1024


def condensed(values: dict) -> dict:
    """``values`` with each large array replaced by its SHA-256 (of dtype, shape and bytes),
    a strided sample of MAX_STORED elements and its float64 sum; the recording stays small."""
    import hashlib

    out = {}
    for key, value in values.items():
        value = np.asarray(value)
        if value.size <= MAX_STORED or value.dtype.kind not in "biufc":
            out[key] = value
            continue
        digest = hashlib.sha256(f"{value.dtype.str}{value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
        out[f"{key}#sha256"] = np.asarray(digest.hexdigest())
        flat = value.ravel()
        out[f"{key}#sample"] = flat[:: -(-flat.size // MAX_STORED)]
        out[f"{key}#sum"] = np.asarray(flat.sum(dtype=np.float64))
    return out


def save(results: dict, path: pathlib.Path) -> None:
    flat = {f"{case}::{key}": value for case, values in results.items()
            for key, value in condensed(values).items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **flat)


def load(path: pathlib.Path) -> dict:
    results: dict = {}
    with np.load(path, allow_pickle=False) as f:
        for flat_key in f.files:
            case, key = flat_key.split("::", 1)
            results.setdefault(case, {})[key] = f[flat_key]
    return results


def environment() -> dict:
    """What bit-identity depends on besides the code: library versions, the BLAS build and the
    kernels it picked for this CPU, and the CPU itself (its model and instruction sets; a
    virtual machine's model name alone, "AMD EPYC", does not tell two generations apart)."""
    import hashlib
    import platform

    import dask
    import numba
    import scipy
    import scipy.linalg  # noqa: F401 - loads scipy's BLAS, so that threadpoolctl sees it
    from threadpoolctl import threadpool_info

    cpu = {}
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "cpu family", "model") and key not in cpu:
                cpu[key] = value.strip()
            elif key == "flags" and key not in cpu:
                cpu[key] = hashlib.sha256(" ".join(sorted(value.split())).encode()).hexdigest()
    except OSError:
        pass
    blas = sorted(f"{d.get('internal_api')} {d.get('version')} {d.get('architecture')}"
                  for d in threadpool_info() if d.get("user_api") == "blas")
    return {"numpy": np.__version__, "scipy": scipy.__version__, "numba": numba.__version__,
            "dask": dask.__version__, "python": platform.python_version(), "cpu": cpu,
            "blas": blas}


def record() -> None:
    import json
    import tempfile

    import dask
    from distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory() as tmp:
        with dask.config.set(scheduler="threads"):
            save(run_cases("threads", pathlib.Path(tmp)), GOLDEN_DIR / "threads.npz")
        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                          processes=True, memory_limit="2GiB") as cluster, \
                Client(cluster) as client, dask.config.set(scheduler=client):
            save(run_cases("cluster", pathlib.Path(tmp)), GOLDEN_DIR / "cluster.npz")
    (GOLDEN_DIR / "environment.json").write_text(json.dumps(environment(), indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/golden.py --record")
    record()
