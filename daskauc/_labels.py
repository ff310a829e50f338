"""Labels: any two-valued convention (or a grouping of classes) -> int8 {-1, +1}, matched by
value (:func:`matching_label`), with the raw classes kept for ``classes_``; a dataset store's
recorded classes; X and its labels validated together (:func:`check_X_y`)."""

from __future__ import annotations

import warnings
from typing import Any

import dask.array as da
import numpy as np

from ._compute import compute
from ._readers import open_path
from ._validation import as_row_chunked, frame_values, is_dask_frame, is_store_path


def matching_label(uniq: np.ndarray, value) -> int | None:
    """The index of the label in ``uniq`` equal to ``value``, compared as values, never cast
    to ``uniq``'s dtype (a cast would make ``"gamma"`` match ``"g"`` in a one-character string
    array and ``1.9`` match ``1`` in an integer one); None when no label equals it. Numbers
    match numbers of equal value (``2`` matches ``2.0``, ``True`` matches ``1``), strings
    match strings exactly, and a number never matches a string (the command line reads a
    typed value as JSON first: ``--positive 2`` and the key of
    ``--param 'class_weight={"2": 5}'`` are the number 2)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    for i, label in enumerate(uniq.tolist()):
        if isinstance(label, bytes):
            label = label.decode("utf-8", "replace")
        if isinstance(label, str) != isinstance(value, str):
            continue
        if label == value:  # numbers (bools included) by value, strings exactly
            return i
    return None


def _labels_shown(uniq: np.ndarray) -> list:
    """Labels as an error message shows them: whole numbers read as floats shown as the
    integers they were typed as (a file's labels 1 and 2, not 1.0 and 2.0)."""
    return [int(v) if isinstance(v, float) and v.is_integer() else v for v in uniq.tolist()]


def label_classes(y_values: np.ndarray, pos_label=None, positive_classes=None) -> np.ndarray:
    """Decide which raw label values are positive; return them as an array.

    ``y_values`` holds the distinct raw labels. With neither argument the labels must be
    two-valued and the larger one (scikit-learn's ``classes_[1]``) is positive: this maps
    -1/+1, 0/1 and 1/2 as their datasets mean.
    """
    uniq = np.unique(y_values)
    if positive_classes is not None:
        if isinstance(positive_classes, (str, bytes)) or not np.iterable(positive_classes):
            raise TypeError("positive_classes must be a list of labels; got "
                            f"{positive_classes!r} (for one label use pos_label)")
        found = [matching_label(uniq, v) for v in positive_classes]
        missing = [v for v, f in zip(positive_classes, found, strict=True) if f is None]
        if missing:
            raise ValueError(f"positive_classes {missing} do not occur in y "
                             f"(classes {_labels_shown(uniq)[:10]})")
        pos = np.unique(uniq[np.asarray(found, dtype=np.intp)])
        if pos.size == uniq.size:
            raise ValueError("positive_classes covers every class of y: no negatives left")
        return pos
    if uniq.size < 2:
        raise ValueError(
            f"y has a single class ({_labels_shown(uniq)}): AUC needs both positive and negative "
            "rows (one class gives no positive-negative pair)"
        )
    if uniq.size > 2 and uniq.dtype.kind == "f" and np.any(uniq != np.floor(uniq)):
        raise ValueError(
            f"Unknown label type: continuous. y holds {uniq.size} distinct values, not all "
            f"integers ({uniq.tolist()[:5]} ...); daskauc ranks two classes: threshold the "
            "target into two classes first"
        )
    if pos_label is not None:
        found = matching_label(uniq, pos_label)
        if found is None:
            raise ValueError(
                f"pos_label={pos_label!r} does not occur in y (classes {_labels_shown(uniq)[:10]})"
            )
        if uniq.size > 2:
            raise ValueError(
                f"Only binary classification is supported. y has {uniq.size} classes "
                f"{_labels_shown(uniq)[:10]}; group them into two sets with positive_classes=[...] "
                "(pos_label names a single class)"
            )
        return uniq[found:found + 1]
    if uniq.size > 2:
        raise ValueError(
            f"Only binary classification is supported. y has {uniq.size} classes "
            f"{_labels_shown(uniq)[:10]}; daskauc is for binary problems: group the classes with "
            "positive_classes=[...]"
        )
    return uniq[1:]


def _to_pm1(block: np.ndarray, positives: np.ndarray) -> np.ndarray:
    return np.where(np.isin(block, positives), 1, -1).astype(np.int8)


def _warn_column_vector(name: str) -> None:
    from sklearn.exceptions import DataConversionWarning

    warnings.warn(
        f"A column-vector y was passed when a 1d array was expected. Please change the shape "
        f"of {name} to (n_samples,), for example using ravel().",
        DataConversionWarning, stacklevel=4)


def as_labels(y: Any, *, pos_label=None, positive_classes=None, name: str = "y"):
    """Map labels of any two-valued convention to int8 {-1, +1}.

    Returns ``(y_pm1, classes)`` where ``y_pm1`` has the input's kind (numpy or dask) and
    ``classes`` is ``[negative_value, positive_value]`` when the labels are two-valued (for a
    grouping, the raw class values are returned as ``[negatives, positives]`` lists). A
    column vector (n, 1) is raveled with a ``DataConversionWarning``, as scikit-learn does.
    """
    if is_store_path(y):
        y = open_path(y, what=name).y
    if is_dask_frame(y):
        y = frame_values(y)
    if isinstance(y, da.Array):
        if y.ndim == 2 and y.shape[1] == 1:
            _warn_column_vector(name)
            y = y.ravel()
        if y.ndim != 1:
            raise ValueError(f"{name} must be 1-D; got shape {y.shape}")
        uniq = np.unique(compute(da.unique(y))[0])
        positives = label_classes(uniq, pos_label, positive_classes)
        return y.map_blocks(_to_pm1, positives, dtype=np.int8, token="daskauc-labels"), (
            _classes_of(uniq, positives)
        )
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        _warn_column_vector(name)
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinity")
    uniq = np.unique(arr)
    positives = label_classes(uniq, pos_label, positive_classes)
    return _to_pm1(arr, positives), _classes_of(uniq, positives)


def _classes_of(uniq: np.ndarray, positives: np.ndarray) -> np.ndarray:
    neg = np.setdiff1d(uniq, positives)
    if neg.size == 1 and positives.size == 1:
        return np.concatenate([neg, positives])
    return np.asarray([-1, 1])


def store_classes(attrs: dict) -> np.ndarray | None:
    """The raw labels a dataset store mapped to -1 and +1, as ``[negative, positive]``, when
    each side is one label (a store of grouped classes, or of -1/+1 already, gives None; an
    embedding store gives those of the dataset it embeds):
    a model fitted on the store then has ``classes_`` in the user's labels, the positive
    last, whichever sorts first."""
    recorded = attrs.get("classes")
    if recorded is None and isinstance(attrs.get("source_attrs"), dict):
        recorded = attrs["source_attrs"].get("classes")  # an embedding: its dataset's
    if not recorded or len(recorded) != 2 or any(len(side) != 1 for side in recorded):
        return None
    neg, pos = recorded[0][0], recorded[1][0]
    if isinstance(neg, str) != isinstance(pos, str):
        return None
    return np.asarray([neg, pos])


def check_X_y(X, y, *, dtype=None, pos_label=None, positive_classes=None, chunk_rows=None):
    """Validate a design matrix and labels together.

    Returns ``(X, y, classes)``: X as a row-chunked dask array, y as an int8 {-1,+1} dask
    array with the same row chunks.
    """
    stored_classes = None
    if is_store_path(X) and y is None:
        ds = open_path(X)
        X, y = ds.X, ds.y
        stored_classes = store_classes(ds.attrs)
    Xd = as_row_chunked(X, dtype=dtype, chunk_rows=chunk_rows, sparse=True)
    if y is None:
        raise ValueError("This estimator requires y to be passed, but the target y is None: "
                         "pass labels, or a dataset store path as X")
    y_pm1, classes = as_labels(y, pos_label=pos_label, positive_classes=positive_classes)
    if stored_classes is not None and pos_label is None and positive_classes is None:
        classes = stored_classes
    n_y = y_pm1.shape[0]
    if n_y != Xd.shape[0]:
        raise ValueError(f"X has {Xd.shape[0]} rows but y has {n_y} labels; they must match")
    if isinstance(y_pm1, da.Array):
        if np.isnan(n_y):
            raise ValueError("y has unknown chunk sizes; call y.compute_chunk_sizes()")
        yd = y_pm1.rechunk((Xd.chunks[0],))
    else:
        yd = da.from_array(y_pm1, chunks=(Xd.chunks[0],), name=False)
    return Xd, yd, classes


def validation_set(X_val, y_val, n_features: int):
    """``(Xv, yv)`` for a solver's validation AUC: ``X_val`` as a row-chunked dask array of
    ``n_features`` columns and ``y_val`` as numpy {-1,+1} labels; ``(None, None)`` without
    ``X_val``."""
    if X_val is None:
        return None, None
    if y_val is None:
        raise ValueError("X_val was given without y_val")
    Xv = as_row_chunked(X_val, name="X_val", sparse=True)
    if Xv.shape[1] != n_features:
        raise ValueError(f"X_val has {Xv.shape[1]} columns but X has {n_features}")
    yv, _ = as_labels(y_val, name="y_val")
    return Xv, np.asarray(compute(yv)[0] if isinstance(yv, da.Array) else yv)


def pm1_known(block: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Labels ``block`` as int8 {-1, +1} by the two ``classes`` a model learned (the second
    positive); a label that is neither is an error naming it (a stream's later batch)."""
    block = np.asarray(block).ravel()
    known = np.isin(block, classes)
    if not known.all():
        bad = np.unique(block[~known])[:5].tolist()
        raise ValueError(
            f"y contains labels {bad} that are not among the classes {classes.tolist()} "
            "given to (or learned by) the first fit / partial_fit call"
        )
    return np.where(block == classes[1], 1, -1).astype(np.int8)


def classes_arg(classes) -> np.ndarray:
    """``classes=`` of a first ``partial_fit``: exactly the two label values, sorted."""
    classes = np.unique(np.asarray(classes))
    if classes.size != 2:
        raise ValueError(
            f"classes must list exactly the two label values; got {classes.tolist()}"
        )
    return classes
