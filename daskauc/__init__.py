"""daskauc: out-of-core, Dask-distributed nonlinear AUC maximization."""

from ._version import __version__
from .data.store import Dataset, open_dataset

__all__ = ["__version__", "Dataset", "open_dataset"]
