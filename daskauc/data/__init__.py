"""Datasets: ingest to Zarr, open, split, scale, and the shipped default dataset."""

from ..store.dataset import Dataset, open_dataset

# the readers of the one door (daskauc._readers), registered in the order they are asked to
# detect an input: the store (registered where it lives), Parquet, LIBSVM, dense text, then
# dask arrays, dask dataframes and numpy
from .parquet import ParquetReader, TableOptions  # isort: skip
from .text import DenseTextOptions, DenseTextReader, LibsvmOptions, LibsvmReader  # isort: skip
from .arrays import DaskReader, FrameReader, NumpyReader  # isort: skip
from .default import default_dataset_path, load_default
from .ingest import ingest, ingest_array, write_dataset
from .scale import MinMaxScaler, StandardScaler, normalize_rows
from .split import split_store, train_test_split

__all__ = [
    "DaskReader", "DenseTextOptions", "DenseTextReader", "FrameReader", "LibsvmOptions",
    "LibsvmReader", "NumpyReader", "ParquetReader", "TableOptions",
    "Dataset", "MinMaxScaler", "StandardScaler", "default_dataset_path", "ingest",
    "ingest_array", "load_default", "normalize_rows", "open_dataset", "split_store",
    "train_test_split", "write_dataset",
]
