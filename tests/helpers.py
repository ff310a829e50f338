"""Small tools shared by several test modules (not oracles: those live in ``reference``)."""

import numpy as np
from dask.callbacks import Callback

from daskauc.data.store import writing_store


class ComputeCounter(Callback):
    """Counts dask computes (one ``_start`` per compute call)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def _start(self, dsk):
        self.n += 1


def dataset_store(path, X, y, rows):
    """A daskauc dataset store of ``X``, ``y`` with ``rows`` rows per Zarr chunk."""
    with writing_store(path, kind="dataset", attrs={"source": "test"}) as g:
        zX = g.create_array("X", shape=X.shape, chunks=(rows, X.shape[1]), dtype=X.dtype)
        zX[...] = X
        zy = g.create_array("y", shape=y.shape, chunks=(rows,), dtype=np.int8)
        zy[...] = y.astype(np.int8)
    return str(path)
