"""The ``daskauc`` command line: ingest, split, embed, fit, evaluate, predict, demo, warmup,
cluster.

Every subcommand is a thin layer over the public API. Progress bars and log lines go to
stderr, results to stdout (``--json`` for machine-readable results). Without ``--scheduler``
a LocalCluster sized for the machine is started (one single-threaded worker per core) and
stopped at the end; ``daskauc cluster`` starts one that stays, for several commands and the
dashboard.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import logging
import os
import sys
import tempfile
import threading
import time
import warnings

from ._compute import persist
from ._urls import StorageUnreachableError
from ._validation import check_input_map

logger = logging.getLogger("daskauc")

DESCRIPTION = """\
Out-of-core, Dask-distributed AUC maximization. Progress and logs go to stderr, results to
stdout. Without --scheduler each command starts a local Dask cluster (one single-threaded
worker per core) and stops it at the end; 'daskauc cluster' starts one that stays, and
--scheduler ADDRESS (or DASKAUC_SCHEDULER) makes later commands use it."""

EPILOG = """\
example: daskauc ingest data.libsvm.xz data.zarr --shuffle --split train.zarr test.zarr
         daskauc embed train.zarr train-emb.zarr --also test.zarr test-emb.zarr
         daskauc fit train-emb.zarr model --validation test-emb.zarr --plot history.png
         daskauc evaluate model test-emb.zarr --plot roc.png
         daskauc predict model test.zarr scores.parquet --map train-emb.zarr"""


# -- methods the fit command knows ------------------------------------------------------------
def _methods() -> dict:
    """name -> (estimator class, fixed params) for ``daskauc fit --method`` on an embedding
    store, from the registry (``@model_class(cli=...)``): a preset's method fits its linear
    model with the preset's defaults there (it embeds a raw store first:
    :func:`_embedding_methods`)."""
    from ._registry import CLI_METHODS, MODEL_CLASSES

    methods = {}
    for name, offered in CLI_METHODS.items():
        if isinstance(offered, str):  # the reason it has no method
            continue
        cls = MODEL_CLASSES[name]
        for method, fixed in offered.items():
            methods[method] = _linear_part(cls, fixed)
    return methods


def _linear_part(cls, fixed: dict) -> tuple[type, dict]:
    """(class, fixed params) of ``cls`` on an embedding store: a preset's linear model with the
    parameters where the preset's defaults differ from the model's, else ``cls`` itself."""
    from .estimators.presets import EmbeddedAUCModel

    if not issubclass(cls, EmbeddedAUCModel):
        return cls, dict(fixed)
    solver = cls(**fixed).linear_model()
    defaults = type(solver)().get_params()
    return type(solver), {k: v for k, v in solver.get_params().items()
                          if k not in ("random_state", "class_weight") and v != defaults[k]}


def _embedding_methods() -> dict:
    """name -> the class that embeds a raw dataset store first, as Python's does: the
    methods of the papers are nonlinear (a linear fit on raw features reached 0.9495 where
    the embedded NSAUC reached 0.9999)."""
    from ._registry import CLI_METHODS, MODEL_CLASSES
    from .estimators.presets import EmbeddedAUCModel

    return {method: MODEL_CLASSES[name] for name, offered in CLI_METHODS.items()
            if not isinstance(offered, str) and issubclass(MODEL_CLASSES[name], EmbeddedAUCModel)
            for method in offered}


def _method_defaults(param: str) -> str:
    """The default of ``param`` per method, as ``fit --help`` shows it: "1e-08 (nsauc,
    nsvmsgd2); 0.001 (lsauc, ...)"; on a raw store nsauc, nsvmsgd2 and nbauc take those of
    the class that embeds first, the same values."""
    import inspect

    by_value: dict[str, list[str]] = {}
    for name, (cls, fixed) in _methods().items():
        found = inspect.signature(cls.__init__).parameters.get(param)
        if found is None:
            continue
        value = fixed.get(param, found.default)
        by_value.setdefault(str(value), []).append(name)
    return "; ".join(f"{v} ({', '.join(names)})" for v, names in by_value.items()) \
        .replace("%", "%%")


def _int_or_auto(text: str):
    return text if text == "auto" else int(text)


def _float_or_auto(text: str):
    return text if text == "auto" else float(text)


def _parse_value(text: str):
    """A --param or --positive value: JSON, else the text. A dict's keys, which JSON makes
    text, are read the same way (``class_weight={"1": 10}`` names the label 1 as
    ``--positive 1`` does: no spelling reached a numeric label)."""
    import json

    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, dict):
        keys = {}
        for k in value:
            keys.setdefault(_parse_value(k), []).append(k)
        twice = next((ks for ks in keys.values() if len(ks) > 1), None)
        if twice:  # "1" and "1.0" are one number
            raise argparse.ArgumentTypeError(
                f"the keys {' and '.join(map(repr, twice))} of {text} name one value")
        return {_parse_value(k): v for k, v in value.items()}
    return value


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"a JSON object {{...}} is expected, got {text!r}")
    return value


def _strings(value) -> list[str]:
    """The strings in an argument's value (a list of them, or --also's pairs)."""
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


@contextlib.contextmanager
def _storage_options(args):
    """``--storage-options``: fsspec's defaults for the protocols of the command's URLs, in
    this process (``fsspec.config.conf``, which every fsspec filesystem daskauc opens
    applies) and in the local cluster's workers (``FSSPEC_<PROTOCOL>``, read when they
    start); both as before at the end. The workers of a cluster given by --scheduler read
    from and write to the URLs with the options that travel with each task."""
    options = getattr(args, "storage_options", None)
    if not options:
        yield
        return
    import fsspec.config
    from fsspec.registry import known_implementations, registry

    protocols = {u.split("://", 1)[0] for u in _urls(args)} & {*known_implementations,
                                                               *registry}
    saved = {p: (fsspec.config.conf.get(p), os.environ.get(f"FSSPEC_{p.upper()}"))
             for p in protocols}
    try:
        for p in protocols:
            fsspec.config.conf[p] = {**fsspec.config.conf.get(p, {}), **options}
            os.environ[f"FSSPEC_{p.upper()}"] = json.dumps(fsspec.config.conf[p])
        yield
    finally:
        for p, (conf, env) in saved.items():
            for mapping, key, value in ((fsspec.config.conf, p, conf),
                                        (os.environ, f"FSSPEC_{p.upper()}", env)):
                if value is None:
                    mapping.pop(key, None)
                else:
                    mapping[key] = value


def _urls(args) -> list[str]:
    """The URLs among the command's arguments (its stores and files on object storage)."""
    from ._store import is_url

    return [u for k, v in vars(args).items() if k != "scheduler" for u in _strings(v)
            if is_url(u)]


