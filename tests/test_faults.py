"""The fault matrix: every solver family x every fault gives the same result as without the
fault, or a clear error naming the problem; never a silently different result or a lost model.

Families: the NSAUC chain, a least-squares chain (SPAM), OAM, Newton (RankSVM), the LSAUC pass,
k-means and the embedding write; every registered solver is one of them or says why not
(``NOT_A_FAMILY``), and has its task keys tested. Faults: a worker SIGKILLed mid-run, the
scheduler lost, a missing chunk, a truncated chunk, a concurrent writer, a tampered model and
a relative path with workers started in another directory; a killed writing process is covered by
tests/test_checkpoint.py (fits) and here (the embedding write). Workers and schedulers are real
processes (``dask scheduler`` / ``dask worker``), killed by pid. The heavy version, on larger
data, is ``python -m tools.fault_matrix``.
"""

import os
import signal
import subprocess
import sys
import threading
import time

import dask
import numpy as np
import pytest
from helpers import ExternalCluster, assert_covered, dataset_store, solvers

from daskauc import (
    LSAUC,
    NSAUC,
    OAM,
    OPAUC,
    SOLAM,
    SPAM,
    SPDAM,
    KernelAUC,
    KMeansNystroem,
    MiniBatchKMeans,
    ModelFileError,
    PairwiseHingeSGD,
    RankSVM,
    StoreIntegrityError,
    TwoPassAUC,
    UnivariateAUC,
    load_model,
    save_model,
)
from daskauc.data import open_dataset

#: the matrix's solver families, by the registered solver each fits with: the family's name
#: and a quick estimator on that solver
FAMILY_OF_SOLVER = {
    "pairwise_hinge_sgd": ("nsauc", lambda: PairwiseHingeSGD(n_epochs=2, random_state=0)),
    "spam": ("spam", lambda: SPAM(n_epochs=2, random_state=0)),
    "oam": ("oam", lambda: OAM(n_epochs=2, random_state=0)),
    "prsvm_newton": ("newton", lambda: RankSVM(C=1.0)),
    "lsauc": ("lsauc", LSAUC),
}
_LS_CHAIN = ("a stochastic least-squares chain as spam's (the same epoch driver, store reads "
             "and model writes): spam stands for it; its task keys are in KEY_FAMILIES")
_KERNEL = ("KernelAUC (its route, centres and width search) is no family of the matrix yet: "
           "tools/fault_matrix.CLASS_OF needs its class first; its task keys are in "
           "KEY_FAMILIES")
#: registered solvers that are no family of the matrix, and why
NOT_A_FAMILY = {
    "twopass_auc": _LS_CHAIN, "opauc": _LS_CHAIN, "solam": _LS_CHAIN, "spdam": _LS_CHAIN,
    "univariate_sgd": "a stochastic chain over the epoch driver, store reads and model writes "
                      "of nsauc, oam and spam, which stand for it; its task keys are in "
                      "KEY_FAMILIES",
    "kernel_pairwise_newton": _KERNEL, "kernel_lsauc": _KERNEL,
}
REGISTERED = solvers()
ESTIMATORS = {family: make for name, (family, make) in FAMILY_OF_SOLVER.items()
              if name in REGISTERED}
ESTIMATORS["kmeans"] = lambda: MiniBatchKMeans(6, n_epochs=2, batch_size=500, random_state=0)
FAMILIES = [*ESTIMATORS, "embedding"]  # k-means and the embedding write: no solver


def _embed(path, out=None):
    fmap = KMeansNystroem(20, landmarks="random", random_state=0).fit(open_dataset(path).X)
    out = out or os.path.join(os.path.dirname(path), f"emb-{time.monotonic_ns()}.zarr")
    return fmap.write_embedding(path, out).X.compute()


def run_family(family, store):
    """The family's result on ``store``: coefficients, centres or the embedding's rows."""
    if family == "embedding":
        return _embed(store)
    if family == "kmeans":
        return ESTIMATORS[family]().fit(open_dataset(store).X).cluster_centers_
    return ESTIMATORS[family]().fit(store).coef_


def fit_and_write(family, store, out):
    """The family's run writing its output (a model, or the embedding store) to ``out``."""
    if family == "embedding":
        return _embed(store, out)
    X = open_dataset(store).X if family == "kmeans" else store
    save_model(ESTIMATORS[family]().fit(X), out)


