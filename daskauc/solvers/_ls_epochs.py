"""What the stochastic least-squares solvers (TwoPassAUC, OPAUC, SOLAM, SPAM, SPDAM) share
around the engine's epoch driver, :func:`daskauc.engine.stream.run_epochs`: in their steps, a
chunk as a float block and the order a visit takes its rows in; for the driver, the history
record with the objective LS of :mod:`daskauc.solvers.stats`, and their log line.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._sparse import is_sparse
from .stats import ClassStats, ls_objective


def row_order(seed: np.random.SeedSequence | None, n_rows: int) -> np.ndarray:
    """The order in which a step visits the rows of its chunk (a random permutation)."""
    if seed is None:
        return np.arange(n_rows, dtype=np.int64)
    return np.random.default_rng(seed).permutation(n_rows).astype(np.int64)


def as_block(Xb) -> np.ndarray:
    """A chunk as a C-contiguous float32/float64 array (read-only is fine); a sparse chunk
    as it comes (canonical CSR of a float dtype: :mod:`daskauc._sparse`)."""
    if is_sparse(Xb):
        return Xb
    Xb = np.asarray(Xb)
    if Xb.dtype not in (np.float32, np.float64):
        Xb = Xb.astype(np.float64)
    return np.ascontiguousarray(Xb)


#: the log line of an epoch (solver, epoch, seconds)
LOG = "%s epoch %d: %.2f s"


def objective_record(stats: ClassStats | None, lam: float,
                     **coefs: str) -> Callable[..., dict] | None:
    """``record`` of an epoch: its seconds, then LS(``state.<field>``) under each name of
    ``coefs`` (``objective="w"``) when ``stats`` are given (O(r^2), no pass over the data);
    None (the seconds only) without them."""
    if stats is None:
        return None

    def record(state, seconds: float) -> dict:
        return {"seconds": seconds,
                **{name: ls_objective(getattr(state, field), stats, lam)
                   for name, field in coefs.items()}}

    return record