# -- cluster, progress and results -----------------------------------------------------------
def _scheduler(args) -> str | None:
    return args.scheduler or os.environ.get("DASKAUC_SCHEDULER") or None


def _local_cluster_text(args) -> str:
    from dask.utils import format_bytes

    from .engine.cluster import default_worker_memory

    n = args.workers or (os.cpu_count() or 1)
    mem = args.memory_limit or format_bytes(default_worker_memory())
    return f"{n} worker(s) x 1 thread, {mem} each"


@contextlib.contextmanager
def _cluster(args):
    """The client the command runs on: the scheduler given, or a LocalCluster started (and
    announced) here and stopped at the end."""

    from .engine.cluster import close_local_cluster, get_client

    address = _scheduler(args)
    _state["cluster_used"] = True
    if not args.verbose:  # worker processes log through their own config, set before start
        _quiet_workers()
    tic = time.perf_counter()
    if address:
        _log(f"connecting to the Dask scheduler at {address} ...")
    else:
        _log(f"starting a local Dask cluster: {_local_cluster_text(args)} ...")
    client = get_client(address, n_workers=args.workers, memory_limit=args.memory_limit,
                        quiet=True)
    _log(f"{'connected' if address else 'cluster ready'} in {time.perf_counter() - tic:.1f} s; "
         f"Dask dashboard: {client.dashboard_link}")
    from .engine.progress import dashboard_announced

    dashboard_announced(client.dashboard_link)
    try:
        from ._urls import check_workers_access

        # the stores were checked from here before the cluster started; a cluster's workers
        # may lack what this process has (credentials in its own environment)
        check_workers_access(client, _urls(args))
        yield client
    finally:
        tic = time.perf_counter()
        if address:
            client.close()
        else:
            close_local_cluster(client)
            _log(f"local cluster stopped in {time.perf_counter() - tic:.1f} s")


def _quiet_workers() -> None:
    """Worker processes log only errors (a task cancelled by Ctrl-C logged a WARNING line).

    A worker process sets up its logging when it imports distributed, from its environment,
    before the nanny hands it this process's configuration: the level goes through both."""
    import dask

    dask.config.set({"logging.distributed": "error", "logging.asyncio": "critical"})
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    # s3fs's HTTP sessions still open when a worker exits: "Unclosed client session" lines,
    # two per worker after every command on s3:// (this process's are off in
    # _configure_logging)
    os.environ.setdefault("DASK_LOGGING__ASYNCIO", "critical")


def _log(line: str) -> None:
    """A status line: the daskauc logger, which the CLI prints on stderr (results go to
    stdout), above a progress bar if one is drawn."""
    logger.info("%s", line)


def _step(name: str, timings: dict | None = None):
    """A progress bar for one step; its duration goes into ``timings``."""
    from .engine.progress import progress

    @contextlib.contextmanager
    def step():
        with progress(name) as bar:
            yield bar
        if timings is not None:
            timings[name] = bar.seconds

    return step()


def _result(args, payload: dict, text: str) -> None:
    """A command's result on stdout: ``text`` for people, or one JSON object with --json."""
    print(json.dumps(payload) if args.json else text, flush=True)


# -- subcommands ------------------------------------------------------------------------------
def _check_outputs(args, *paths, kind: str, inputs=(), expected_bytes=None,
                   overwrite: bool | None = None) -> None:
    """Everything knowable about the outputs before any work (and before a cluster starts):
    none is an input or another output, none replaces something unasked or of another kind,
    each can be written (its directory, the free space when the size is known)."""
    from ._store import resolve_path
    from ._store_write import check_output

    seen: dict[str, str] = {}
    for path in paths:
        target = resolve_path(path)
        if target in seen:
            raise ValueError(f"{path} is given as two outputs of this command; choose "
                             "different paths")
        seen[target] = path
        check_output(path, kind=kind, inputs=inputs, expected_bytes=expected_bytes,
                     overwrite=args.overwrite if overwrite is None else overwrite)


def cmd_ingest(args) -> int:
    from .data.ingest import ingest
    from .data.split import split_store

    kwargs = dict(format=args.format, n_features=args.n_features, pos_label=args.pos_label,
                  label_column=args.label_column, delimiter=args.delimiter, dtype=args.dtype,
                  chunk_rows=args.chunk_rows, shuffle=args.shuffle, random_state=args.seed,
                  overwrite=args.overwrite, allow_dense=args.allow_dense)
    if args.positive_classes:
        kwargs["positive_classes"] = [_parse_value(v) for v in args.positive_classes.split(",")]
    if args.label is not None:
        kwargs["label"] = int(args.label) if args.label.lstrip("-").isdigit() else args.label
    kwargs.update(positive=args.positive, categorical=args.categorical,
                  features=args.features.split(",") if args.features else None,
                  drop=args.drop.split(",") if args.drop else ())
    if not os.path.exists(args.source) and "://" not in args.source:
        raise FileNotFoundError(f"no input file {args.source}")
    _check_outputs(args, args.store, *(args.split or ()), kind="dataset", inputs=[args.source])
    with _step(f"ingest {args.source} -> {args.store}"):
        ds = ingest(args.source, args.store, **kwargs)
    a = ds.attrs
    negative, positive = a.get("classes") or ([], [])
    chosen = args.positive or args.pos_label is not None or args.positive_classes
    rule = ("as asked" if chosen else
            "the larger of the two labels; choose another with --positive")
    payload = {"store": args.store, "n_samples": a.get("n_samples"),
               "n_features": a.get("n_features"), "n_positive": a.get("n_positive"),
               "n_negative": a.get("n_negative"), "positive": positive, "negative": negative,
               "positive_rule": rule, "label_column": a.get("label_column"),
               "feature_names": a.get("feature_names")}
    if args.split:
        train, test = args.split
        with _step(f"split {args.store} -> {train}, {test}"):
            split_store(args.store, train, test, test_size=args.test_size,
                        random_state=args.seed, overwrite=args.overwrite)
        payload.update(train=train, test=test)
    names = ", ".join(map(repr, positive)) or "?"
    _result(args, payload, f"{args.store}: {a.get('n_samples')} rows x {a.get('n_features')} "
            f"features, {a.get('n_positive')} positive / {a.get('n_negative')} negative\n"
            f"positive class: {names} (negative: {', '.join(map(repr, negative))}; {rule})")
    return 0


