"""Checkpoints of a fit: where one may be written, what it records of its data, and when a
fit may resume it (``fit(X, y, checkpoint=PATH, resume=...)`` of the epoch-based estimators,
:class:`~daskauc.RankSVM` and the presets).

:func:`open_checkpoint` runs first in ``fit``, before the input is validated and before any
work (k-means, the choice of C, the first epoch): it refuses a path holding anything but a
checkpoint of the same estimator class, a path inside the data being fitted and a directory
it cannot write, and, on resume, a checkpoint of other parameters, of a longer run or of
other data (:func:`data_fingerprint`).
"""

from __future__ import annotations

import json
import os

import dask.array as da
import numpy as np

from .._validation import is_store_path
from ..store.dataset import zarr_array_of, zarr_location
from ..store.protocol import is_url


class Checkpoint:
    """A ``fit(..., checkpoint=PATH)`` target, checked by :func:`open_checkpoint` before any
    work: the resolved ``path``, the fingerprint ``data`` of the training data (saved with
    every checkpoint as ``data_fingerprint_``) and ``previous``, the estimator saved there
    when the fit resumes it (None for a fresh fit)."""

    def __init__(self, path: str, data: dict, previous=None):
        self.path, self.data, self.previous = path, data, previous

    def add_feature_map(self, token: str) -> None:
        """Record a preset's fitted feature map (:func:`feature_map_token`): the solver's
        checkpoint is of the embedding, so a resumed one must be of the same map."""
        self.data = {**self.data, "feature_map": token}
        saved = (getattr(self.previous, "data_fingerprint_", None) or {}).get("feature_map")
        if self.previous is not None and saved != token:
            raise ValueError(
                f"the checkpoint {self.path} was fitted on another feature map than this fit's "
                f"(map {str(saved)[:8]}, now {token[:8]}): the preset's landmarks or scaler "
                "differ (random_state=None draws new ones at every fit); resume with the "
                "integer random_state of the checkpointed fit, or fit without resume=True")


def open_checkpoint(est, checkpoint, X, y=None, *, resume: bool = False,
                    also_written: dict | None = None) -> Checkpoint | None:
    """Check the checkpoint of ``est.fit(X, y, checkpoint=..., resume=...)`` first of all:
    before the input is validated (a pass over dask labels) and any work.

    The rule: the path may be absent (or an empty directory), or hold a checkpoint of
    ``est``'s class: a daskauc model store with a solver state and no calibration (fit saves
    its final, calibrated model nowhere but where the caller asks). Anything else is refused
    with a ``FileExistsError`` naming the path and what it holds: a dataset or embedding
    store (a checkpoint never replaces data), another class's model, a finished model, a
    directory or a file daskauc did not write. The path may not be, or lie inside, a store
    the data is read from, nor a path in ``also_written`` (label -> path, e.g. a preset's
    ``embedding_store``): ``ValueError``. Its directory must be writable: a probe file is
    created and removed there (``PermissionError`` / ``NotADirectoryError`` naming the path
    and the OS error; not checked for URLs).

    Without ``resume`` an existing checkpoint of the class is replaced by this fit's (asking
    for a fresh fit at that path means that). With ``resume`` the checkpoint, when there is
    one, is loaded and must be of the same parameters, of a run no longer than this one
    (``n_epochs`` or ``max_iter`` may grow, never shrink) and of the same data
    (:func:`data_fingerprint`); it is then ``previous``. ``checkpoint=None`` gives None; a
    :class:`Checkpoint` is returned as it is, so a caller (the command line) may open it
    before starting a cluster and pass it to ``fit`` as ``checkpoint=``. For a preset
    (NSAUC, NBAUC ...) the checkpoint is its solver's, and its ``embedding_store`` may not
    be the checkpoint either.
    """
    if isinstance(checkpoint, Checkpoint):
        return checkpoint
    if hasattr(est, "linear_model"):  # a preset: the checkpoint holds its linear model
        also_written = {"embedding_store": est.embedding_store, **(also_written or {})}
        est = est.linear_model()
    if checkpoint is None:
        if resume:
            raise ValueError("resume=True needs checkpoint=PATH, the fit to continue")
        return None
    from ..store.protocol import resolve_path, restore_interrupted, store_exists
    from ..store.write import check_directory

    path = resolve_path(checkpoint)
    targets = [(s, "the data store {} this fit reads") for s in _stores_read(X, y)]
    targets += [(p, f"the {label} {{}} this fit writes")
                for label, p in (also_written or {}).items() if p is not None]
    for other, what in targets:
        other = resolve_path(other)
        if _within(path, other):
            raise ValueError(
                f"the checkpoint path {path} is, or lies inside, {what.format(other)}: saving "
                "a checkpoint there would destroy it; choose another path")
    if not is_url(path):  # its directory takes a file (one is created and removed there)
        check_directory(path, shown=f"the checkpoint {path}")
        restore_interrupted(path)
    _refuse_foreign(path, type(est))
    data = data_fingerprint(X, y)
    previous = None
    if resume and store_exists(path):
        previous = _resumable(est, path, data)
    return Checkpoint(path, data, previous)


