"""The ``daskauc`` command line: ingest, split, embed, fit, evaluate, demo.

Every subcommand is a thin layer over the public API. Without ``--scheduler`` a LocalCluster
sized for the machine is started (one single-threaded worker per core) and its dashboard link
is printed; ``--scheduler ADDRESS`` (or a scheduler JSON file) uses an existing cluster.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import time

logger = logging.getLogger("daskauc")


# -- methods the fit command knows ------------------------------------------------------------
def _methods() -> dict:
    """name -> (estimator class, fixed params) for ``daskauc fit --method``."""
    from .estimators.least_squares import LEAST_SQUARES_METHODS
    from .estimators.online import ONLINE_METHODS
    from .estimators.pairwise_sgd import PairwiseHingeSGD
    from .estimators.ranksvm import RankSVM

    methods = {
        "nsauc": (PairwiseHingeSGD, {"average": True}),
        "nsvmsgd2": (PairwiseHingeSGD, {"average": False}),
        "nbauc": (RankSVM, {}),
        "ranksvm": (RankSVM, {}),
    }
    methods.update({k: (v, {}) for k, v in LEAST_SQUARES_METHODS.items()})
    methods.update({k: (v, {}) for k, v in ONLINE_METHODS.items()})
    return methods


def _parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


# -- cluster and progress ---------------------------------------------------------------------
@contextlib.contextmanager
def _cluster(args):
    import dask

    from .cluster import get_client

    if not args.verbose:  # worker processes log through their own config, set before start
        dask.config.set({"logging.distributed": "error"})
    client = get_client(args.scheduler, n_workers=args.workers, memory_limit=args.memory_limit,
                        quiet=True)
    print(f"Dask dashboard: {client.dashboard_link}", flush=True)
    try:
        yield client
    finally:
        if not args.scheduler:
            cluster = client.cluster
            client.close()
            if cluster is not None:
                cluster.close()
        else:
            client.close()


class _Step:
    """Prints a step's name when it starts and its duration when it ends."""

    def __init__(self, name: str, timings: dict | None = None):
        self.name, self.timings = name, timings

    def __enter__(self):
        print(f"[daskauc] {self.name} ...", flush=True)
        self.tic = time.perf_counter()
        return self

    def __exit__(self, *exc):
        dt = time.perf_counter() - self.tic
        if exc[0] is None:
            print(f"[daskauc] {self.name}: done in {dt:.2f} s", flush=True)
            if self.timings is not None:
                self.timings[self.name] = dt
        return False


# -- subcommands ------------------------------------------------------------------------------
def _check_outputs(args, *paths) -> None:
    """Refuse existing outputs (without --overwrite) before any work is done."""
    from .data.store import check_writable

    for path in paths:
        check_writable(path, overwrite=args.overwrite)


def cmd_ingest(args) -> int:
    from .data.ingest import ingest
    from .data.split import split_store

    kwargs = dict(format=args.format, n_features=args.n_features, pos_label=args.pos_label,
                  label_column=args.label_column, delimiter=args.delimiter, dtype=args.dtype,
                  chunk_rows=args.chunk_rows, shuffle=args.shuffle, random_state=args.seed,
                  overwrite=args.overwrite)
    if args.positive_classes:
        kwargs["positive_classes"] = [_parse_value(v) for v in args.positive_classes.split(",")]
    _check_outputs(args, args.store, *(args.split or ()))
    with _Step(f"ingest {args.source} -> {args.store}"):
        ds = ingest(args.source, args.store, **kwargs)
    a = ds.attrs
    print(f"{args.store}: {a.get('n_samples')} rows x {a.get('n_features')} features, "
          f"{a.get('n_positive')} positive / {a.get('n_negative')} negative")
    if args.split:
        train, test = args.split
        with _Step(f"split {args.store} -> {train}, {test}"):
            split_store(args.store, train, test, test_size=args.test_size,
                        random_state=args.seed, overwrite=args.overwrite)
    return 0


