"""The commands that fit and use models: ``fit`` (its methods read from the registry),
``evaluate``, ``predict``, ``demo``."""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile

from .._compute import persist
from .._validation import check_input_map
from .options import _check_outputs, _check_plot, _log, _parse_value, _result, _save_figure, _step
from .session import _cluster


def _methods() -> dict:
    """name -> (estimator class, fixed params) for ``daskauc fit --method`` on an embedding
    store, from the registry (``@model_class(cli=...)``): a preset's method fits its linear
    model with the preset's defaults there (it embeds a raw store first:
    :func:`_embedding_methods`)."""
    from .._registry import CLI_METHODS, MODEL_CLASSES

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
    from ..estimators.presets import EmbeddedAUCModel

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
    from .._registry import CLI_METHODS, MODEL_CLASSES
    from ..estimators.presets import EmbeddedAUCModel

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



def cmd_fit(args) -> int:
    from ..io import save_model
    from ..store.dataset import open_dataset
    from ..store.protocol import stored_kind

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
        from ..store.protocol import resolve_path

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
        if "validation" in inspect.signature(est.fit).parameters:
            kwargs["validation"] = validation
    if args.checkpoint:
        if "checkpoint" not in inspect.signature(est.fit).parameters or not (
                {"n_epochs", "max_iter"} & set(est.get_params())):
            print(f"daskauc fit: error: --checkpoint: {type(est).__name__} has no epochs or "
                  "steps to checkpoint", file=sys.stderr)
            return 2
        from ..estimators._checkpoint import open_checkpoint

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
        from ..plot import plot_history

        _save_figure(plot_history(est, title=f"daskauc fit --method {args.method}"), args.plot)
    payload = {"model": args.model, "method": args.method, "estimator": type(est).__name__,
               "n_iter": int(getattr(est, "n_iter_", 0)),
               "seconds": round(timings[f"fit {args.method} on {args.store}"], 3)}
    text = f"saved {args.method} ({type(est).__name__}) to {args.model}"
    classes = getattr(est, "classes_", None)
    if classes is not None and len(classes) == 2:
        from ..data.labels import label_json

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
    from ..store.protocol import stored_kind

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
    from ..io import load_model
    from ..metrics import roc_auc
    from ..store.dataset import open_dataset

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
            from ..plot import plot_roc

            with _step(f"ROC curve -> {args.plot}"):
                ax = plot_roc(ds.y, scores, pr=args.pr,
                              label=f"{type(est).__name__} on {os.path.basename(args.store)}")
                _save_figure(ax, args.plot)
    _result(args, {"model": args.model, "store": args.store, "auc": auc},
            f"AUC of {args.model} on {args.store}: {auc:.6f}")
    return 0



def cmd_predict(args) -> int:
    from ..scoring import plan_scores

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

    from ..data.default import default_dataset_path
    from ..data.ingest import ingest
    from ..data.scale import StandardScaler
    from ..data.split import split_store
    from ..embed.nystroem import KMeansNystroem
    from ..estimators.pairwise_sgd import PairwiseHingeSGD
    from ..metrics import roc_auc
    from ..store.dataset import open_dataset

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
