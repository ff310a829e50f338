"""Data-parallel stochastic epochs: how the states of parallel chains are combined.

With ``n_chains = K > 1`` an epoch runs K chains at once (:func:`~daskauc.engine.stream.
epoch_graph`), each starting from the epoch's start state and visiting its own share of the
chunks (visits ``k, k + K, ...`` of the epoch's shuffled order, or on a cluster the chunks its
worker holds, each visit with the seed it has in one chain), so K workers work at once. At the
end of the epoch (or of every round of ``sync_every`` chunks per chain) one task combines the
K final states, by the solver's ``merge_chains(start, finals, seed)``.

Chains that stand for the sequential run
----------------------------------------
A chain makes the steps of its share only, ``n_k`` of the round's ``N`` rows, yet the
sequential run would have moved the iterate over all ``N``. Mixing the chains' iterates
(parameter mixing) then moves it as one share would: 1/K of the progress. Adding the chains'
moves instead (NSAUC's former rule) is an Euler step over the round: the
components of the iterate that relax within a round are counted K times. Measured on NSAUC
at its defaults (t0 ~ 4e8, a nearly constant step: the iterate walks a long curved path,
about 40 per epoch at a norm of 130-225 on covtype's embedding, 1.8 off its own moving
average), adding lost 0.001 test AUC at 20 epochs and merging more often lost more; mixing
lost 0.0045 on covtype, 0.0055 for SPAM on ijcnn1.

So each chain stands for the whole round: its step gets the ``stride`` ``s_k = N / n_k``
(:func:`~daskauc.engine.stream.epoch_graph` with ``strides=True``) and

* the step-size schedule runs on a ``clock`` that advances ``s_k`` per step, the sequential
  run's step count (``1 / (lam (clock + t0))``, ``zeta / sqrt(clock)``, ...), while the step
  counter ``t`` counts the chain's own steps (averages, class ratios, the merge's weights);
* in a state's first round of chains (no ``velocity`` yet) each step is ``s_k`` times the
  sequential one (the linear scaling rule: one step for the ``s_k`` rows it stands for);
* after that, each step is the sequential one, and every few steps the chain adds the
  other chains' expected move, ``(s_k - 1)`` times the ``velocity``: the merged move of the
  iterate per step of the clock over the last round (:func:`chain_frame`). The chain's own
  noise is then the sequential run's (scaled steps multiply it, and lost 0.0011 where this
  loses none), and its iterate is the sequential run's estimate at every point of the round;

and the merge mixes the chains' iterates and clocks, weighted by the steps each took, and
takes the velocity of the merged move (:func:`merge_moving`). A velocity that overshoots is
corrected by the next round (the chains' own steps pull back; the estimate contracts by
``(K - 1) / K`` a round). The first epoch of a fit runs one chain
(``run_epochs(one_chain_first=True)``): from ``w = 0`` the iterate moves fastest and its
move is the least like the next one (measured on ijcnn1: a first epoch of scaled chains
left the 20-epoch average 0.0002-0.0005 below one chain, a first epoch of one chain
-0.0002..+0.0001). NSAUC, NSVMSGD2, SPAM, TwoPassAUC, SOLAM (all of ``(w, a, b, alpha)``)
and Uni-Exp / Uni-Squ (``w`` and ``b``) combine their chains so.

The other rules, by kind of state:

* **other iterates**: parameter mixing, the average of the chains' iterates weighted by the
  steps each took (Mann et al. 2009; McDonald, Hall & Mann, "Distributed training strategies for
  the structured perceptron", NAACL 2010 (iterative parameter mixing); Zinkevich, Weimer, Smola
  & Li, "Parallelized stochastic gradient descent", NIPS 2010): OPAUC's and OAM's ``w`` (their
  mixed iterates measured at or above one chain's test AUC), SPDAM's primal ``w`` and its
  extrapolated point ``wbar`` (with the same weights, so that ``wbar = w + theta (w -
  w_prev)`` still holds for the mixed previous iterates). Mixed once per epoch this is
  iterative parameter mixing; it is not the sequential iterate, so results with K chains
  differ from one chain's (measured: docs/benchmarks/chains.md);
* **running averages of the iterates**: exact (:func:`merge_running_average`). Chain k's
  average covers the start's iterates and its own; the combination is the average of the
  start's and of every chain's own iterates. Uniform averages are weighted by the iterates
  they cover (NSAUC's ``wbar`` by ``q``, SPAM's by ``t``, OAM's by rows, Uni-Exp / Uni-Squ's
  ``wbar`` and ``bbar`` by ``t``); SOLAM's gamma-weighted averages ``wbar``, ``abar``,
  ``bbar``, ``alphabar`` by the sums of the gammas, each iterate weighted by the sequential
  run's gamma at its clock;
* **counters** (steps, rows and positives seen, SOLAM's sum of the gammas): the start's plus
  every chain's increment (:func:`add_increments`), so online class ratios ``p_t`` continue
  from the totals; SOLAM's running largest row norm ``kappa`` is the largest of the chains';
* **sufficient statistics accumulated during the epoch**: exact, the start's plus the chains'
  increments. OPAUC's per-class sums, scatters ``sum x x^T`` and counts equal one chain's
  over the same rows (up to the float64 rounding of the order of the additions). SPDAM's
  dual variables belong to rows and the chains of a round visit disjoint chunks, so each
  chunk's duals are those of the chain that visited it, and ``u = (1/n) sum_i beta_i
  xbar_i``, linear in the duals, is the start's plus the chains' increments: the "adding"
  rule of distributed dual coordinate methods (Ma, Smith, Jaggi, Jordan, Richtarik & Takac,
  "Adding vs. averaging in distributed primal-dual optimization", ICML 2015), exact here
  because the blocks are disjoint;
* **OAM's reservoirs**: merged into a uniform sample of every row of the class seen so far
  (weighted reservoir merging). Besides its working buffers (the start's, updated as one chain
  would), each chain keeps a reservoir of its own rows only; the number of slots each
  population (the rows before the epoch, each chain's rows) gets is drawn from the
  multivariate hypergeometric law of a uniform sample of their union, and each share is drawn
  uniformly from that population's reservoir. Exact in distribution (tested against K / N);
* **NSAUC's partner window**: the last chunks any chain visited, by the clock at which they
  joined (with strides, the order the sequential run would have visited them in);
* **class statistics fixed within an epoch** (the first-pass means of SPAM, TwoPassAUC and
  SPDAM, SPDAM's step parameters) are the start's.

Every draw of the combination comes from the epoch's seed, so an epoch's result still depends
only on the seed root, the epoch number and ``n_chains`` (and, on a cluster, where the chunks
are held).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

#: steps between the drifts a chain adds for the other chains (chain_frame), where the solver
#: has no schedule of its own for them (NSAUC adds them with its shrinks, every rskip steps)
DRIFT_EVERY = 16


def mix_iterates(start: np.ndarray, finals: list[np.ndarray], steps: list[int]) -> np.ndarray:
    """Step-weighted average of the chains' iterates (the start's when no chain stepped)."""
    total = float(sum(steps))
    if total <= 0:
        return start.copy()
    out = np.zeros_like(start, dtype=np.float64)
    for w, s in zip(finals, steps, strict=True):
        out += (s / total) * w
    return out


def merge_running_average(start_avg: np.ndarray, start_count: float, avgs: list[np.ndarray],
                          counts: list[float]) -> np.ndarray:
    """The average of all iterates: the start's ``start_count`` ones and each chain's own
    (chain k's average ``avgs[k]`` covers ``counts[k]`` iterates, the start's included).

    For a weighted average (SOLAM's gamma weights) the counts are the sums of the weights."""
    total = start_count + sum(c - start_count for c in counts)
    if total <= 0:
        return start_avg.copy()
    acc = start_count * start_avg.astype(np.float64)
    for a, c in zip(avgs, counts, strict=True):
        acc = acc + (c * a - start_count * start_avg)
    return acc / total


def add_increments(start, finals: list):
    """The start's value plus every chain's increment: counters and exact sums (a number or
    an array; the one-chain total up to the float64 rounding of the order of the additions)."""
    return start + sum(f - start for f in finals)


def chain_frame(stride: float, velocity: np.ndarray | None, every: int
                ) -> tuple[float, np.ndarray | None]:
    """``(gain, drift)`` of a chain whose rows each stand for ``stride`` rows of the
    sequential run (module docstring, "Chains that stand for the sequential run"): without a
    ``velocity`` yet, steps ``gain = stride`` times the sequential ones; with one, the
    sequential steps and the other chains' expected move, ``drift = (stride - 1) * every *
    velocity``, added every ``every`` steps. One chain (``stride`` 1): ``(1.0, None)``."""
    if stride == 1:
        return 1.0, None
    if velocity is None:
        return float(stride), None
    return 1.0, (float(stride) - 1.0) * every * velocity


def merge_moving(start_w: np.ndarray, start_clock: float, finals_w: list[np.ndarray],
                 finals_clock: list[float], steps: list[int],
                 velocity: np.ndarray | None = None,
                 ) -> tuple[np.ndarray, float, np.ndarray | None]:
    """``(w, clock, velocity)`` after chains that stand for the sequential run: the chains'
    iterates and clocks mixed by the steps each took, and the merged move of ``w`` per step
    of the clock (the start's ``velocity`` when the clock did not move)."""
    w = mix_iterates(start_w, finals_w, steps)
    total = float(sum(steps))
    clock = (start_clock if total <= 0 else
             float(sum(s / total * c for s, c in zip(steps, finals_clock, strict=True))))
    if clock > start_clock:
        velocity = (w - start_w) / (clock - start_clock)
    return w, clock, velocity


def merge_reservoirs(start_buf: np.ndarray, start_n: int, own_bufs: list[np.ndarray],
                     own_ns: list[int], rng: np.random.Generator) -> np.ndarray:
    """One class's reservoir after parallel chains: a uniform sample of all its rows seen.

    The populations are disjoint: the ``start_n`` rows before the epoch, of which ``start_buf``
    holds a uniform sample (its first ``min(K, start_n)`` rows), and each chain's own
    ``own_ns[k]`` rows, of which the chain kept a uniform sample ``own_bufs[k]`` by Algorithm R
    (``_offer_own_rows``). How many slots each population gets in a uniform sample of the
    union is multivariate hypergeometric; each population's share is then drawn uniformly
    from its sample, which always holds enough rows (a share is at most min(K, size)). Exact.
    """
    K = start_buf.shape[0]
    sizes = np.array([start_n, *own_ns], dtype=np.int64)
    keep = int(min(K, sizes.sum()))
    reps = [start_buf[: min(K, start_n)],
            *[b[: min(K, n)] for b, n in zip(own_bufs, own_ns, strict=True)]]
    take = rng.multivariate_hypergeometric(sizes, keep) if keep else np.zeros_like(sizes)
    out = np.zeros_like(start_buf)
    pos = 0
    for r, t in zip(reps, take, strict=True):
        if t:
            out[pos : pos + t] = r[np.sort(rng.choice(len(r), size=int(t), replace=False))]
            pos += int(t)
    return out


def merge_by_steps(start, finals, *, counter: str, average: str | None = None):
    """The merge of a state with an iterate ``w``, a step counter, a ``clock`` and a
    ``velocity`` (:func:`merge_moving`) and optionally a running average over that same
    counter (SPAM: ``t`` and ``wbar``)."""
    c0 = getattr(start, counter)
    counts = [getattr(f, counter) for f in finals]
    w, clock, velocity = merge_moving(start.w, _clock(start, counter), [f.w for f in finals],
                                      [_clock(f, counter) for f in finals],
                                      [c - c0 for c in counts], start.velocity)
    changes = {"w": w, counter: c0 + sum(c - c0 for c in counts), "clock": clock,
               "velocity": velocity}
    if average is not None:
        changes[average] = merge_running_average(getattr(start, average), c0,
                                                 [getattr(f, average) for f in finals], counts)
    return replace(start, **changes)


def _clock(state, counter: str = "t") -> float:
    return float(getattr(state, counter) if state.clock is None else state.clock)


def chain_clock(state, counter: str = "t") -> np.ndarray:
    """A state's clock (its step counter ``counter`` until a round of chains set one), as the
    (1,) float64 array the kernels advance."""
    return np.array([_clock(state, counter)], dtype=np.float64)


def next_clock(state, stride: float, clock: np.ndarray) -> float | None:
    """The clock a step leaves: None (the step counter) for one chain that had none."""
    return None if state.clock is None and stride == 1 else float(clock[0])
