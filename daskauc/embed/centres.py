"""Centres for kernel-basis models: m rows drawn uniformly, or m mini-batch k-means centres.

A kernel-basis model ``f(x) = sum_j alpha_j k(x, c_j)`` (:mod:`daskauc.solvers.kernel_newton`)
needs m centres, m up to 32,768. Two ways, behind :func:`select_centres`:

* ``"uniform"`` (:func:`uniform_centres`): m distinct rows drawn uniformly without
  replacement, in one compute over X that takes only those rows from each chunk. Their labels
  come along when ``y`` is given (the "pairs" preconditioner of the kernel solvers needs them).
* ``"kmeans"`` (:func:`kmeans_centres`): mini-batch k-means (:mod:`daskauc.embed.kmeans`),
  seeded by greedy k-means++ up to 2,048 centres and by k-means|| above
  (:mod:`daskauc.embed.seeding`), each batch assigned by tiled BLAS products
  (:mod:`daskauc.embed.assign`). One compute for the seeding sample, one per epoch.

Which one is better is a property of the dataset and the model, not of the method: compare
them on validation AUC per dataset (this module measures time and inertia only; the kernel
estimator reports uniform centres as good as k-means on covtype, at no cost).

Measured on covtype (464,809 x 54, standardized, float32, numpy input, threaded scheduler; 3
epochs of 2,048-row batches; random_state=0; this 2-core EPYC while another process ran, so
the epochs got one core: a second assignment thread gives 1.6x only on an idle machine).
"before" is this package's k-means before the tiled assignment and k-means|| (greedy
k-means++ seeding, whole-block assignment with two BLAS threads); its epochs at 16,384 and
32,768 were timed alone (random seeds), its greedy seeding alone on the 3 m-row sample
(32,768: 4,096 of the 32,768 steps, which all cost the same, times 8). Inertia is the mean
squared distance to the nearest centre; "bulk" that of the 99% nearest rows (the rest is a
few rows with rare binary columns, where a sample either has a row or not: compare bulk).

======  ==============  ==========  ==========  =========  ======  =======
m       k-means         seeding s   epoch s     total s    bulk    inertia
======  ==============  ==========  ==========  =========  ======  =======
4096    this            1.1         4.1-4.7     14-15      0.706   0.78
4096    before          10          6.5-8.0     32         0.702   0.99
4096    scikit-learn    (in total)  (in total)  32         0.738   1.27
8192    this            1.2         8.5-10      27-30      0.476   0.54
8192    before          25          13.6        66         0.473   0.54
16384   this            2.0         15-18       49-55      0.309   0.36
16384   before          162         26          ~240       --      --
32768   this            5-8         34-38       114-116    0.189   0.21
32768   before          ~775        50-55       ~930       --      --
======  ==============  ==========  ==========  =========  ======  =======

Seeding is the one sample compute (0.3-0.6 s) plus k-means|| on the sample; "before" greedy
k-means++ (quadratic, sequential). scikit-learn is ``MiniBatchKMeans(4096, batch_size=2048,
max_iter=3, n_init=1, max_no_improvement=None, compute_labels=False)`` with its OpenMP
threads (greedy k-means++ on 6,144 rows, reassignment of small clusters). Peak resident
memory of a process holding the data (100 MB) through seeding and one 32,768-centre epoch:
447 MB (this), 980 MB (before).

What limits m on 24 GiB
-----------------------
Not memory. k-means holds the centres in float64 (``m d 8`` bytes: 14 MB at m = 32,768 and d =
54) plus a float32 copy per batch, the seeding sample (``3 m`` rows: 21 MB in float32; greedy
k-means++ keeps two float64 copies, 85 MB) and one 512 KiB Gram tile per thread. Before the
tiling each batch formed a ``batch_size x m`` block (268 MB at m = 32,768) and ``predict`` /
``score`` a ``chunk_rows x m`` one (26 GB for a 200,000-row chunk: that did not fit;
``transform`` still returns ``chunk_rows x m`` distances, its output). The epoch chain hands
the centres from task to task (14 MB). What grows is time: an epoch is ``2 n m d`` flops of
tile products plus ``n m`` arg-min updates, linear in m (about 1.1 s per 1,000 centres on
covtype on one core); k-means|| seeding is ``3 m^2 d`` flops in tile products (5-8 s at
32,768), where greedy k-means++ was ``(2 + ln m) 3 m^2 d`` in m sequential steps (13 minutes
at 32,768). m is bounded by ``m <= n`` only (the k-means sample is capped at n rows).
Downstream, the kernel solvers' ``m x m`` matrices (8.6 GB in float64 at m = 32,768) bind
before the centres.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import dask.array as da
import numpy as np

from .._arrays import sample_rows
from .._compute import compute
from .._labels import as_labels
from .._params import Interval, Options, check_param, check_params, seed_sequence
from .._validation import as_row_chunked
from .kmeans import MiniBatchKMeans, _fit_kmeans

__all__ = ["Centres", "kmeans_centres", "nested_sample", "select_centres", "uniform_centres"]

METHODS = ("uniform", "kmeans")


@dataclass(frozen=True, eq=False)
class Centres:
    """Centres chosen by :func:`select_centres`.

    Attributes
    ----------
    centres : ndarray (m, d), float64
    labels : ndarray (m,) of int8 {-1, +1}, or None
        Labels of the rows drawn as centres (uniform centres with ``y`` given); None otherwise.
    index : ndarray (m,) of int64, sorted, or None
        Row numbers of the centres in X (uniform centres); None for k-means.
    method : str
        "uniform" or "kmeans".
    seconds : float
        Wall time of the selection.
    history : list of dict
        k-means seeding and epoch records (:func:`daskauc.embed.minibatch_kmeans`); empty for
        uniform centres.
    """

    centres: np.ndarray
    labels: np.ndarray | None
    index: np.ndarray | None
    method: str
    seconds: float
    history: list = field(default_factory=list)


def _check_m(m, n: int) -> int:
    check_param("m", m, Interval(int, 1))
    if m > n:
        raise ValueError(f"m={m} centres were requested but X has only n={n} rows; "
                         f"choose m <= {n}")
    return int(m)


def _pm1_labels(y, n: int):
    """Labels as {-1, +1} int8, numpy or lazy dask, checked against X's n rows."""
    y_pm1, _ = as_labels(y)
    if y_pm1.shape[0] != n:
        raise ValueError(f"X has {n} rows but y has {y_pm1.shape[0]} labels; they must match")
    return y_pm1