def cmd_split(args) -> int:
    from ._dataset import open_dataset
    from .data.split import split_store

    open_dataset(args.store)
    _check_outputs(args, args.train, args.test, kind="dataset", inputs=[args.store])
    with _step(f"split {args.store}"):
        split_store(args.store, args.train, args.test, test_size=args.test_size,
                    random_state=args.seed, overwrite=args.overwrite)
    _result(args, {"store": args.store, "train": args.train, "test": args.test},
            f"{args.store} -> {args.train}, {args.test}")
    return 0


def cmd_embed(args) -> int:
    from ._dataset import open_dataset
    from .embed.nystroem import KMeansNystroem, load_embedding_map

    # inputs and outputs are checked before the cluster starts and before any work
    fmap = load_embedding_map(args.map) if args.map else None
    ds = open_dataset(args.source)
    sources = [args.source, *(src for src, _ in args.also or [])]
    rows = max(open_dataset(src).n_samples for src in sources[1:]) if args.also else 0
    if fmap is not None:
        width = fmap.n_components_
    elif args.landmarks == "auto":
        from .embed.nystroem import auto_landmarks

        width = auto_landmarks(ds.n_samples, ds.n_features)
    else:
        width = args.landmarks
    itemsize = 8 if (fmap is not None and fmap.dtype == "float64") or args.dtype == "float64" \
        else 4
    _check_outputs(args, args.out, *(out for _, out in args.also or []), kind="embedding",
                   inputs=[*sources, args.map],
                   expected_bytes=max(ds.n_samples, rows) * width * itemsize)
    written = []
    with _cluster(args):
        if fmap is not None:
            with _step(f"map {args.source} -> {args.out} with the map of {args.map}"):
                out = fmap.write_embedding(args.source, args.out, overwrite=args.overwrite)
            written.append((args.out, out))
        else:
            scaler = None
            if not args.no_standardize:
                from .data.scale import StandardScaler

                with _step("standardize (fit)"):
                    scaler = StandardScaler().fit(ds.X)
            Xs = scaler.transform(ds.X) if scaler is not None else ds.X
            fmap = KMeansNystroem(n_components=args.landmarks, gamma=args.gamma,
                                  landmarks=args.landmark_method,
                                  kmeans_epochs=args.kmeans_epochs, dtype=args.dtype,
                                  random_state=args.seed)
            with _step(f"k-means landmarks ({width})"):
                fmap.fit(Xs)
            for src, dst in [(args.source, args.out), *(args.also or [])]:
                with _step(f"embed + write {dst}"):
                    out = fmap.write_embedding(src, dst, scaler=scaler,
                                               overwrite=args.overwrite)
                written.append((dst, out))
    _result(args, {"stores": [{"store": dst, "n_samples": int(o.X.shape[0]),
                               "n_features": int(o.X.shape[1]), "dtype": str(o.X.dtype)}
                              for dst, o in written]},
            "\n".join(f"{dst}: {o.X.shape[0]} x {o.X.shape[1]} {o.X.dtype}"
                      for dst, o in written))
    return 0


def _fit_estimator(args, kind: str | None = "embedding"):
    """The estimator ``daskauc fit`` asked for, or an error message. On a raw dataset store
    (``kind`` "dataset") the nonlinear methods embed it first (their Python class)."""
    methods = _methods()
    if args.method not in methods:
        return None, f"unknown method {args.method!r}; known: {', '.join(sorted(methods))}"
    cls, fixed = methods[args.method]
    if kind == "dataset" and args.method in _embedding_methods():
        cls, fixed = _embedding_methods()[args.method], {}
    params = dict(fixed)
    for item in args.param or []:
        if "=" not in item:
            return None, f"--param expects KEY=VALUE, got {item!r}"
        key, value = item.split("=", 1)
        try:
            params[key] = _parse_value(value)
        except argparse.ArgumentTypeError as exc:
            return None, f"--param {key}: {exc}"
    for key in ("lam", "C", "n_epochs"):
        value = getattr(args, key, None)
        if value is not None:
            params[key] = value
    valid = set(cls().get_params())
    unknown = sorted(set(params) - valid)
    if unknown:
        return None, f"{cls.__name__} has no parameter(s) {unknown}; it takes {sorted(valid)}"
    if "random_state" in valid and args.seed is not None:
        params["random_state"] = args.seed
    return cls(**params), None


def _check_plot(path: str | None, overwrite: bool) -> None:
    """A --plot target: matplotlib importable, a known image type, not overwritten unasked."""
    if path is None:
        return
    from .plot import pyplot

    try:
        pyplot()
    except ImportError as exc:
        raise ValueError(f"--plot: {exc}") from None
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".pdf", ".svg", ".jpg", ".jpeg"):
        raise ValueError(f"--plot {path}: use a .png, .pdf, .svg or .jpg file name")
    _check_file_output(path, overwrite, "--plot")


def _check_file_output(path: str, overwrite: bool, option: str) -> None:
    """An output that is a plain file (a figure, a scheduler file): not replaced unasked,
    not a directory, its directory writable."""
    from ._store_write import check_directory

    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite to replace it")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{option} {path} is a directory")
    check_directory(os.path.abspath(path))


def _save_figure(ax, path: str) -> None:
    import matplotlib.pyplot as plt

    fig = (ax[0] if isinstance(ax, (list, tuple)) else ax).figure
    fig.savefig(path, dpi=120)
    plt.close(fig)
    _log(f"figure written to {path}")


