"""The dataset shipped with daskauc: UCI Spambase (4,601 e-mails, 57 features, 1,813 spam).

The file is ``spambase.data.xz``, the whitespace-separated ``spam.data`` of "The Elements of
Statistical Learning" (same rows and values as UCI's ``spambase.data``): 57 feature columns,
then the label (1 = spam, 0 = not spam). Spam is the positive class.
"""

from __future__ import annotations

import os
from importlib import resources

from ..store.dataset import Dataset
from .ingest import ingest

__all__ = ["default_dataset_path", "load_default"]

_FILE = "spambase.data.xz"


def default_dataset_path() -> str:
    """Path of the shipped ``spambase.data.xz`` (inside the installed package)."""
    path = resources.files("daskauc.data").joinpath(_FILE)
    if not path.is_file():  # pragma: no cover - a broken installation
        raise FileNotFoundError(f"the default dataset {_FILE} is missing from daskauc.data")
    return os.fspath(path)


def load_default(store: str | os.PathLike, *, overwrite: bool = False,
                 dtype="float32", chunk_rows: int | None = None, shuffle: bool = False,
                 random_state=None) -> Dataset:
    """Ingest the shipped Spambase data into a dataset store.

    Parameters
    ----------
    store : path or URL of the store to create
    overwrite : bool
    dtype, chunk_rows, shuffle, random_state : as in :func:`daskauc.data.ingest.ingest`

    Returns
    -------
    Dataset
        4,601 rows x 57 features, 1,813 positives (spam).

    References
    ----------
    Hopkins, Reeber, Forman & Suermondt, Spambase, UCI Machine Learning Repository (1999).
    """
    return ingest(default_dataset_path(), store, format="csv", delimiter=None, header=False,
                  label_column=-1, pos_label=1, dtype=dtype, chunk_rows=chunk_rows,
                  shuffle=shuffle, random_state=random_state, overwrite=overwrite)
