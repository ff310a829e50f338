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


def tree_sum(layer: dict, name: str, keys: list):
    """Add to ``layer`` a tree (fan-in ``TREE_FANIN``) summing the arrays at ``keys`` in
    float64, in key order; returns the key of the total."""
    level = 0
    while len(keys) > 1:
        nxt = []
        for i in range(0, len(keys), TREE_FANIN):
            key = (name, level, i // TREE_FANIN)
            layer[key] = (_sum, list(keys[i : i + TREE_FANIN]))
            nxt.append(key)
        keys = nxt
        level += 1
    return keys[0]


def threads_limit(client):
    """One BLAS thread per task under the threaded scheduler (workers already have one)."""
    return _config.blas_limit(1) if client is None else contextlib.nullcontext()