def cmd_fit(args) -> int:
    from ._dataset import open_dataset
    from ._store import stored_kind
    from .io import save_model

    kind = stored_kind(args.store)
    est, error = _fit_estimator(args, kind)
    if error:
        print(f"daskauc fit: error: {error}", file=sys.stderr)
        return 2
    # the model's path is checked before the fit (a refused save after it would lose the
    # model) and the inputs before the cluster starts
    inputs = [args.store, args.validation]
    _check_outputs(args, args.model, kind="model", inputs=inputs)
    if args.checkpoint:
        from ._store import resolve_path

        if resolve_path(args.checkpoint) == resolve_path(args.model):
            raise ValueError(f"--checkpoint {args.checkpoint} is the model's path: the "
                             "checkpoint is replaced after every epoch and the model written "
                             "at the end; give them different paths")
        # replaced after every epoch: only by a model (the estimator checks it is a
        # checkpoint of its own fit), never the data
        _check_outputs(args, args.checkpoint, kind="model", inputs=inputs, overwrite=True)
    _check_plot(args.plot, args.overwrite)
    if args.plot and not args.validation and "n_epochs" in est.get_params() \
            and "max_iter" not in est.get_params():
        print(f"daskauc fit: error: --plot {args.plot}: {args.method}'s history records the "
              "validation AUC per epoch only with --validation STORE (without it, only the "
              "seconds per epoch): add --validation TEST-EMB.zarr", file=sys.stderr)
        return 2
    train = open_dataset(args.store)
    validation = None
    kwargs = {}
    if args.validation:
        v = open_dataset(args.validation)
        validation = (v.X, v.y)
        if "validation" in est.fit.__code__.co_varnames:
            kwargs["validation"] = validation
    if args.checkpoint:
        if "checkpoint" not in est.fit.__code__.co_varnames or not (
                {"n_epochs", "max_iter"} & set(est.get_params())):
            print(f"daskauc fit: error: --checkpoint: {type(est).__name__} has no epochs or "
                  "steps to checkpoint", file=sys.stderr)
            return 2
        from .estimators._checkpoint import open_checkpoint

        # before the cluster starts: a checkpoint that is not this fit's, or of other data
        # or a longer run (with --resume), is refused before any work
        checkpoint = open_checkpoint(est, args.checkpoint, train.X, train.y,
                                     resume=args.resume)
        kwargs.update(checkpoint=checkpoint, resume=args.resume)
    elif args.resume:
        print("daskauc fit: error: --resume needs --checkpoint PATH", file=sys.stderr)
        return 2
    if kind == "dataset" and args.method in _embedding_methods():
        _log(f"{args.store} is a raw dataset store: {args.method} embeds it first "
             f"({type(est).__name__}: standardize, k-means Nystroem map, then the solver)")
    elif kind == "dataset" and args.method not in ("kernel",):
        _log(f"{args.store} is a raw dataset store: {args.method} fits a linear model on its "
             "features; for a nonlinear one embed it first (daskauc embed) or use --method "
             "nsauc, nbauc or kernel")
    timings: dict[str, float] = {}
    with _cluster(args):
        with _step(f"fit {args.method} on {args.store}", timings):
            # the store's path, as in Python: the model's classes_ are then the store's raw
            # labels (a class_weight may name them), not -1 and +1
            est.fit(args.store, **kwargs)
        save_model(est, args.model, overwrite=args.overwrite)  # the result says it
        val_auc = None
        if validation is not None:
            with _step(f"validation AUC on {args.validation}"):
                val_auc = float(est.score(*validation))
    if args.plot:
        from .plot import plot_history

        _save_figure(plot_history(est, title=f"daskauc fit --method {args.method}"), args.plot)
    payload = {"model": args.model, "method": args.method, "estimator": type(est).__name__,
               "n_iter": int(getattr(est, "n_iter_", 0)),
               "seconds": round(timings[f"fit {args.method} on {args.store}"], 3)}
    text = f"saved {args.method} ({type(est).__name__}) to {args.model}"
    classes = getattr(est, "classes_", None)
    if classes is not None and len(classes) == 2:
        from .data.labels import label_json

        payload["positive_class"] = label_json(classes[1])
        text += (f"\npositive class: {label_json(classes[1])!r} (ranked high; negative: "
                 f"{label_json(classes[0])!r})")
    if val_auc is not None:
        payload["validation_auc"] = val_auc
        text += f"\nvalidation AUC: {val_auc:.6f}"
    _result(args, payload, text)
    return 0


def _check_width(est, model: str, ds, store: str) -> None:
    """A store whose width is not the model's: say which store to give, before any work (a
    model fitted on an embedding needs the test rows through the same map)."""
    expected = getattr(est, "n_features_in_", None)
    if expected is None or expected == ds.n_features:
        check_input_map(est, ds.attrs, store)
        return
    from ._store import stored_kind

    if stored_kind(store) == "dataset":
        how = (f"if {model} was fitted on an embedding store, map the test rows with its map "
               f"first: daskauc embed {store} TEST-EMB.zarr --map TRAIN-EMB.zarr, then "
               f"evaluate on TEST-EMB.zarr (or score the raw rows: daskauc predict {model} "
               f"{store} SCORES.parquet --map TRAIN-EMB.zarr)")
    else:
        how = "give a store with the features of the training store"
    raise ValueError(f"{store} has {ds.n_features} features but {type(est).__name__} in "
                     f"{model} expects {expected}: {how}")


def cmd_evaluate(args) -> int:
    from ._dataset import open_dataset
    from .io import load_model
    from .metrics import roc_auc

    est = load_model(args.model)
    ds = open_dataset(args.store)
    _check_width(est, args.model, ds, args.store)
    _check_plot(args.plot, args.overwrite)
    with _cluster(args):
        with _step(f"evaluate on {args.store}"):
            scores = est.decision_function(ds.X)
            if args.plot:  # the scores are used twice: computed once
                scores = persist(scores)[0] if hasattr(scores, "dask") else scores
            auc = float(roc_auc(ds.y, scores))
        if args.plot:
            from .plot import plot_roc

            with _step(f"ROC curve -> {args.plot}"):
                ax = plot_roc(ds.y, scores, pr=args.pr,
                              label=f"{type(est).__name__} on {os.path.basename(args.store)}")
                _save_figure(ax, args.plot)
    _result(args, {"model": args.model, "store": args.store, "auc": auc},
            f"AUC of {args.model} on {args.store}: {auc:.6f}")
    return 0


