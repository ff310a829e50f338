"""Datasets: ingest to Zarr, open, split, scale, and the shipped default dataset."""

from .._dataset import Dataset, open_dataset
from .default import default_dataset_path, load_default
from .ingest import ingest, ingest_array, write_dataset
from .scale import MinMaxScaler, StandardScaler, normalize_rows
from .split import split_store, train_test_split

__all__ = [
    "Dataset", "MinMaxScaler", "StandardScaler", "default_dataset_path", "ingest",
    "ingest_array", "load_default", "normalize_rows", "open_dataset", "split_store",
    "train_test_split", "write_dataset",
]
