"""Slow, obviously correct oracles for daskauc.metrics (small n only)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def brute_force_auc(is_pos, scores) -> Fraction:
    """AUC as an exact fraction by looking at every (positive, negative) pair."""
    is_pos = np.asarray(is_pos, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    pos = scores[is_pos]
    neg = scores[~is_pos]
    wins = 0
    ties = 0
    for o in pos:
        wins += int(np.count_nonzero(o > neg))
        ties += int(np.count_nonzero(o == neg))
    return Fraction(2 * wins + ties, 2 * pos.size * neg.size)


def brute_force_roc(is_pos, scores):
    """Every ROC point, one per distinct score in decreasing order, counted directly.

    Returns ``(fpr, tpr, thresholds)`` starting at (0, 0, +inf), no point dropped.
    """
    is_pos = np.asarray(is_pos, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    n_pos = is_pos.sum()
    n_neg = (~is_pos).sum()
    fpr, tpr, thr = [0.0], [0.0], [np.inf]
    for t in sorted(set(scores.tolist()), reverse=True):
        above = scores >= t
        tpr.append(np.count_nonzero(above & is_pos) / n_pos)
        fpr.append(np.count_nonzero(above & ~is_pos) / n_neg)
        thr.append(t)
    return np.array(fpr), np.array(tpr), np.array(thr)
