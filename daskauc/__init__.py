"""daskauc: out-of-core, Dask-distributed nonlinear AUC maximization."""

from ._validation import default_chunks
from ._version import __version__
from .data import (
    Dataset,
    DenseTextOptions,
    LibsvmOptions,
    MinMaxScaler,
    StandardScaler,
    TableOptions,
    ingest,
    ingest_array,
    normalize_rows,
    open_dataset,
    split_store,
    train_test_split,
    write_dataset,
)
from .embed import KMeansNystroem, MiniBatchKMeans, RandomFourierFeatures, load_embedding_map
from .engine.progress import log_to_stderr, progress
from .estimators.kernel import KernelAUC
from .estimators.least_squares import LSAUC, OPAUC, SOLAM, SPAM, SPDAM, TwoPassAUC
from .estimators.online import OAM, UnivariateAUC
from .estimators.pairwise_sgd import PairwiseHingeSGD
from .estimators.presets import NBAUC, NOAM, NSAUC, NSOLAM, NSVMSGD2, RFAUC, KernelRankSVM
from .estimators.ranksvm import RankSVM
from .io import ModelFileError, load_model, save_model
from .metrics import roc_auc, roc_curve
from .model_selection import cross_validate_auc, cv_select_C
from .plot import plot_history, plot_roc
from .scoring import write_scores
from .store.protocol import StoreIntegrityError

__all__ = [
    "__version__",
    "Dataset", "MinMaxScaler", "StandardScaler", "ingest", "ingest_array", "normalize_rows",
    "TableOptions", "LibsvmOptions", "DenseTextOptions",
    "open_dataset", "split_store", "train_test_split", "write_dataset",
    "KMeansNystroem", "MiniBatchKMeans", "RandomFourierFeatures", "load_embedding_map",
    "PairwiseHingeSGD", "RankSVM", "cv_select_C", "cross_validate_auc", "OAM", "UnivariateAUC",
    "NSAUC", "NSVMSGD2", "NBAUC", "RFAUC", "KernelRankSVM", "NOAM", "NSOLAM",
    "KernelAUC", "LSAUC", "TwoPassAUC", "OPAUC", "SOLAM", "SPAM", "SPDAM",
    "load_model", "save_model", "roc_auc", "roc_curve", "default_chunks",
    "StoreIntegrityError", "ModelFileError", "progress", "log_to_stderr",
    "plot_roc", "plot_history", "write_scores",
]
