"""Slow, obviously correct readers of LIBSVM and dense text (oracles for daskauc.data).

Line by line, token by token, with Python's ``float``; no streaming, no chunking.
"""

from __future__ import annotations

import numpy as np


def read_libsvm_lines(lines, n_features=None, zero_based=None):
    """Dense X (float64) and the raw label strings of LIBSVM ``lines``.

    ``zero_based=None`` means 0-based iff some index is 0.
    """
    rows, labels = [], []
    for line in lines:
        text = line.split("#", 1)[0].split()
        if not text:
            continue
        labels.append(text[0])
        feats = {}
        for tok in text[1:]:
            key, val = tok.split(":", 1)
            if key == "qid":
                continue
            feats[int(key)] = float(val)
        rows.append(feats)
    indices = [k for r in rows for k in r]
    if zero_based is None:
        zero_based = bool(indices) and min(indices) == 0
    base = 0 if zero_based else 1
    d = n_features if n_features is not None else (max(indices) + 1 - base)
    X = np.zeros((len(rows), d))
    for i, r in enumerate(rows):
        for k, v in r.items():
            X[i, k - base] = v
    return X, labels


def read_dense_lines(lines, delimiter=None, label_column=-1, header=False):
    """Dense X (float64) and raw label strings of delimited text ``lines``."""
    rows, labels = [], []
    seen_header = False
    for line in lines:
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if header and not seen_header:
            seen_header = True
            continue
        fields = text.split(delimiter) if delimiter else text.split()
        fields = [f.strip() for f in fields]
        lab = fields.pop(label_column)
        labels.append(lab.strip("\"'"))
        rows.append([float(f.strip("\"'")) for f in fields])
    return np.array(rows, dtype=np.float64), labels


def pm1(labels, positives):
    """+1 where the raw label (compared as text) is among ``positives``, else -1."""
    pos = {str(p) for p in positives}
    return np.array([1 if str(v) in pos else -1 for v in labels], dtype=np.int8)