def read_output(family, out):
    if family == "embedding":
        return open_dataset(out).X.compute()
    model = load_model(out)
    return model.cluster_centers_ if family == "kmeans" else model.coef_


#: rows of the matrix's dataset; tools/fault_matrix.py runs the same tests on more
ROWS = int(os.environ.get("DASKAUC_FAULT_ROWS", "6000"))


def _data(n=ROWS, d=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(X[:, 0] + X[:, 1] ** 2 + rng.normal(size=n) > 1, 1, -1).astype(np.int8)
    return X, y


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Each family's result on the intact store, threaded scheduler."""
    root = tmp_path_factory.mktemp("faults")
    X, y = _data()
    store = dataset_store(root / "ds.zarr", X, y, rows=max(500, ROWS // 12))
    results, seconds = {}, {}
    with dask.config.set(scheduler="threads"):
        for name in FAMILIES:
            t = time.perf_counter()
            fit_and_write(name, store, str(root / f"ref-{name}.zarr"))
            seconds[name] = time.perf_counter() - t
            results[name] = read_output(name, str(root / f"ref-{name}.zarr"))
    return root, store, results, seconds


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two real worker processes started in a directory of their own."""
    root = tmp_path_factory.mktemp("cluster")
    c = ExternalCluster(root, cwd=root / "elsewhere", n_workers=2)
    yield c
    c.close()


@pytest.fixture(scope="module")
def cluster_reference(reference, cluster):
    """Each family's result on the cluster, absolute path, no fault (computed when first
    asked for): float32 products may round differently on the threaded scheduler, so "the
    same result" is measured against the same cluster without the fault."""
    _, store, _, _ = reference
    cache = {}

    def get(family):
        if family not in cache:
            with dask.config.set(scheduler=cluster.client):
                cache[family] = run_family(family, store)
        return cache[family]
    return get


def _assert_same(name, got, expected):
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12,
                               err_msg=f"{name}: a different result, not an error")


# ----------------------------------------------------------------- faults in the store


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("fault", ["missing", "truncated", "swapped"])
def test_a_damaged_input_chunk_is_a_clear_error(reference, tmp_path, family, fault):
    """A chunk missing, truncated, or swapped with another of the same size (each still
    passes its own checksum: X no longer lines up with y)."""
    X, y = _data()
    store = dataset_store(tmp_path / "ds.zarr", X, y, rows=500,
                          compressors=None if fault == "swapped" else "auto")
    chunk = os.path.join(store, "X", "c", "4", "0")
    if fault == "missing":
        os.remove(chunk)
    elif fault == "truncated":
        with open(chunk, "r+b") as f:
            f.truncate(100)
    else:
        other = os.path.join(store, "X", "c", "5", "0")
        tmp = chunk + ".tmp"
        os.rename(chunk, tmp)
        os.rename(other, chunk)
        os.rename(tmp, other)
    with dask.config.set(scheduler="threads"), pytest.raises(StoreIntegrityError,
                                                             match="chunk X/c/[45]/0"):
        run_family(family, store)


# --------------------------------------------------------------- relative paths, workers


@pytest.mark.parametrize("family", FAMILIES)
def test_a_relative_path_with_workers_elsewhere_gives_the_same_result(
        reference, cluster, cluster_reference, monkeypatch, family):
    root, store, _, _ = reference
    expected = cluster_reference(family)
    monkeypatch.chdir(root)
    with dask.config.set(scheduler=cluster.client):
        got = run_family(family, os.path.basename(store))  # relative to the client's cwd only
    _assert_same(family, got, expected)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_worker_killed_mid_run_gives_the_same_result(reference, cluster, cluster_reference,
                                                       family):
    _, store, _, _ = reference
    _kill_the_busy_worker_mid_run(cluster, family, store, cluster_reference(family))


@pytest.mark.parametrize("family", [f for f in ("nsauc", "spam", "oam") if f in FAMILIES])
def test_a_worker_killed_mid_run_with_a_scattered_start_gives_the_same_result(
        reference, cluster, cluster_reference, monkeypatch, family):
    """A chain's starting state large enough to be scattered (here: any; and one task per
    visit) is let go of once the chain's first task has it
    (``daskauc._compute.compute_built``); a worker lost mid-chain still gives the same
    result (recomputed by the scheduler, or the epoch run again from the client's copy)."""
    from daskauc import _config

    _, store, _, _ = reference
    expected = cluster_reference(family)
    monkeypatch.setattr(_config, "SHARE_BYTES", 0)
    monkeypatch.setattr(_config, "CHAIN_TASK_BYTES", 1)  # a task per visit
    _kill_the_busy_worker_mid_run(cluster, family, store, expected, busy_with=_late_chain_task)


def _late_chain_task(key) -> bool:
    """A chain task past an epoch's first two visits (its start let go of by then)."""
    text = str(key)
    if "-epoch-" not in text:
        return False
    visit = text.rstrip(")'\" ").rpartition(",")[2].strip()
    return visit.isdigit() and int(visit) >= 3


def _kill_the_busy_worker_mid_run(cluster, family, store, expected, busy_with=None):
    """SIGKILL the worker running the run's tasks (``busy_with(key)`` one of them) mid-run."""
    out = {}

    def run():
        with dask.config.set(scheduler=cluster.client):
            try:
                out["result"] = run_family(family, store)
            except Exception as exc:  # noqa: BLE001 - reported below
                out["error"] = exc

    pids = cluster.client.run(os.getpid)  # worker address -> pid
    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.time() + 30
    busy = []
    while thread.is_alive() and not busy and time.time() < deadline:
        busy = [a for a, tasks in cluster.client.processing().items()
                if tasks and (busy_with is None or any(map(busy_with, tasks)))]
        time.sleep(0.002)
    running = thread.is_alive()
    i = next(k for k, p in enumerate(cluster.workers) if p.pid == pids[busy[0]]) if busy else 0
    cluster.workers[i].send_signal(signal.SIGKILL)  # the worker running the tasks, mid-run
    cluster.workers[i].wait()
    thread.join(timeout=120)
    cluster.restart_worker(i)
    assert running and busy, "the run ended before the kill"
    assert "error" not in out, out.get("error")
    _assert_same(family, out["result"], expected)


def test_losing_the_scheduler_is_a_clear_error_for_every_family(tmp_path, capsys):
    """Through the command line: exit status 3 and one line, for a fit (each solver family)
    for k-means (``embed``) and for the embedding write (``embed --map``); nothing saved."""
    from daskauc.cli import main

    X, y = _data(n=20000, d=20)
    store = dataset_store(tmp_path / "ds.zarr", X, y, rows=400)
    commands = {m: ["fit", store, str(tmp_path / f"m-{m}.zarr"), "--method", m]
                for m in ("nsauc", "spam", "oam", "nbauc")}
    commands["nsauc"] += ["--epochs", "100000"]
    commands["spam"] += ["--epochs", "100000"]
    commands["oam"] += ["--epochs", "100000"]
    commands["nbauc"] += ["--param", "tol=1e-30", "--param", "max_iter=100000",
                          "--C", "1000"]
    commands["embed"] = ["embed", store, str(tmp_path / "emb.zarr"), "--landmarks", "50",
                         "--kmeans-epochs", "100000"]
    commands["lsauc"] = ["fit", store, str(tmp_path / "m-lsauc.zarr"), "--method", "lsauc"]
    with dask.config.set(scheduler="threads"):
        _embed(store, str(tmp_path / "map.zarr"))
    commands["write"] = ["embed", store, str(tmp_path / "emb-write.zarr"), "--map",
                         str(tmp_path / "map.zarr")]
    # each command's cluster starts while the commands before it run (one at a time, in a
    # thread): the starts were half of this test's time
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1)
    clusters = [pool.submit(ExternalCluster, tmp_path / f"cluster-{name}", cwd=tmp_path,
                            n_workers=1) for name in commands]
    try:
        for (name, cmd), started in zip(commands.items(), clusters, strict=True):
            c = started.result()
            if name in ("lsauc", "write"):  # too quick to interrupt: the scheduler goes first
                c.kill_scheduler()
            else:
                threading.Timer(2.0, c.kill_scheduler).start()
            try:
                with dask.config.set({"distributed.comm.timeouts.connect": "3s"}):
                    code = main(["--scheduler", c.address, *cmd])
            finally:
                c.close()
            err = capsys.readouterr().err
            assert code == 3, (name, err)
            assert "the Dask cluster failed" in err and "Traceback" not in err, (name, err)
            assert not [p for p in os.listdir(tmp_path) if p.startswith(("m-", "emb"))], name
    finally:  # a failed assertion leaves no cluster behind
        pool.shutdown(cancel_futures=True)
        for started in clusters:
            if started.done() and started.exception() is None:
                started.result().close()


