"""The solvers' hand-built task graphs: fresh keys, tree sums of r-vectors, BLAS threads.

Shared by the pairwise operator (:mod:`daskauc.solvers.pairwise`) and the kernel-basis passes
(:mod:`daskauc.solvers.kernel_basis`), and the solvers that run them.
"""

from __future__ import annotations

import contextlib
import uuid

import numpy as np

from .. import _config

#: fan-in of the tree reductions of r-vectors.
TREE_FANIN = 8


def fresh_token() -> str:
    """New keys for one graph (a uuid)."""
    # every graph of a solve gets new keys: content hashing would cost a hash of n-vectors per
    # graph, and two identical submissions (a repeated solve) must not race on shared keys
    return uuid.uuid4().hex


def _sum(parts: list) -> np.ndarray:
    out = np.array(parts[0], dtype=np.float64, copy=True)
    for p in parts[1:]:
        out += p
    return out


def tree_sum(layer: dict, name: str, keys: list, *, combine=None, fan_in: int = TREE_FANIN,
             start_level: int = 0):
    """Add to ``layer`` a tree (fan-in ``fan_in``) combining the values at ``keys`` in key
    order with ``combine(list)`` (default: their float64 sum); its nodes are keyed
    ``(name, level, i)`` from ``start_level`` up. Returns the key of the root."""
    combine = _sum if combine is None else combine
    level = start_level
    while len(keys) > 1:
        nxt = []
        for i in range(0, len(keys), fan_in):
            key = (name, level, i // fan_in)
            layer[key] = (combine, list(keys[i : i + fan_in]))
            nxt.append(key)
        keys = nxt
        level += 1
    return keys[0]


def threads_limit(client):
    """One BLAS thread per task under the threaded scheduler (workers already have one)."""
    return _config.blas_limit(1) if client is None else contextlib.nullcontext()