def data_fingerprint(X, y=None) -> dict:
    """What a checkpoint records of its training data, computed without a pass over it.

    ``X`` and ``y`` as given to ``fit`` are each described by their source: a store (a path,
    a ``zarr.Array``, or the dask array :func:`~daskauc.data.open_dataset` or
    ``da.from_zarr`` returns, unsliced) by its resolved path, its ``daskauc_writer`` token
    (a random token each write draws: a copy of the store elsewhere keeps it and is the same
    data; a store written again at the same path gets another) and its shape; any other dask
    array by its ``.name`` (a deterministic token of its graph, except over arrays that get
    a fresh random name when built, as ``open_dataset`` and numpy input inside daskauc
    do) and shape; in-memory data by ``dask.base.tokenize`` (a hash of its bytes: about
    0.1 s per 100 MB) and shape. Plus the rows and, when known without reading (in-memory
    labels, a store's recorded counts), the positives (the larger label) and negatives.
    """
    if y is None and is_store_path(X):
        xs, ys = _source(X, "X"), _source(X, "y")
    else:
        xs, ys = _source(X, "X"), _source(y, "y")
    counts = [None, None]
    if ys is not None and ys.get("kind") == "store":
        counts = [ys.get("n_negative"), ys.get("n_positive")]
    elif ys is not None and ys.get("kind") == "memory":
        try:
            _, found = np.unique(np.asarray(y), return_counts=True)
        except TypeError:  # not comparable: validation says so
            found = ()
        if len(found) == 2:
            counts = [int(c) for c in found]
    for s in (xs, ys):
        if s is not None:
            s.pop("n_positive", None)
            s.pop("n_negative", None)
    rows = xs["shape"][0] if xs and xs.get("shape") else None
    return {"X": xs, "y": ys, "rows": rows, "negatives": counts[0], "positives": counts[1]}


def feature_map_token(*fitted) -> str:
    """A token of fitted maps (a preset's scaler and embedding): their numeric fitted
    attributes (landmarks, projection, gamma, mean, scale ...), hashed."""
    from dask.base import tokenize

    parts = []
    for obj in fitted:
        if obj is None:
            continue
        parts.append(type(obj).__name__)
        for name, value in sorted(vars(obj).items()):
            if name.endswith("_") and not name.startswith("_") and (
                    isinstance(value, np.ndarray) or (isinstance(value, (int, float, np.number))
                                                      and not isinstance(value, bool))):
                parts.append((name, value))
    return tokenize(*parts)


def _source(obj, name: str) -> dict | None:
    """The description of one input (``data_fingerprint``)."""
    from dask.base import tokenize

    if obj is None:
        return None
    if is_store_path(obj):
        from ..store.protocol import open_store, resolve_path

        path = resolve_path(obj)
        group = open_store(path, verify=False)
        shape = group[name].shape if name in group else ()
        return _store_source(path, dict(group.attrs), name, shape)
    arr = zarr_array_of(obj)
    if arr is not None:
        location, attrs = zarr_location(arr)
        if location is not None:
            return _store_source(location, attrs, arr.store_path.path, arr.shape)
    if isinstance(obj, da.Array):
        fresh = any(k.startswith(_FRESH_NAMES) for k in obj.dask.layers)
        return {"kind": "dask", "name": obj.name, "shape": [int(s) for s in obj.shape],
                "fresh_name": bool(fresh)}
    return {"kind": "memory", "token": tokenize(obj),
            "shape": [int(s) for s in np.shape(obj)]}


#: dask names daskauc draws at random when it builds an array (open_dataset, numpy input):
#: an array derived from one gets another name in every process
_FRESH_NAMES = ("original-daskauc-zarr-", "daskauc-zarr-", "daskauc-numpy-")