def cmd_predict(args) -> int:
    from .scoring import plan_scores

    # the model, the input, the map and the output are checked before the cluster starts
    plan = plan_scores(args.model, args.input, args.output, id_column=args.id_column,
                       map=args.map, overwrite=args.overwrite, chunk_rows=args.chunk_rows,
                       handle_unknown=args.handle_unknown)
    with _cluster(args):
        with _step(f"predict {args.input} -> {args.output}"):
            done = plan.run()
    rate = done.rows_per_second
    _result(args, {"rows": done.n_rows, "seconds": round(done.seconds, 3),
                   "rows_per_second": round(rate, 1), "output": args.output,
                   "format": done.format},
            f"{args.output}: {done.n_rows} rows scored ({done.format}, {done.n_chunks} "
            f"chunks) in {done.seconds:.1f} s, {rate:,.0f} rows/s")
    return 0


def cmd_demo(args) -> int:
    """Ingest the shipped spambase data, embed it, train NSAUC and print test AUC and timings."""
    import shutil

    from ._dataset import open_dataset
    from .data.default import default_dataset_path
    from .data.ingest import ingest
    from .data.scale import StandardScaler
    from .data.split import split_store
    from .embed.nystroem import KMeansNystroem
    from .estimators.pairwise_sgd import PairwiseHingeSGD
    from .metrics import roc_auc

    timings: dict[str, float] = {}
    keep = args.workdir is not None or args.keep
    workdir = args.workdir or tempfile.mkdtemp(prefix="daskauc-demo-")
    os.makedirs(workdir, exist_ok=True)
    p = lambda name: os.path.join(workdir, name)  # noqa: E731
    try:
        with _cluster(args):
            with _step("ingest spambase (shipped with daskauc)", timings):
                ingest(default_dataset_path(), p("spambase.zarr"), shuffle=True,
                       random_state=args.seed, overwrite=True, chunk_rows=1000)
            with _step("stratified 80/20 split", timings):
                split_store(p("spambase.zarr"), p("train.zarr"), p("test.zarr"), test_size=0.2,
                            random_state=args.seed, overwrite=True)
            train = open_dataset(p("train.zarr"))
            with _step("standardize (fit)", timings):
                scaler = StandardScaler().fit(train.X)
            fmap = KMeansNystroem(n_components=args.landmarks, random_state=args.seed)
            with _step(f"k-means landmarks ({args.landmarks})", timings):
                fmap.fit(scaler.transform(train.X))
            with _step("embed + write train/test embeddings", timings):
                emb_train = fmap.write_embedding(p("train.zarr"), p("train-emb.zarr"),
                                                 scaler=scaler, overwrite=True)
                emb_test = fmap.write_embedding(p("test.zarr"), p("test-emb.zarr"),
                                                scaler=scaler, overwrite=True)
            model = PairwiseHingeSGD(lam=args.lam, n_epochs=args.epochs, random_state=args.seed)
            with _step(f"NSAUC ({args.epochs} epochs)", timings):
                model.fit(emb_train.X, emb_train.y)
            with _step("test AUC", timings):
                auc = float(roc_auc(emb_test.y, model.decision_function(emb_test.X)))
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    payload = {"dataset": "spambase", "n_train": int(train.n_samples),
               "n_test": int(emb_test.n_samples), "n_components": int(fmap.n_components_),
               "test_auc": auc, "timings": {k: round(v, 3) for k, v in timings.items()},
               "workdir": workdir if keep else None}
    text = "\n".join([
        f"spambase: {train.n_samples} train rows, {emb_test.n_samples} test rows, "
        f"{fmap.n_components_} embedding dimensions",
        f"NSAUC test AUC: {auc:.4f}   (Khalid et al. report 0.9804 for NBAUC on spambase)",
        "timings (s): " + ", ".join(f"{k}: {v:.2f}" for k, v in timings.items()),
        f"stores kept in {workdir}" if keep else "stores removed (keep them with --workdir DIR "
        "or --keep)",
    ])
    _result(args, payload, text)
    return 0


def _warm_up_here() -> float:
    """:func:`daskauc.estimators._warmup.warm_up` in this process on the threaded scheduler
    (on a worker: as a task, so the worker keeps answering); returns its seconds."""
    import dask

    from .estimators._warmup import warm_up

    with dask.config.set(scheduler="threads"):
        return sum(warm_up().values())


def cmd_warmup(args) -> int:
    """Compile (or load) every numba kernel the default fits use, so that later processes
    load them from numba's on-disk cache: once after installing, or in a container image."""
    tic = time.perf_counter()
    address = _scheduler(args)
    if address:  # one worker per host: the workers of a host share its on-disk cache
        from .engine.cluster import get_client

        client = get_client(address, quiet=True)
        try:
            hosts: dict[str, str] = {}
            for worker, info in sorted(client.scheduler_info()["workers"].items()):
                hosts.setdefault(info["host"], worker)
            _log(f"compiling (or loading) numba's kernels on {len(hosts)} host(s) ...")
            futures = {host: client.submit(_warm_up_here, workers=[worker], pure=False,
                                           allow_other_workers=False)
                       for host, worker in hosts.items()}
            steps = {host: round(f.result(), 1) for host, f in futures.items()}
        finally:
            client.close()
    else:
        _log("compiling (or loading) numba's kernels on small data ...")
        steps = {"here": round(_warm_up_here(), 1)}
    seconds = time.perf_counter() - tic
    _result(args, {"seconds": seconds, "hosts": steps},
            f"numba's kernels compiled and cached in {seconds:.1f} s")
    return 0