def cmd_split(args) -> int:
    from .data.split import split_store

    _check_outputs(args, args.train, args.test)
    with _Step(f"split {args.store}"):
        split_store(args.store, args.train, args.test, test_size=args.test_size,
                    random_state=args.seed, overwrite=args.overwrite)
    return 0


def cmd_embed(args) -> int:
    from .data.store import open_dataset
    from .embed.nystroem import KMeansNystroem, load_embedding_map

    # inputs and outputs are checked before the cluster starts and before any work
    _check_outputs(args, args.out, *(out for _, out in args.also or []))
    fmap = load_embedding_map(args.map) if args.map else None
    ds = open_dataset(args.source)
    for src, _ in args.also or []:
        open_dataset(src)
    with _cluster(args):
        if fmap is not None:
            with _Step(f"map {args.source} -> {args.out} with the map of {args.map}"):
                fmap.write_embedding(args.source, args.out, overwrite=args.overwrite)
            return 0
        scaler = None
        if not args.no_standardize:
            from .data.scale import StandardScaler

            with _Step("standardize (fit)"):
                scaler = StandardScaler().fit(ds.X)
        Xs = scaler.transform(ds.X) if scaler is not None else ds.X
        fmap = KMeansNystroem(n_components=args.landmarks, gamma=args.gamma,
                              landmarks=args.landmark_method, kmeans_epochs=args.kmeans_epochs,
                              dtype=args.dtype, random_state=args.seed)
        with _Step(f"k-means landmarks ({args.landmarks})"):
            fmap.fit(Xs)
        with _Step(f"embed + write {args.out}"):
            out = fmap.write_embedding(args.source, args.out, scaler=scaler,
                                       overwrite=args.overwrite)
        print(f"{args.out}: {out.X.shape[0]} x {out.X.shape[1]} {out.X.dtype}")
        for src, dst in args.also or []:
            with _Step(f"embed + write {dst}"):
                fmap.write_embedding(src, dst, scaler=scaler, overwrite=args.overwrite)
    return 0


