"""Small tools shared by several test modules (not oracles: those live in ``reference``)."""

import contextlib

import numpy as np
from dask.callbacks import Callback

from daskauc.store.write import create_array, writing_store


def model_classes(having=lambda cls: True) -> dict[str, type]:
    """The registered model classes (``daskauc._registry.MODEL_CLASSES``) for which
    ``having(cls)`` holds, by name in sorted order: what a test that must cover every class
    with some property parametrizes over."""
    import daskauc  # noqa: F401 - every class registered
    from daskauc._registry import MODEL_CLASSES

    return {name: cls for name, cls in sorted(MODEL_CLASSES.items()) if having(cls)}


def solvers(having=lambda entry: True) -> dict[str, object]:
    """The registered solvers (``daskauc._registry.SOLVERS``, entries) for which
    ``having(entry)`` holds, by name in sorted order."""
    import daskauc.solvers  # noqa: F401 - every solver registered
    from daskauc._registry import SOLVERS

    return {name: e for name, e in sorted(SOLVERS.items()) if having(e)}


def assert_covered(registered, cases, excluded, where: str) -> None:
    """Every name of ``registered`` (the classes or solvers with a property, read from the
    registries) has its cases in ``cases`` or a reason in ``excluded`` (name -> why), not
    both, and neither names anything else: a newly registered class or solver, or one that
    lost the property, fails here by name instead of silently going untested."""
    registered, cases, excluded = set(registered), set(cases), dict(excluded)
    missing = sorted(registered - cases - set(excluded))
    assert missing == [], f"{where}: give {missing} a case, or a reason for having none"
    unknown = sorted((cases | set(excluded)) - registered)
    assert unknown == [], f"{where}: {unknown} are not registered with the property"
    assert sorted(cases & set(excluded)) == [], f"{where}: both a case and a reason"
    vague = sorted(name for name, why in excluded.items() if len(str(why).split()) < 4)
    assert vague == [], f"{where}: say why {vague} have no case"


class ComputeCounter(Callback):
    """Counts dask computes (one ``_start`` per compute call)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def _start(self, dsk):
        self.n += 1


def dataset_store(path, X, y, rows, compressors="auto"):
    """A daskauc dataset store of ``X``, ``y`` with ``rows`` rows per Zarr chunk (compressed
    by default; ``compressors=None`` stores plain bytes, which daskauc reads without Zarr)."""
    with writing_store(path, kind="dataset", attrs={"source": "test"}) as g:
        zX = create_array(g, "X", shape=X.shape, chunks=(rows, X.shape[1]), dtype=X.dtype,
                          compressors=compressors)
        zX[...] = X
        zy = create_array(g, "y", shape=y.shape, chunks=(rows,), dtype=np.int8,
                          compressors=compressors)
        zy[...] = y.astype(np.int8)
    return str(path)


class ExternalCluster:
    """A real ``dask scheduler`` and ``dask worker`` processes, started in ``cwd`` (so a path
    relative to the test's directory does not exist for them) and killed by pid."""

    def __init__(self, tmp_path, cwd, n_workers: int = 1, memory_limit: str = "2GiB"):
        import os
        import subprocess
        import sys
        import time

        self.tmp_path, self.cwd = tmp_path, cwd
        os.makedirs(tmp_path, exist_ok=True)
        os.makedirs(cwd, exist_ok=True)
        self.scheduler_file = str(tmp_path / "scheduler.json")
        env = {**os.environ, "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED": "error"}
        dask_cli = [sys.executable, "-m", "dask"]
        self.scheduler = subprocess.Popen(
            [*dask_cli, "scheduler", "--scheduler-file", self.scheduler_file, "--port", "0",
             "--no-dashboard"], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while not os.path.exists(self.scheduler_file):
            if time.time() > deadline or self.scheduler.poll() is not None:
                raise RuntimeError("the dask scheduler did not start")
            time.sleep(0.1)
        self._worker_cmd = [
            *dask_cli, "worker", "--scheduler-file", self.scheduler_file, "--nthreads", "1",
            "--nworkers", "1", "--no-nanny", "--no-dashboard", "--memory-limit", memory_limit]
        self._env = env
        self.workers = [self._start_worker(i) for i in range(n_workers)]
        from distributed import Client

        self.client = Client(scheduler_file=self.scheduler_file, set_as_default=False)
        self.client.wait_for_workers(n_workers, timeout=60)
        self.address = self.client.scheduler.address

    def _start_worker(self, i: int):
        import subprocess

        return subprocess.Popen(
            [*self._worker_cmd, "--local-directory", str(self.tmp_path / f"worker-{i}")],
            cwd=self.cwd, env=self._env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def restart_worker(self, i: int) -> None:
        """Start worker ``i`` again (after it was killed) and wait until it has joined."""
        import time

        if self.workers[i].poll() is None:
            return
        self.workers[i] = self._start_worker(i)
        deadline = time.time() + 60
        while len(self.client.scheduler_info(n_workers=-1)["workers"]) < len(self.workers):
            if time.time() > deadline:
                raise RuntimeError("the restarted worker did not join")
            time.sleep(0.05)

    def kill_scheduler(self) -> None:
        import signal

        self.scheduler.send_signal(signal.SIGKILL)
        self.scheduler.wait()

    def close(self) -> None:
        import signal

        self.client.close(timeout=5)
        for p in [*self.workers, self.scheduler]:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()


def damaged_parquet(table, path, column: str) -> str:
    """``table`` (pyarrow) written to ``path`` with page checksums (as Spark writes them),
    plain and uncompressed, then one bit of ``column``'s data page flipped (its last value:
    the footer untouched, so the file opens and, unchecked, reads one wrong value)."""
    import pyarrow.parquet as pq

    pq.write_table(table, path, write_page_checksum=True, compression="none",
                   use_dictionary=False)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(
        table.schema.get_field_index(column))
    end = chunk.data_page_offset + chunk.total_compressed_size
    with open(path, "r+b") as f:
        f.seek(end - 1)
        last = f.read(1)[0]
        f.seek(end - 1)
        f.write(bytes([last ^ 1]))
    return str(path)


@contextlib.contextmanager
def no_dense_rows(max_cells: int = 4096):
    """Fail if a sparse matrix of more than ``max_cells`` cells is made dense inside the block
    (``toarray``, ``todense``, ``.A``, ``np.asarray`` through them): the sparse path must never
    hold rows x features. Small products (a d-vector, a K x K block) stay allowed."""
    import scipy.sparse

    classes = {c for name in dir(scipy.sparse) for c in
               getattr(getattr(scipy.sparse, name), "__mro__", ())
               if c.__module__.startswith("scipy.sparse")}
    originals = []

    def guarded(method, what):
        def wrapper(self, *args, **kwargs):
            if self.shape[0] * self.shape[1] > max_cells:
                raise AssertionError(f"{what} of a {self.shape} sparse matrix on the sparse path")
            return method(self, *args, **kwargs)
        return wrapper

    for cls in classes:
        for what in ("toarray", "todense", "__array__"):
            if what in cls.__dict__:
                originals.append((cls, what, cls.__dict__[what]))
                setattr(cls, what, guarded(cls.__dict__[what], what))
    try:
        yield
    finally:
        for cls, what, method in originals:
            setattr(cls, what, method)