def cmd_cluster(args) -> int:
    """Start a local cluster that stays until interrupted; later commands use --scheduler."""
    import signal

    from .engine.cluster import close_local_cluster, get_client

    if not args.verbose:
        _quiet_workers()
    if args.scheduler_file:
        _check_file_output(args.scheduler_file, args.overwrite, "--scheduler-file")
    _check_port_free(args.host, args.port)
    _state["cluster_used"] = True
    tic = time.perf_counter()
    _log(f"starting a local Dask cluster: {_local_cluster_text(args)} ...")
    client = get_client(None, n_workers=args.workers, memory_limit=args.memory_limit,
                        host=args.host, scheduler_port=args.port, quiet=True)
    cluster = client.cluster
    address = cluster.scheduler_address
    if args.scheduler_file:
        client.write_scheduler_file(args.scheduler_file)
    _log(f"cluster ready in {time.perf_counter() - tic:.1f} s; stop it with Ctrl-C")
    _log(_exposure(args.host))
    _result(args, {"scheduler": address, "dashboard": client.dashboard_link,
                   "scheduler_file": args.scheduler_file, "host": args.host},
            f"scheduler: {address}\ndashboard: {client.dashboard_link}\n"
            f"use it:    daskauc --scheduler {address} fit ...   "
            f"(or export DASKAUC_SCHEDULER={address})")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    finally:
        close_local_cluster(client)
        if args.scheduler_file and os.path.exists(args.scheduler_file):
            os.remove(args.scheduler_file)
        _log("cluster stopped")
    return 0


def _check_port_free(host: str, port: int) -> None:
    """The scheduler's port, before anything starts: a taken one gave three tracebacks."""
    import socket

    if not port:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ValueError(
                f"port {port} on {host} is taken ({exc.strerror}): another Dask scheduler or "
                f"'daskauc cluster' runs there? Use it with --scheduler tcp://{host}:{port}, "
                "or start this one with --port 0 (any free port)") from None


def _exposure(host: str) -> str:
    """What a cluster on ``host`` exposes, and to whom."""
    if host in ("127.0.0.1", "localhost", "::1"):
        return ("the scheduler, its workers and the dashboard listen on this machine only "
                f"({host}); to serve other machines, start it with --host ADDRESS and "
                "secure it first (see 'Security' in docs/cluster.md)")
    return (f"WARNING: the scheduler and dashboard listen on {host} without TLS or "
            "authentication: anyone who reaches this address can run code on the workers "
            "and read their data, logs and paths; use it on a trusted network only, or set "
            "up distributed's TLS (see 'Security' in docs/cluster.md)")


# -- argument parsing -------------------------------------------------------------------------
class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default shown (unless its help already says it, or it is a flag);
    descriptions and epilogs kept as written."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" not in text and action.option_strings and action.nargs != 0
                and action.default not in (None, argparse.SUPPRESS)):
            text += " (default: %(default)s)"
        return text


