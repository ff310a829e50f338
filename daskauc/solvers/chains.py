"""Data-parallel stochastic epochs: how the states of parallel chains are combined.

With ``n_chains = K > 1`` an epoch runs K chains at once (:func:`~daskauc.solvers.stream.
epoch_graph`), each starting from the epoch's start state and visiting its own share of the
chunks (visits ``k, k + K, ...`` of the epoch's shuffled order, each with the seed it has in one
chain), so K workers work at once. At the end of the epoch one task combines the K final states:

* **NSAUC's iterate** is a scaled sum of subgradients (its step ``1 / (lam (t + t0))``), and
  the chains' sums are added (:func:`daskauc.solvers.nsauc.merge_chains`);
* **other iterates** (``w``): parameter mixing, the average of the chains' iterates weighted by
  the steps each took (Mann et al. 2009; McDonald, Hall & Mann, "Distributed training strategies for
  the structured perceptron", NAACL 2010 (iterative parameter mixing); Zinkevich, Weimer, Smola
  & Li, "Parallelized stochastic gradient descent", NIPS 2010). Mixed once per epoch, this is
  iterative parameter mixing; it is not the sequential iterate, so results with K chains differ
  from one chain's (measured: docs/benchmarks/chains.md);
* **running averages of the iterates** (``wbar``): exact. Chain k's average covers the start's
  ``n0`` iterates and its own; the combination is the average of the start's and of every
  chain's own iterates, as if one chain had produced them all;
* **counters** (steps, rows seen per class): the start's plus every chain's increment, so step
  size schedules continue from the total;
* **OAM's reservoirs**: merged into a uniform sample of every row of the class seen so far
  (weighted reservoir merging). Besides its working buffers (the start's, updated as one chain
  would), each chain keeps a reservoir of its own rows only; the number of slots each
  population (the rows before the epoch, each chain's rows) gets is drawn from the
  multivariate hypergeometric law of a uniform sample of their union, and each share is drawn
  uniformly from that population's reservoir. Exact in distribution (tested against K / N);
* **class statistics** fixed within an epoch (SPAM's means) are the start's.

Every draw of the combination comes from the epoch's seed, so an epoch's result still depends
only on the seed root, the epoch number and ``n_chains``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np


def mix_iterates(start: np.ndarray, finals: list[np.ndarray], steps: list[int]) -> np.ndarray:
    """Step-weighted average of the chains' iterates (the start's when no chain stepped)."""
    total = float(sum(steps))
    if total <= 0:
        return start.copy()
    out = np.zeros_like(start, dtype=np.float64)
    for w, s in zip(finals, steps, strict=True):
        out += (s / total) * w
    return out


def merge_running_average(start_avg: np.ndarray, start_count: int, avgs: list[np.ndarray],
                          counts: list[int]) -> np.ndarray:
    """The average of all iterates: the start's ``start_count`` ones and each chain's own
    (chain k's average ``avgs[k]`` covers ``counts[k]`` iterates, the start's included)."""
    total = start_count + sum(c - start_count for c in counts)
    if total <= 0:
        return start_avg.copy()
    acc = start_count * start_avg.astype(np.float64)
    for a, c in zip(avgs, counts, strict=True):
        acc = acc + (c * a - start_count * start_avg)
    return acc / total


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
    """The merge of a state with an iterate ``w``, a step counter and optionally a running
    average over that same counter (SPAM: ``t`` and ``wbar``)."""
    c0 = getattr(start, counter)
    counts = [getattr(f, counter) for f in finals]
    changes = {"w": mix_iterates(start.w, [f.w for f in finals], [c - c0 for c in counts]),
               counter: c0 + sum(c - c0 for c in counts)}
    if average is not None:
        changes[average] = merge_running_average(getattr(start, average), c0,
                                                 [getattr(f, average) for f in finals], counts)
    return replace(start, **changes)