def _store_source(path: str, attrs: dict, array: str, shape) -> dict:
    return {"kind": "store", "path": path, "writer": attrs.get("daskauc_writer"),
            "array": str(array), "shape": [int(s) for s in shape],
            "n_positive": attrs.get("n_positive"), "n_negative": attrs.get("n_negative")}


def _stores_read(*objs) -> list[str]:
    """Resolved locations of the stores ``objs`` (paths, Zarr or dask arrays) read from."""
    from ..store.protocol import resolve_path

    out = []
    for obj in objs:
        if is_store_path(obj):
            out.append(resolve_path(obj))
            continue
        leaves = [obj] if not isinstance(obj, da.Array) else [
            next(iter(layer.values())) for key, layer in obj.dask.layers.items()
            if key.startswith("original-") and len(layer) == 1]
        for leaf in leaves:
            arr = zarr_array_of(getattr(leaf, "array", leaf))
            location = zarr_location(arr)[0] if arr is not None else None
            if location is not None and location not in out:
                out.append(location)
    return out


def _within(path: str, other: str) -> bool:
    """``path`` is ``other`` or lies inside it."""
    if is_url(path) != is_url(other):
        return False
    if is_url(path):
        return path == other or path.startswith(other.rstrip("/") + "/")
    return os.path.commonpath([path, other]) == other


def _refuse_foreign(path: str, cls: type) -> None:
    """Refuse a ``path`` holding anything but a checkpoint of ``cls`` (open_checkpoint)."""
    import zarr

    from .. import _config
    from ..io import STATE_GROUP
    from ..store.protocol import store_exists

    where = f"the checkpoint path {path}"
    if not is_url(path):
        if not os.path.lexists(path):
            return
        if not os.path.isdir(path):
            raise FileExistsError(f"{where} holds a file, not a daskauc checkpoint; a "
                                  "checkpoint never replaces it: choose another path")
        if not os.listdir(path):
            return  # an empty directory: nothing to lose
    elif not store_exists(path):
        return
    try:
        group = zarr.open_group(path, mode="r")
        attrs = dict(group.attrs)
    except Exception:
        raise FileExistsError(f"{where} holds a directory that is not a daskauc store; a "
                              "checkpoint never replaces it: choose another path") from None
    kind = attrs.get("daskauc_kind")
    if kind is None:
        raise FileExistsError(f"{where} holds a Zarr store not written by daskauc; a "
                              "checkpoint never replaces it: choose another path")
    if kind != "model":
        raise FileExistsError(f"{where} holds a daskauc {kind} store; a checkpoint never "
                              "replaces data: choose another path")
    if not attrs.get(_config.COMPLETE_ATTR):
        raise FileExistsError(f"{where} holds an incomplete daskauc model store (its save "
                              "was interrupted); remove it or choose another path")
    if attrs.get("class") != cls.__name__:
        raise FileExistsError(
            f"{where} holds a daskauc model that is of {attrs.get('class')}, not a checkpoint "
            f"of this {cls.__name__}; a checkpoint never replaces another model: choose "
            "another path")
    fitted = attrs.get("fitted") if isinstance(attrs.get("fitted"), dict) else {}
    if "calibration_slope_" in fitted or STATE_GROUP not in group:
        raise FileExistsError(
            f"{where} holds a finished {cls.__name__} model (calibrated, or without a solver "
            "state), not a checkpoint; a checkpoint never replaces a model: choose another "
            "path")


