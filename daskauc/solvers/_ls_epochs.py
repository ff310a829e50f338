"""What the stochastic least-squares solvers (TwoPassAUC, OPAUC, SOLAM, SPAM, SPDAM) pass to
the engine's epoch driver, :func:`daskauc.engine.stream.run_epochs`, besides their step and
merge: the history record with the objective LS of :mod:`daskauc.solvers.stats`, and their
log line.
"""

from __future__ import annotations

from collections.abc import Callable

from .stats import ClassStats, ls_objective

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