def _global_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """Options accepted before or after the subcommand (after it, they override)."""
    default = (lambda value: argparse.SUPPRESS) if suppress else (lambda value: value)
    parser.add_argument("--scheduler", default=default(None), metavar="ADDRESS",
                        help="address (tcp://host:8786) or scheduler JSON file of a running "
                        "Dask cluster; default: $DASKAUC_SCHEDULER, else start a local cluster")
    parser.add_argument("--workers", type=int, default=default(None),
                        help="workers of the local cluster (default: one per core)")
    parser.add_argument("--memory-limit", default=default(None),
                        help="memory per local worker, e.g. 4GiB (default: 80%% of RAM / "
                        "workers)")
    parser.add_argument("--json", action="store_true", default=default(False),
                        help="print the result as one JSON object on stdout")
    parser.add_argument("--storage-options", type=_json_object, default=default(None),
                        metavar="JSON", help="fsspec options of the command's URLs (s3://, "
                        "gs:// ...), e.g. '{\"endpoint_url\": \"https://...\"}'; default: "
                        "credentials and endpoint from the environment (docs/cluster.md)")
    parser.add_argument("-v", "--verbose", action="store_true", default=default(False),
                        help="also show Dask's own log messages")


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    parser = argparse.ArgumentParser(prog="daskauc", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=_HelpFormatter, allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"daskauc {__version__}")
    _global_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, help, func):
        # no abbreviations: "--label class" was read as "--label-column class"
        p = sub.add_parser(name, help=help, description=help, formatter_class=_HelpFormatter,
                           allow_abbrev=False)
        _global_options(p, suppress=True)
        p.set_defaults(func=func)
        return p

    p = command("ingest", "Parquet, CSV or LIBSVM/svmlight -> Zarr dataset store", cmd_ingest)
    p.add_argument("source", help="Parquet file or directory (local or URL), or a text file "
                   "(plain, .gz, .bz2 or .xz)")
    p.add_argument("store", help="dataset store to write (a directory)")
    p.add_argument("--format", choices=["parquet", "libsvm", "csv"], default=None,
                   help="input format (default: from the file name and first line)")
    p.add_argument("--label", default=None, metavar="COLUMN",
                   help="the label column, by name (Parquet, CSV with a header) or index "
                   "(default: Parquet: the column named label, y, target or class; CSV: the "
                   "last)")
    p.add_argument("--positive", action="append", type=_parse_value, default=None,
                   metavar="VALUE", help="the positive class's raw label; repeat it to group "
                   "several labels as positive (default: the larger of two labels)")
    p.add_argument("--features", default=None, metavar="COLUMNS",
                   help="comma-separated feature columns to read (default: all but the label)")
    p.add_argument("--drop", default=None, metavar="COLUMNS",
                   help="comma-separated columns to leave out (an id, a timestamp)")
    p.add_argument("--categorical", choices=["error", "onehot"], default="error",
                   help="a text feature column is an error naming it, or one-hot encoded")
    p.add_argument("--n-features", type=int, default=None,
                   help="number of features (default: the largest index seen)")
    p.add_argument("--pos-label", type=_parse_value, default=None,
                   help="raw label of the positive class (default: the larger of two labels)")
    p.add_argument("--positive-classes", default=None,
                   help="comma-separated raw labels grouped as positive (multi-class files)")
    p.add_argument("--label-column", type=int, default=-1,
                   help="CSV: the label's column index (negative counts from the end)")
    p.add_argument("--delimiter", default=None,
                   help="CSV: field delimiter (default: comma or whitespace, detected)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                   help="stored feature type")
    p.add_argument("--chunk-rows", type=int, default=None,
                   help="rows per chunk (default: about 64 MiB per chunk)")
    p.add_argument("--shuffle", action="store_true",
                   help="write the rows in a uniform random order (out of core)")
    p.add_argument("--allow-dense", action="store_true",
                   help="LIBSVM: write the dense matrix even when it is over 1 GiB and 100x "
                   "the non-zeros read (one huge feature index); refused otherwise")
    p.add_argument("--seed", type=int, default=0, help="random seed of shuffle and split")
    p.add_argument("--split", nargs=2, metavar=("TRAIN", "TEST"), default=None,
                   help="also write a stratified train/test split to these stores")
    p.add_argument("--test-size", type=float, default=0.2, help="test fraction of --split")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")

    p = command("split", "stratified train/test split of a dataset store", cmd_split)
    p.add_argument("store", help="dataset store to split")
    p.add_argument("train", help="training store to write")
    p.add_argument("test", help="test store to write")
    p.add_argument("--test-size", type=float, default=0.2, help="test fraction")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")

    p = command("embed", "standardize, fit k-means Nystroem landmarks, write the embedding",
                cmd_embed)
    p.add_argument("source", help="dataset store to embed (and fit on, without --map)")
    p.add_argument("out", help="embedding store to write")
    p.add_argument("--map", default=None,
                   help="embedding store whose fitted map is applied (no fitting)")
    p.add_argument("--landmarks", type=_int_or_auto, default="auto",
                   help="number of landmarks (embedding dimensions, at most); 'auto': 1,600, "
                   "or fewer for small or low-dimensional data (default: auto)")
    p.add_argument("--landmark-method", default="kmeans", choices=["kmeans", "random", "all"],
                   help="how landmarks are chosen")
    p.add_argument("--gamma", type=float, default=None,
                   help="Gaussian kernel gamma (default: 1 / mean squared distance to the mean)")
    p.add_argument("--kmeans-epochs", type=int, default=3, help="mini-batch k-means epochs")
    p.add_argument("--no-standardize", action="store_true",
                   help="embed the features as stored (default: standardize first)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                   help="embedding type")
    p.add_argument("--also", nargs=2, action="append", metavar=("SOURCE", "OUT"),
                   help="map another dataset store with the same fitted map (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")

    p = command("fit", "fit an AUC solver on a dataset or embedding store", cmd_fit)
    p.add_argument("store", help="training store")
    p.add_argument("model", help="where to save the fitted model (Zarr group)")
    p.add_argument("--method", default="nsauc",
                   help="nsauc, nsvmsgd2, nbauc (= ranksvm: PRSVM+ Newton), kernel "
                        "(KernelAUC, on a raw store: Gaussian kernel with many centres), "
                        "lsauc, twopass, opauc, solam, spam, spdam, oam, uni-exp, uni-squ")
    p.add_argument("--lam", type=float, default=None,
                   help="regularization of the SGD, least-squares and kernel methods "
                   f"(default: {_method_defaults('lam')})")
    p.add_argument("--C", type=_float_or_auto, default=None,
                   help=f"loss weight of nbauc/ranksvm and oam (default: {_method_defaults('C')})")
    p.add_argument("--epochs", dest="n_epochs", type=int, default=None,
                   help="passes over the data of the stochastic methods (default: "
                   f"{_method_defaults('n_epochs')})")
    p.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="any other estimator parameter (JSON value; repeatable)")
    p.add_argument("--validation", default=None,
                   help="store whose AUC is recorded per epoch / step and reported")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="write the fit's history (objective, validation AUC) as a figure")
    p.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="save the model with its solver state here after every epoch or "
                        "Newton step (atomically)")
    p.add_argument("--resume", action="store_true",
                   help="continue the fit saved at --checkpoint (the same model as an "
                        "uninterrupted fit, bit for bit)")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")

    p = command("evaluate", "exact AUC of a saved model on a store", cmd_evaluate)
    p.add_argument("model", help="saved model (from daskauc fit)")
    p.add_argument("store", help="store to score (with labels)")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="write the ROC curve (with the AUC) as a figure")
    p.add_argument("--pr", action="store_true",
                   help="with --plot: add the precision-recall curve beside the ROC curve")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --plot file")

    p = command("predict", "score every row of a store or Parquet input with a saved model: "
                "id, decision_function and probability written to Zarr or Parquet",
                cmd_predict)
    p.add_argument("model", help="saved model (from daskauc fit)")
    p.add_argument("input", help="dataset or embedding store, or a Parquet file or directory")
    p.add_argument("output", help="scores to write: NAME.zarr (a Zarr group) or NAME.parquet "
                   "(a directory of Parquet part files), by its name")
    p.add_argument("--id-column", default=None, metavar="COL",
                   help="Parquet input: the column written as the id (default: the row index)")
    p.add_argument("--map", default=None, metavar="MAP",
                   help="for a model fitted on an embedding and a raw input: the embedding "
                   "store it was fitted on, whose map is applied to each chunk on the fly")
    p.add_argument("--chunk-rows", type=int, default=None,
                   help="rows per task and output chunk (default: a store's chunks; for "
                   "Parquet about 8 MiB of float64 features)")
    p.add_argument("--handle-unknown", choices=["error", "ignore"], default="error",
                   help="Parquet input, a model fitted on one-hot features (column=value): a "
                   "value the model has no feature for is an error naming it and its row, or "
                   "zeros for that column (ignore)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")

    p = command("demo", "end-to-end run on the spambase data shipped with daskauc", cmd_demo)
    p.add_argument("--landmarks", type=int, default=400, help="Nystroem landmarks")
    p.add_argument("--epochs", type=int, default=5, help="NSAUC epochs")
    p.add_argument("--lam", type=float, default=1e-6, help="NSAUC regularization")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--workdir", default=None,
                   help="keep the stores in this directory (default: a temporary directory, "
                   "removed at the end)")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary directory and print its path")

    command("warmup", "compile numba's kernels into its on-disk cache (once after installing, "
            "or when building a container image), so that first fits do not compile; with "
            "--scheduler, on one worker of each host", cmd_warmup)

    p = command("cluster", "start a local Dask cluster that stays until Ctrl-C, for later "
                "commands (--scheduler) and the dashboard", cmd_cluster)
    p.add_argument("--port", type=int, default=8786, help="scheduler port (0: any free port)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address the scheduler, workers and dashboard listen on; another than "
                   "127.0.0.1 exposes them to the network, unauthenticated (docs/cluster.md, "
                   "Security)")
    p.add_argument("--scheduler-file", default=None, metavar="FILE",
                   help="also write the scheduler's address to this JSON file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing "
                   "--scheduler-file")
    return parser