# ------------------------------------------------------------------- outputs and models


@pytest.mark.parametrize("family", FAMILIES)
def test_two_concurrent_writers_keep_one_output_and_refuse_the_other(reference, tmp_path,
                                                                     family):
    _, store, results, _ = reference
    outcomes, barrier = [], threading.Barrier(2)

    def write():
        barrier.wait()
        try:
            with dask.config.set(scheduler="threads"):
                fit_and_write(family, store, str(tmp_path / "out.zarr"))
            outcomes.append("written")
        except FileExistsError as exc:
            assert "already exists" in str(exc) or "appeared while" in str(exc)
            outcomes.append("refused")

    threads = [threading.Thread(target=write) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(outcomes) == ["refused", "written"]
    _assert_same(family, read_output(family, str(tmp_path / "out.zarr")), results[family])
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


_WRITER = """
import sys
import dask
dask.config.set(scheduler="threads")
sys.path.insert(0, {tests!r})
from test_faults import fit_and_write
print("start", flush=True)
fit_and_write({family!r}, {store!r}, {out!r})
"""


# every family killed late (0.8 s: mostly while its output is written), two also early
# (while fitting: nothing may be written at all); the early kill is the same code for all
@pytest.mark.parametrize("family, when", [(f, 0.8) for f in FAMILIES]
                         + [("nsauc", 0.3), ("newton", 0.3)])
def test_killing_the_writing_process_leaves_the_whole_output_or_none(reference, tmp_path,
                                                                     family, when):
    _, store, results, _ = reference
    out = str(tmp_path / "out.zarr")
    code = _WRITER.format(tests=os.path.dirname(__file__), family=family, store=store, out=out)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "start"
    time.sleep(when * reference[3][family])  # a fraction of the family's measured run time
    child.send_signal(signal.SIGKILL)
    child.wait()
    if not os.path.exists(out):  # killed before the commit: a rerun writes it and removes
        with dask.config.set(scheduler="threads"):  # the killed writer's leftovers
            fit_and_write(family, store, out)
    _assert_same(family, read_output(family, out), results[family])
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_tampered_output_is_a_clear_error(reference, tmp_path, family):
    """A shape edited in a model (or in an embedding's map) is refused before anything is
    allocated or read as fill values."""
    import json

    from daskauc import load_embedding_map

    _, store, _, _ = reference
    out = tmp_path / "out.zarr"
    with dask.config.set(scheduler="threads"):
        fit_and_write(family, store, str(out))
    name = {"kmeans": "cluster_centers_", "embedding": "map/landmarks"}.get(family, "coef_")
    meta = out / name / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["shape"][0] *= 1000  # declares a far larger array than is stored
    if family != "embedding":  # models: one chunk, as they are written
        doc["chunk_grid"]["configuration"]["chunk_shape"][0] *= 1000
    meta.write_text(json.dumps(doc))
    if family == "embedding":
        with pytest.raises(StoreIntegrityError, match="'map/landmarks' declares shape"):
            load_embedding_map(out)
    else:
        with pytest.raises(ModelFileError, match=f"array '{name}' declares shape"):
            load_model(out)


def test_an_embedding_write_killed_mid_write_leaves_nothing_that_opens(tmp_path):
    X, y = _data(n=60000, d=20)
    store = dataset_store(tmp_path / "ds.zarr", X, y, rows=2000)
    out = tmp_path / "emb.zarr"
    code = ("import dask; dask.config.set(scheduler='threads')\n"
            "from daskauc import KMeansNystroem\nfrom daskauc.data import open_dataset\n"
            f"ds = open_dataset({str(store)!r})\n"
            "m = KMeansNystroem(400, landmarks='random', random_state=0).fit(ds.X)\n"
            "print('writing', flush=True)\n"
            f"m.write_embedding({str(store)!r}, {str(out)!r})\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    deadline = time.time() + 60
    while not [p for p in os.listdir(tmp_path) if p.startswith(".emb.zarr.partial-")]:
        assert time.time() < deadline and child.poll() is None
        time.sleep(0.001)
    time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert not out.exists()  # nothing at the target: an interrupted write never opens
    with dask.config.set(scheduler="threads"):
        again = _embed(str(store), str(out))  # the rerun removes the killed writer's leftovers
        fresh = _embed(str(store), str(tmp_path / "fresh.zarr"))
    np.testing.assert_array_equal(again, fresh)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


# ----------------------------------------------------------------- task keys


#: registered solver -> its task-key cases beside the matrix's families: name -> estimator
KEY_CASES = {
    "spdam": {"spdam": lambda: SPDAM(n_epochs=2, random_state=0)},
    "solam": {"solam": lambda: SOLAM(n_epochs=2, random_state=0)},
    "opauc": {"opauc": lambda: OPAUC(n_epochs=2, random_state=0)},
    "twopass_auc": {"twopass": lambda: TwoPassAUC(n_epochs=2, random_state=0)},
    "univariate_sgd": {"univariate": lambda: UnivariateAUC(n_epochs=2, random_state=0)},
    "prsvm_newton": {"newton-auto-C": lambda: RankSVM()},
    "pairwise_hinge_sgd": {
        "nsauc-preset": lambda: NSAUC(n_landmarks=16, n_epochs=2, random_state=0)},
    # "auto" takes the kernel route on these small stores (the embedding route would fit
    # with prsvm_newton, whose keys are tested too)
    "kernel_pairwise_newton": {
        "kernel": lambda: KernelAUC(n_centres=16, gamma=0.1, lam=1e-3)},
    "kernel_lsauc": {"kernel-lsauc": lambda: KernelAUC(n_centres=16, gamma=0.1, lam=1e-3,
                                                       loss="least_squares",
                                                       solver="kernel")},
}
#: every family, each on two stores of the same shape in one client: a key is a token of
#: all its task depends on, so no key may reach the scheduler with a different task
KEY_FAMILIES = {
    **ESTIMATORS,
    **{case: make for name in REGISTERED for case, make in KEY_CASES.get(name, {}).items()},
    "embedding": lambda: KMeansNystroem(12, random_state=0),
}


def test_every_registered_solver_is_a_family_or_says_why_not_and_has_its_task_keys_tested():
    assert_covered(REGISTERED, FAMILY_OF_SOLVER, NOT_A_FAMILY, "FAMILY_OF_SOLVER")
    assert sorted(set(NOT_A_FAMILY) - set(KEY_CASES)) == [], "give them a KEY_CASES entry"
    assert sorted(set(KEY_CASES) - set(REGISTERED)) == []


class _SchedulerWarnings:
    """WARNING and ERROR records of an in-process scheduler."""

    def __init__(self):
        import logging

        self.records = []
        handler = logging.Handler(logging.WARNING)
        handler.emit = self.records.append
        self.handler = handler

    def __enter__(self):
        import logging

        logging.getLogger("distributed.scheduler").addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        import logging

        logging.getLogger("distributed.scheduler").removeHandler(self.handler)

    def collisions(self):
        return [r.getMessage().split("\n")[0] for r in self.records
                if "Detected different `run_spec`" in r.getMessage()]


@pytest.fixture(scope="module")
def inprocess_client():
    """A cluster whose scheduler logs in this process (workers as threads)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as lc, Client(lc, set_as_default=False) as c:
        yield c


@pytest.mark.parametrize("family", KEY_FAMILIES)
def test_no_task_key_reaches_the_scheduler_with_a_different_task(tmp_path, inprocess_client,
                                                                  family):
    """Fit, score and predict on two stores in one client (one chunk, then three): before,
    KernelAUC's ``daskauc-scale`` keys and SPAM's ``daskauc-check-finite`` keys reached the
    scheduler with a different task while it still held them, because distributed released
    the previous result after the next graph arrived (see ``daskauc._compute.flush_releases``)."""
    stores = []
    for i, rows in enumerate((400, 150)):
        X, y = _data(n=400, seed=i)
        stores.append(dataset_store(tmp_path / f"s{i}.zarr", X, y, rows=rows))
    with _SchedulerWarnings() as log, dask.config.set(scheduler=inprocess_client), \
            inprocess_client.as_current():
        for store in stores:
            est = KEY_FAMILIES[family]()
            ds = open_dataset(store)
            if family in ("kmeans", "embedding"):
                est.fit(ds.X)
                est.transform(ds.X).compute() if family == "embedding" else est.predict(ds.X)
                continue
            est.fit(store)
            est.score(store)
            est.predict_proba(ds.X).compute()
    assert log.collisions() == []
