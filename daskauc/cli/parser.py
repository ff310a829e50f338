"""The command line's parser: every subcommand, its options and their help."""

from __future__ import annotations

import argparse

from .models import _method_defaults, cmd_demo, cmd_evaluate, cmd_fit, cmd_predict
from .options import _float_or_auto, _int_or_auto, _json_object, _parse_value
from .session import cmd_cluster, cmd_warmup
from .stores import cmd_embed, cmd_ingest, cmd_split

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
    from .._version import __version__

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
    p.add_argument("--rows", default="auto", choices=["auto", "sparse", "dense"],
                   help="LIBSVM: keep the rows sparse (CSR chunks) or dense; auto: sparse when "
                   "the dense matrix would be over 64 MiB and under 10%% non-zero")
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
                   help="embed the features as stored (default: standardize dense rows "
                   "first; sparse rows are embedded as stored)")
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
