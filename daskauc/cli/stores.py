"""The commands that write dataset and embedding stores: ``ingest``, ``split``, ``embed``."""

from __future__ import annotations

import os

from .options import _check_outputs, _parse_value, _result, _step
from .session import _cluster


def cmd_ingest(args) -> int:
    from ..data.ingest import ingest
    from ..data.split import split_store

    kwargs = dict(format=args.format, n_features=args.n_features, pos_label=args.pos_label,
                  label_column=args.label_column, delimiter=args.delimiter, dtype=args.dtype,
                  chunk_rows=args.chunk_rows, shuffle=args.shuffle, random_state=args.seed,
                  overwrite=args.overwrite, allow_dense=args.allow_dense, rows=args.rows)
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
    sparse = (f" (sparse rows: {a['n_nonzero']:,} non-zeros)" if a.get("rows") == "csr"
              else "")
    payload["rows"] = "sparse" if sparse else "dense"
    _result(args, payload, f"{args.store}: {a.get('n_samples')} rows x {a.get('n_features')} "
            f"features{sparse}, {a.get('n_positive')} positive / {a.get('n_negative')} "
            "negative\n"
            f"positive class: {names} (negative: {', '.join(map(repr, negative))}; {rule})")
    return 0



def cmd_split(args) -> int:
    from ..data.split import split_store
    from ..store.dataset import open_dataset

    open_dataset(args.store)
    _check_outputs(args, args.train, args.test, kind="dataset", inputs=[args.store])
    with _step(f"split {args.store}"):
        split_store(args.store, args.train, args.test, test_size=args.test_size,
                    random_state=args.seed, overwrite=args.overwrite)
    _result(args, {"store": args.store, "train": args.train, "test": args.test},
            f"{args.store} -> {args.train}, {args.test}")
    return 0



def cmd_embed(args) -> int:
    from ..embed.nystroem import KMeansNystroem, load_embedding_map
    from ..store.dataset import open_dataset

    # inputs and outputs are checked before the cluster starts and before any work
    fmap = load_embedding_map(args.map) if args.map else None
    ds = open_dataset(args.source)
    sources = [args.source, *(src for src, _ in args.also or [])]
    rows = max(open_dataset(src).n_samples for src in sources[1:]) if args.also else 0
    if fmap is not None:
        width = fmap.n_components_
    elif args.landmarks == "auto":
        from ..embed.nystroem import auto_landmarks

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
            from .._sparse import is_sparse_dask

            if not args.no_standardize and not is_sparse_dask(ds.X):  # the presets' "auto"
                from ..data.scale import StandardScaler

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
