"""Raw labels -> {-1, +1}, by the rules of :func:`daskauc._validation.label_classes`.

A text ingest codes each row by its raw label token while parsing (:mod:`daskauc.data.parse`)
and maps the codes once the label set is known (:func:`_label_table`); an array ingest maps
its distinct labels (:func:`_array_label_table`, :func:`_to_pm1`). Either way the classes
mapped to -1 and +1 are recorded in the store's attributes as JSON values.
"""

from __future__ import annotations

import numpy as np

from .._validation import label_classes


def _jsonable(v):
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return int(f) if f.is_integer() else f
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (np.str_, np.bytes_)):
        return str(v)
    return v


def _label_table(tokens: dict[bytes, int], pos_label, positive_classes, where: str):
    """Map label codes to +1/-1; return (lut int8 per code, classes [[neg...], [pos...]])."""
    if not tokens:
        raise ValueError(f"{where}: no data rows")
    raw = [t.decode("utf-8", "replace").strip().strip("\"'") for t in tokens]
    try:
        values: np.ndarray = np.array([float(s) for s in raw], dtype=np.float64)
        if not np.isfinite(values).all():
            bad = raw[int(np.argmin(np.isfinite(values)))]
            raise ValueError(f"{where}: label {bad!r} is not a finite number")
    except ValueError as exc:
        if "finite" in str(exc):
            raise
        values = np.array(raw)
    uniq, inv = np.unique(values, return_inverse=True)
    try:
        positives = label_classes(uniq, pos_label, positive_classes)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    is_pos = np.isin(uniq, positives)
    lut = np.where(is_pos[inv.ravel()], 1, -1).astype(np.int8)
    return lut, _classes(uniq, is_pos)


def _array_label_table(uniq: np.ndarray, pos_label, positive_classes):
    positives = label_classes(uniq, pos_label, positive_classes)
    is_pos = np.isin(uniq, positives)
    return positives, _classes(uniq, is_pos)


def _classes(uniq: np.ndarray, is_pos: np.ndarray) -> list:
    """The labels mapped to -1 and those mapped to +1, as JSON values."""
    return [[_jsonable(v) for v in uniq[~is_pos]], [_jsonable(v) for v in uniq[is_pos]]]


def _label_params(pos_label, positive_classes) -> dict:
    """``pos_label`` and ``positive_classes`` as recorded in a store's ``params``."""
    return {"pos_label": _jsonable(pos_label),
            "positive_classes": None if positive_classes is None
            else [_jsonable(v) for v in positive_classes]}


def _to_pm1(block: np.ndarray, positives: np.ndarray) -> np.ndarray:
    return np.where(np.isin(block, positives), 1, -1).astype(np.int8)


def _check_pm1(block: np.ndarray) -> np.ndarray:
    if block.size and not np.isin(block, (-1, 1)).all():
        bad = block[~np.isin(block, (-1, 1))][0]
        raise ValueError(
            f"y must hold only -1 and +1 (found {bad!r}); map labels with ingest_array")
    return block.astype(np.int8, copy=False)