def _check_rows_finite(C: np.ndarray, index: np.ndarray) -> None:
    bad = ~np.isfinite(C).all(axis=1)
    if bad.any():
        raise ValueError(f"X contains NaN or infinity (row {int(index[np.argmax(bad)])}, drawn "
                         "as a centre); impute or drop those values first")


def nested_sample(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """The first m entries of a uniformly random permutation of ``range(n)`` (int64).

    A partial Fisher-Yates shuffle kept in a dict (O(m) time and memory, not O(n)): step i
    swaps position i with a position drawn uniformly in [i, n). The draws of the first m'
    steps do not depend on m, so for one seed the sample of m' < m rows is the first m' of
    the sample of m rows. (``Generator.choice(n, m, replace=False)`` uses Floyd's algorithm
    below 2% of n, whose samples for different m are unrelated.)
    """
    draws = rng.integers(np.arange(m), n)  # one bounded draw per step, in order
    swapped: dict[int, int] = {}
    out = np.empty(m, np.int64)
    for i, j in enumerate(draws.tolist()):
        out[i] = swapped.get(j, j)
        swapped[j] = swapped.get(i, i)
    return out


def uniform_centres(
    X, m: int, *, y=None, random_state=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """m distinct rows of X drawn uniformly without replacement (one compute over X).

    Parameters
    ----------
    X : numpy array, dask array, zarr array or dataset store path, shape (n, d)
    m : int
        Number of centres, ``1 <= m <= n``.
    y : array-like (n,), dask array or dataset store path, optional
        Labels in any two-valued convention; the drawn rows' labels are returned as
        {-1, +1}.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    centres : ndarray (m, d), float64
        ``X[index]``.
    index : ndarray (m,), int64
        The drawn rows, in increasing order.
    labels : ndarray (m,) of int8 {-1, +1}, or None when y is None

    Notes
    -----
    The rows are the first m positions of a random permutation of the n rows
    (:func:`nested_sample`, a generator seeded by ``random_state``), sorted: they depend on n
    and the seed only, not on X's kind or chunking, and for the same seed the samples of
    growing m are nested (``KernelAUC(warm_start=True)`` then carries a model over exactly). The
    compute runs one ``daskauc-sample`` task per chunk, each taking its rows (the drawn labels
    ride in the same compute). Dask labels are mapped to {-1, +1} by
    :func:`daskauc._labels.as_labels`, which reads y once for its classes. Only the drawn
    rows are checked for NaN and infinity (the solver that reads X checks the rest).
    """
    Xd = as_row_chunked(X, check_finite_values=False)
    n = int(Xd.shape[0])
    m = _check_m(m, n)
    index = np.sort(nested_sample(n, m, np.random.default_rng(seed_sequence(random_state))))
    todo = [sample_rows(Xd, index)]
    y_pm1 = _pm1_labels(y, n) if y is not None else None
    if isinstance(y_pm1, da.Array):
        y2 = y_pm1.rechunk((Xd.chunks[0],))[:, None]
        todo.append(sample_rows(y2, index)[:, 0])
    C, *rest = compute(*todo)
    C = np.ascontiguousarray(C, dtype=np.float64)
    _check_rows_finite(C, index)
    labels = None
    if y_pm1 is not None:
        labels = np.asarray(rest[0] if rest else y_pm1[index], dtype=np.int8)
    return C, index, labels


def kmeans_centres(
    X,
    m: int,
    *,
    n_epochs: int = 3,
    batch_size: int = 2048,
    init="auto",
    init_size: int | None = None,
    random_state=None,
) -> tuple[np.ndarray, list[dict]]:
    """m mini-batch k-means centres of X (seeding sample + one compute per epoch).

    Parameters
    ----------
    X : numpy array, dask array, zarr array or dataset store path, shape (n, d)
    m : int
        Number of centres, ``1 <= m <= n``.
    n_epochs : int, default 3
    batch_size : int, default 2048
    init : {"auto", "k-means++", "k-means||", "random"} or array (m, d), default "auto"
        Seeding on a sample of ``init_size`` rows (:mod:`daskauc.embed.seeding`); "auto" is
        greedy k-means++ up to 2,048 centres and k-means|| above.
    init_size : int, optional
        Rows of the seeding sample; default ``max(3 m, 10 batch_size)`` capped by n.
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    centres : ndarray (m, d), float64
    history : list of dict
        Seeding (entry 0: ``init``, ``init_size``, ``sample_seconds``, ``seeding_seconds``,
        ``seconds``) and one record per epoch (``seconds``, ``batch_inertia``, ``n_empty``);
        see :func:`daskauc.embed.minibatch_kmeans`.

    Notes
    -----
    Objective: minimize ``sum_i min_j ||x_i - c_j||^2`` by Sculley's mini-batch updates.
    Time and memory at large m: see the module docstring.

    References
    ----------
    D. Sculley, "Web-scale k-means clustering", WWW 2010.
    B. Bahmani et al., "Scalable k-means++", PVLDB 5(7), 2012.
    """
    check_params(dict(batch_size=batch_size, n_epochs=n_epochs, init_size=init_size),
                 MiniBatchKMeans._params)
    Xd = as_row_chunked(X)
    m = _check_m(m, int(Xd.shape[0]))
    centres, _, history, _ = _fit_kmeans(
        Xd, m, batch_size=batch_size, n_epochs=n_epochs, init_size=init_size,
        ss=seed_sequence(random_state), init=init,
    )
    return centres, history


def select_centres(X, m: int, *, method: str = "uniform", y=None, random_state=None,
                   **kmeans_kw) -> Centres:
    """Choose m centres of X by ``method`` ("uniform" or "kmeans").

    Parameters
    ----------
    X : numpy array, dask array, zarr array or dataset store path, shape (n, d)
    m : int
        Number of centres, ``1 <= m <= n``.
    method : {"uniform", "kmeans"}, default "uniform"
        :func:`uniform_centres` or :func:`kmeans_centres`.
    y : labels, optional
        With "uniform", the drawn rows' labels are returned as {-1, +1}; "kmeans" centres are
        not rows and have no labels (y is not used).
    random_state : None, int, SeedSequence or Generator
    **kmeans_kw
        ``n_epochs``, ``batch_size``, ``init``, ``init_size`` of :func:`kmeans_centres`.

    Returns
    -------
    Centres
    """
    check_param("method", method, Options(*METHODS))
    t0 = time.perf_counter()
    if method == "uniform":
        if kmeans_kw:
            raise TypeError(f"{sorted(kmeans_kw)} apply to method='kmeans' only")
        C, index, labels = uniform_centres(X, m, y=y, random_state=random_state)
        return Centres(C, labels, index, method, time.perf_counter() - t0, [])
    unknown = set(kmeans_kw) - {"n_epochs", "batch_size", "init", "init_size"}
    if unknown:
        raise TypeError(f"select_centres got unexpected keyword arguments {sorted(unknown)}")
    C, history = kmeans_centres(X, m, random_state=random_state, **kmeans_kw)
    return Centres(C, None, None, method, time.perf_counter() - t0, history)