def cmd_fit(args) -> int:
    from .io import save_model

    methods = _methods()
    if args.method not in methods:
        print(f"unknown method {args.method!r}; known: {', '.join(sorted(methods))}",
              file=sys.stderr)
        return 2
    cls, fixed = methods[args.method]
    params = dict(fixed)
    for item in args.param or []:
        if "=" not in item:
            print(f"--param expects KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        key, value = item.split("=", 1)
        params[key] = _parse_value(value)
    for key in ("lam", "C", "n_epochs"):
        value = getattr(args, key, None)
        if value is not None:
            params[key] = value
    valid = set(cls().get_params())
    unknown = sorted(set(params) - valid)
    if unknown:
        print(f"{cls.__name__} has no parameter(s) {unknown}; it takes {sorted(valid)}",
              file=sys.stderr)
        return 2
    if "random_state" in valid and args.seed is not None:
        params["random_state"] = args.seed
    est = cls(**params)
    from .data.store import open_dataset

    # the model's path is checked before the fit (a refused save after it would lose the
    # model) and the inputs before the cluster starts
    _check_outputs(args, args.model)
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
            print(f"--checkpoint: {type(est).__name__} has no epochs or steps to checkpoint",
                  file=sys.stderr)
            return 2
        kwargs.update(checkpoint=args.checkpoint, resume=args.resume)
    elif args.resume:
        print("--resume needs --checkpoint PATH", file=sys.stderr)
        return 2
    with _cluster(args):
        with _Step(f"fit {args.method} on {args.store}"):
            est.fit(train.X, train.y, **kwargs)
        save_model(est, args.model, overwrite=args.overwrite)
        print(f"saved {type(est).__name__} to {args.model}")
        if validation is not None:
            print(f"validation AUC: {est.score(*validation):.6f}")
    return 0


def cmd_evaluate(args) -> int:
    from .data.store import open_dataset
    from .io import load_model
    from .metrics import roc_auc

    est = load_model(args.model)
    ds = open_dataset(args.store)
    with _cluster(args):
        with _Step(f"evaluate on {args.store}"):
            auc = float(roc_auc(ds.y, est.decision_function(ds.X)))
    print(json.dumps({"model": args.model, "store": args.store, "auc": auc}))
    return 0


def cmd_demo(args) -> int:
    """Ingest the shipped spambase data, embed it, train NSAUC and print test AUC and timings."""
    from .data.default import default_dataset_path
    from .data.ingest import ingest
    from .data.scale import StandardScaler
    from .data.split import split_store
    from .data.store import open_dataset
    from .embed.nystroem import KMeansNystroem
    from .estimators.pairwise_sgd import PairwiseHingeSGD
    from .metrics import roc_auc

    timings: dict[str, float] = {}
    workdir = args.workdir or tempfile.mkdtemp(prefix="daskauc-demo-")
    os.makedirs(workdir, exist_ok=True)
    p = lambda name: os.path.join(workdir, name)  # noqa: E731
    with _cluster(args):
        with _Step("ingest spambase (shipped with daskauc)", timings):
            ingest(default_dataset_path(), p("spambase.zarr"), shuffle=True,
                   random_state=args.seed, overwrite=True, chunk_rows=1000)
        with _Step("stratified 80/20 split", timings):
            split_store(p("spambase.zarr"), p("train.zarr"), p("test.zarr"), test_size=0.2,
                        random_state=args.seed, overwrite=True)
        train = open_dataset(p("train.zarr"))
        with _Step("standardize (fit)", timings):
            scaler = StandardScaler().fit(train.X)
        fmap = KMeansNystroem(n_components=args.landmarks, random_state=args.seed)
        with _Step(f"k-means landmarks ({args.landmarks})", timings):
            fmap.fit(scaler.transform(train.X))
        with _Step("embed + write train/test embeddings", timings):
            emb_train = fmap.write_embedding(p("train.zarr"), p("train-emb.zarr"),
                                             scaler=scaler, overwrite=True)
            emb_test = fmap.write_embedding(p("test.zarr"), p("test-emb.zarr"),
                                            scaler=scaler, overwrite=True)
        model = PairwiseHingeSGD(lam=args.lam, n_epochs=args.epochs, random_state=args.seed)
        with _Step(f"NSAUC ({args.epochs} epochs)", timings):
            model.fit(emb_train.X, emb_train.y)
        with _Step("test AUC", timings):
            auc = float(roc_auc(emb_test.y, model.decision_function(emb_test.X)))
    print()
    print(f"spambase: {train.n_samples} train rows, {emb_test.n_samples} test rows, "
          f"{fmap.n_components_} embedding dimensions")
    print(f"NSAUC test AUC: {auc:.4f}   (Khalid et al. report 0.9804 for NBAUC on spambase)")
    print("timings (s): " + ", ".join(f"{k}: {v:.2f}" for k, v in timings.items()))
    print(f"stores kept in {workdir}")
    return 0


# -- argument parsing -------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="daskauc", description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", default=None,
                        help="address of an existing Dask scheduler (or a scheduler JSON file); "
                        "default: start a LocalCluster")
    parser.add_argument("--workers", type=int, default=None, help="LocalCluster workers")
    parser.add_argument("--memory-limit", default=None, help="LocalCluster memory per worker")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="LIBSVM/CSV file -> Zarr dataset store")
    p.add_argument("source")
    p.add_argument("store")
    p.add_argument("--format", choices=["libsvm", "csv"], default=None)
    p.add_argument("--n-features", type=int, default=None)
    p.add_argument("--pos-label", type=_parse_value, default=None)
    p.add_argument("--positive-classes", default=None, help="comma-separated raw labels")
    p.add_argument("--label-column", type=int, default=-1)
    p.add_argument("--delimiter", default=None)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--chunk-rows", type=int, default=None)
    p.add_argument("--shuffle", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split", nargs=2, metavar=("TRAIN", "TEST"), default=None,
                   help="also write a stratified train/test split to these stores")
    p.add_argument("--test-size", type=float, default=0.2)
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("split", help="stratified train/test split of a dataset store")
    p.add_argument("store")
    p.add_argument("train")
    p.add_argument("test")
    p.add_argument("--test-size", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_split)

    p = sub.add_parser("embed", help="fit k-means Nystroem on a dataset store, write embedding")
    p.add_argument("source", help="dataset store to embed (and fit on, without --map)")
    p.add_argument("out", help="embedding store to write")
    p.add_argument("--map", default=None,
                   help="embedding store whose fitted map is applied (no fitting)")
    p.add_argument("--landmarks", type=int, default=1600)
    p.add_argument("--landmark-method", default="kmeans", choices=["kmeans", "random", "all"])
    p.add_argument("--gamma", type=float, default=None)
    p.add_argument("--kmeans-epochs", type=int, default=3)
    p.add_argument("--no-standardize", action="store_true")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--also", nargs=2, action="append", metavar=("SOURCE", "OUT"),
                   help="map another dataset store with the same fitted map")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser("fit", help="fit a linear AUC solver on a dataset/embedding store")
    p.add_argument("store")
    p.add_argument("model", help="where to save the fitted model (Zarr group)")
    p.add_argument("--method", default="nsauc",
                   help="nsauc, nsvmsgd2, nbauc (= ranksvm: PRSVM+ Newton), lsauc, twopass, "
                        "opauc, solam, spam, spdam, oam, uni-exp, uni-squ (default nsauc)")
    p.add_argument("--lam", type=float, default=None,
                   help="regularization of the SGD and least-squares methods")
    p.add_argument("--C", type=float, default=None,
                   help="loss weight of nbauc/ranksvm and oam")
    p.add_argument("--epochs", dest="n_epochs", type=int, default=None,
                   help="passes over the data (stochastic methods)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="any other estimator parameter (JSON value)")
    p.add_argument("--validation", default=None, help="store whose AUC is reported")
    p.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="save the model with its solver state here after every epoch or "
                        "Newton step (atomically)")
    p.add_argument("--resume", action="store_true",
                   help="continue the fit saved at --checkpoint (the same model as an "
                        "uninterrupted fit, bit for bit)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("evaluate", help="exact AUC of a saved model on a store")
    p.add_argument("model")
    p.add_argument("store")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("demo", help="end-to-end run on the shipped spambase dataset")
    p.add_argument("--landmarks", type=int, default=400)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lam", type=float, default=1e-6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=None)
    p.set_defaults(func=cmd_demo)
    return parser


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each record."""

    def emit(self, record):
        self.stream = sys.stderr
        super().emit(record)


def _configure_logging(verbose: bool) -> None:
    """daskauc's own progress lines on stderr; Dask's logs only with --verbose."""
    log = logging.getLogger("daskauc")
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("[daskauc] %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    level = logging.INFO if verbose else logging.WARNING
    for name in ("distributed", "bokeh", "tornado"):
        logging.getLogger(name).setLevel(level)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError, IsADirectoryError,
            NotADirectoryError, PermissionError) as exc:
        print(f"daskauc {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not _cluster_failure(exc):
            raise
        print(f"daskauc {args.command}: error: the Dask cluster failed ({type(exc).__name__}: "
              f"{exc or 'no detail'}); nothing was saved by the interrupted step",
              file=sys.stderr)
        return 3


def _cluster_failure(exc: BaseException) -> bool:
    """A lost scheduler or workers: connection errors, timeouts, cancelled futures."""
    import asyncio
    import concurrent.futures

    from distributed import KilledWorker

    return isinstance(exc, (OSError, TimeoutError, asyncio.TimeoutError, KilledWorker,
                            concurrent.futures.CancelledError, asyncio.CancelledError))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
