"""Raw labels -> {-1, +1}, by the rules of :func:`daskauc._labels.label_classes`.

A text ingest codes each row by its raw label token while parsing (:mod:`daskauc.data.parse`)
and maps the codes once the label set is known (:func:`_label_table`); an array ingest maps
its distinct labels (:func:`_array_label_table`, :func:`_to_pm1`). Either way the classes
mapped to -1 and +1 are recorded in the store's attributes as JSON values.

A boolean label (a Parquet bool column, read as the text ``true`` / ``false``, or a text
column of ``true`` / ``false`` / ``True`` / ``False``) stays boolean: its classes are
``[[false], [true]]``, True is positive by default, and the positive class may be given as
True / False, 1 / 0 or their text (:func:`_as_boolean`), as typed on the command line.
"""

from __future__ import annotations

import numpy as np

from .._labels import label_classes


def label_json(v):
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


#: the text of a boolean label (Arrow's and pandas' spellings)
_TRUE, _FALSE = ("true", "True", "TRUE"), ("false", "False", "FALSE")


def _as_boolean(value):
    """A positive class given for a boolean label, as a bool: True / False, 1 / 0 and their
    text; anything else as it is (then named as a class that does not occur)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str):
        text = value.strip()
        if text in (*_TRUE, "1"):
            return True
        if text in (*_FALSE, "0"):
            return False
    elif isinstance(value, (bool, int, float)) and value in (0, 1):
        return bool(value)
    return value


def _boolean_args(pos_label, positive_classes):
    return (None if pos_label is None else _as_boolean(pos_label),
            None if positive_classes is None or isinstance(positive_classes, (str, bytes))
            or not np.iterable(positive_classes)
            else [_as_boolean(v) for v in positive_classes])


def _label_table(tokens: dict[bytes, int], pos_label, positive_classes, where: str):
    """Map label codes to +1/-1; return (lut int8 per code, classes [[neg...], [pos...]])."""
    if not tokens:
        raise ValueError(f"{where}: no data rows")
    raw = [t.decode("utf-8", "replace").strip().strip("\"'") for t in tokens]
    values: np.ndarray
    if all(s in _TRUE or s in _FALSE for s in raw):  # a boolean label stays boolean
        values = np.array([s in _TRUE for s in raw])
        pos_label, positive_classes = _boolean_args(pos_label, positive_classes)
    else:
        try:
            values = np.array([float(s) for s in raw], dtype=np.float64)
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
    if uniq.dtype == bool:
        pos_label, positive_classes = _boolean_args(pos_label, positive_classes)
    positives = label_classes(uniq, pos_label, positive_classes)
    is_pos = np.isin(uniq, positives)
    return positives, _classes(uniq, is_pos)


def _classes(uniq: np.ndarray, is_pos: np.ndarray) -> list:
    """The labels mapped to -1 and those mapped to +1, as JSON values."""
    return [[label_json(v) for v in uniq[~is_pos]], [label_json(v) for v in uniq[is_pos]]]


def _label_params(pos_label, positive_classes) -> dict:
    """``pos_label`` and ``positive_classes`` as recorded in a store's ``params``."""
    return {"pos_label": label_json(pos_label),
            "positive_classes": None if positive_classes is None
            else [label_json(v) for v in positive_classes]}


def _to_pm1(block: np.ndarray, positives: np.ndarray) -> np.ndarray:
    return np.where(np.isin(block, positives), 1, -1).astype(np.int8)


def _check_pm1(block: np.ndarray) -> np.ndarray:
    if block.size and not np.isin(block, (-1, 1)).all():
        bad = block[~np.isin(block, (-1, 1))][0]
        raise ValueError(
            f"y must hold only -1 and +1 (found {bad!r}); map labels with ingest_array")
    return block.astype(np.int8, copy=False)