def _configure_logging(verbose: bool) -> None:
    """daskauc's own progress lines on stderr; Dask's logs only with --verbose."""
    from .engine.progress import log_to_stderr

    log_to_stderr(logging.INFO)
    logging.getLogger("distributed").setLevel(logging.INFO if verbose else logging.WARNING)
    for name in ("bokeh", "tornado"):  # the dashboard server's notes: nothing to act on
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.ERROR)
    # an interrupted gather leaves an asyncio task whose AllExit is "never retrieved": a
    # traceback after Ctrl-C that says nothing the one line "interrupted" does not
    logging.getLogger("asyncio").setLevel(logging.WARNING if verbose else logging.CRITICAL)
    if not verbose:
        logging.getLogger("tornado.application").addFilter(_drop_interrupted_sync_cancel)
        # a warning is one line a user can act on, not the file and source line it came from
        warnings.formatwarning = _one_line_warning


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"[daskauc] warning: {message}\n"


def _drop_interrupted_sync_cancel(record: logging.LogRecord) -> bool:
    """False for one known traceback of an interrupted call (``distributed`` 2026.8).

    When Ctrl-C reaches ``distributed.utils.sync`` before its coroutine has started, the
    cancel callback it schedules reads a variable not yet assigned and tornado logs the
    ``NameError`` at ERROR. Nothing was running to cancel, so the one line "interrupted" says
    all there is; every other error of the event loop still prints.
    """
    exc = record.exc_info[1] if record.exc_info else None
    return not (isinstance(exc, NameError) and "sync.<locals>.cancel" in record.getMessage())


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every ``finally`` runs (the local cluster
    stops, partial outputs are removed) before the process exits with 143."""


def _raise_terminated(signum, frame):
    raise _Terminated()


#: OS errors about files, not about the cluster: reported with their path, exit status 1
_FILE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT,
                          errno.ENOENT, errno.EEXIST, errno.EISDIR, errno.ENOTDIR, errno.EIO,
                          errno.EFBIG, errno.ENAMETOOLONG, errno.ENOTEMPTY, errno.EMFILE})


def main(argv: list[str] | None = None) -> int:
    import signal

    for stream in (sys.stdout, sys.stderr):  # a path that is not UTF-8 prints as its bytes
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="surrogateescape")
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    _state["cluster_used"] = False
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        with _storage_options(args):
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"daskauc {args.command}: interrupted; nothing was saved by the interrupted "
              "step", file=sys.stderr)
        return 130
    except _Terminated:
        print(f"daskauc {args.command}: terminated (SIGTERM); nothing was saved by the "
              "interrupted step", file=sys.stderr)
        return 143
    except (ValueError, TypeError, FileNotFoundError, FileExistsError, IsADirectoryError,
            NotADirectoryError, PermissionError, ImportError, StorageUnreachableError) as exc:
        print(f"daskauc {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if _file_error(exc) or (isinstance(exc, OSError) and not _state["cluster_used"]):
            print(f"daskauc {args.command}: error: {_os_error_line(exc, args)}",
                  file=sys.stderr)
            return 1
        if not (_state["cluster_used"] and _cluster_failure(exc)):
            raise
        print(f"daskauc {args.command}: error: the Dask cluster failed ({type(exc).__name__}: "
              f"{_one_line(exc) or 'no detail'}){_memory_hint(args, exc)}; nothing was saved "
              "by the interrupted step", file=sys.stderr)
        return 3
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


_state = {"cluster_used": False}


def _one_line(exc: BaseException) -> str:
    """An exception as one line (the first line of its message)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _os_error_line(exc: OSError, args) -> str:
    """An OS error with the path it is about: its own, or the command's outputs."""
    if exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or _one_line(exc)}"
    text = exc.strerror or _one_line(exc)
    outputs = []
    for name in _OUTPUTS.get(args.command, ()):
        value = getattr(args, name, None) or ()
        if name == "also":
            value = [out for _, out in value]
        outputs += [value] if isinstance(value, str) else list(value)
    return f"{text} (writing {', '.join(map(str, outputs))})" if outputs else text


#: the arguments that name each command's outputs
_OUTPUTS = {"ingest": ("store", "split"), "split": ("train", "test"), "embed": ("out", "also"),
            "fit": ("model", "checkpoint", "plot"), "evaluate": ("plot",), "predict": ("output",),
            "cluster": ("scheduler_file",)}


def _file_error(exc: BaseException) -> bool:
    """An OS error about a file (a full disk, a read-only directory, a missing path), raised
    here or on a worker: the user's to fix, not the cluster's."""
    try:
        from distributed.comm.core import CommClosedError
    except ImportError:  # pragma: no cover
        CommClosedError = ()  # noqa: N806
    if not isinstance(exc, OSError) or isinstance(exc, (CommClosedError, ConnectionError,
                                                        TimeoutError)):
        return False
    return exc.errno in _FILE_ERRNOS or exc.filename is not None


def _memory_hint(args, exc: BaseException) -> str:
    """For a task whose workers died under it: the memory limit is the usual cause."""
    from distributed import KilledWorker

    if not isinstance(exc, KilledWorker):
        return ""
    if _scheduler(args):
        return ("; its workers died while running it: if they ran out of memory, give the "
                "cluster's workers more (dask worker --memory-limit)")
    from dask.utils import format_bytes

    from .engine.cluster import default_worker_memory

    limit = args.memory_limit or format_bytes(default_worker_memory())
    return (f"; its workers died while running it: if they ran out of memory, raise "
            f"--memory-limit (now {limit} per worker) or use fewer, larger workers "
            "(--workers)")


def _cluster_failure(exc: BaseException) -> bool:
    """A lost scheduler or workers: connection errors, timeouts, cancelled futures."""
    import asyncio
    import concurrent.futures

    from distributed import KilledWorker

    return isinstance(exc, (OSError, TimeoutError, asyncio.TimeoutError, KilledWorker,
                            concurrent.futures.CancelledError, asyncio.CancelledError))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