def _resumable(est, path: str, data: dict):
    """The estimator saved at ``path`` when it is a checkpoint ``est``'s fit may continue:
    same class and parameters, a run no longer than ``est``'s, the same ``data``
    (:func:`data_fingerprint`); an error naming the difference otherwise (continuing a
    different fit would give a silently different model)."""
    from ..io import load_model

    previous = load_model(path)
    mine, theirs = est.get_params(deep=False), previous.get_params(deep=False)
    for length in ("n_epochs", "max_iter"):  # a resumed fit may run longer
        mine.pop(length, None)
        theirs.pop(length, None)
    if type(previous) is not type(est):
        raise ValueError(
            f"the checkpoint {path} is of {type(previous).__name__}, not of "
            f"{type(est).__name__}; resume with the same estimator or use another checkpoint "
            "path")
    differ = _differing(theirs, mine)
    if differ:
        raise ValueError(
            f"the checkpoint {path} was fitted with other parameters: {differ}; resume with "
            "the checkpoint's values or use another checkpoint path")
    state = getattr(previous, "_solver_state", None)
    if state is None:
        raise ValueError(f"the checkpoint {path} holds no solver state")
    length = "n_epochs" if "n_epochs" in est.get_params(deep=False) else "max_iter"
    done = getattr(state, "epoch", None)
    if done is None and isinstance(state, dict):
        done = state.get("n_iter")
    asked = int(getattr(est, length))
    if done is not None and int(done) > asked:
        what = "epochs" if length == "n_epochs" else "Newton steps"
        raise ValueError(
            f"the checkpoint {path} has run {int(done)} {what}, more than this fit's "
            f"{length}={asked}: a resumed fit may only run as long or longer; pass "
            f"{length}={int(done)} or more, or fit without resume=True to start over")
    saved = getattr(previous, "data_fingerprint_", None)
    if not isinstance(saved, dict):
        raise ValueError(
            f"the checkpoint {path} holds no record of the data it was fitted on (written by "
            "an older daskauc): it cannot be checked to be this fit's data; fit without "
            "resume=True to start over")
    if not _same_data(saved, data):
        hint = ""
        if _same_source(saved.get("X"), data.get("X")):
            hint = " (the labels y differ)"
        elif (data.get("X") or {}).get("fresh_name"):
            hint = (" (this X is a dask array whose name is drawn anew in every process: "
                    "pass the store path, or the store's arrays as open_dataset returns "
                    "them, unsliced)")
        raise ValueError(
            f"the checkpoint {path} was fitted on other data: {_describe(saved)}; this fit "
            f"is on {_describe(data)}{hint}. Resume on the data the checkpoint was fitted "
            "on (a copy of its store is the same data), or fit without resume=True")
    return previous


def _same_source(a: dict | None, b: dict | None) -> bool:
    if a is None or b is None:
        return a is b
    if a.get("kind") == b.get("kind") == "store":
        same = (a["writer"] == b["writer"] if a.get("writer") and b.get("writer")
                else a.get("path") == b.get("path"))
        return same and a.get("array") == b.get("array") and a.get("shape") == b.get("shape")
    return all(a.get(k) == b.get(k) for k in ("kind", "name", "token", "shape"))


def _same_data(saved: dict, now: dict) -> bool:
    if not (_same_source(saved.get("X"), now.get("X"))
            and _same_source(saved.get("y"), now.get("y")) and saved.get("rows") == now["rows"]):
        return False
    for count in ("positives", "negatives"):
        if saved.get(count) is not None and now.get(count) is not None \
                and saved[count] != now[count]:
            return False
    return True


def _describe(data: dict) -> str:
    X = data.get("X") or {}
    if X.get("kind") == "store":
        what = f"the store {X.get('path')} (writer {str(X.get('writer'))[:8]})"
    elif X.get("kind") == "dask":
        what = f"the dask array {X.get('name')}"
    else:
        what = f"in-memory data (token {str(X.get('token'))[:8]})"
    counts = ""
    if data.get("positives") is not None:
        counts = f", {data['positives']} positives / {data['negatives']} negatives"
    return f"{what}, shape {tuple(X.get('shape') or ())}{counts}"


def check_resumed_data(previous, path: str, n_features: int, classes) -> None:
    """After validation: the resumed checkpoint has the fit's features and classes."""
    if previous.n_features_in_ != n_features or not np.array_equal(previous.classes_, classes):
        raise ValueError(f"the checkpoint {path} was fitted on other data "
                         f"({previous.n_features_in_} features, classes "
                         f"{list(previous.classes_)})")


def _differing(saved: dict, now: dict) -> str:
    """``lam=1e-05 in the checkpoint, 1e-06 now; gamma=...``: the parameters whose values
    differ (compared as a model file stores them)."""
    def shown(params: dict, name: str) -> str:
        return json.loads(_json({name: params[name]}))[name] if name in params else "absent"

    names = sorted(set(saved) | set(now))
    return "; ".join(f"{n}={shown(saved, n)!r} in the checkpoint, {shown(now, n)!r} now"
                     for n in names if _json({n: saved.get(n)}) != _json({n: now.get(n)})
                     or (n in saved) != (n in now))


def _json(params: dict) -> str:
    from ..io import json_value

    def value(v):
        try:
            return json_value(v)
        except TypeError:
            return repr(v)

    return json.dumps({k: value(v) for k, v in params.items()}, sort_keys=True)
