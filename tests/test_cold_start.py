"""Cold start: a kernel that a default fit uses is loaded from numba's on-disk cache by a new
process, not compiled again (issue 27; docs/benchmarks/cold_start.md).

Two new processes run the same fits (:func:`daskauc.estimators._warmup.warm_up`: the shipped
spambase file ingested, split, standardized and embedded into a store, a model fitted from
it, and the default fits below on numpy and on a store, one for each kernel module of the
package). The first populates the cache (when the suite has not already); the second must
compile nothing: numba raises a ``numba:compile`` event for every compilation, and none for a
kernel loaded from the cache. A kernel compiled without ``cache=True``, or one whose cache
entry does not hold (a closure, a dispatcher made at run time, an object numba cannot pickle
in the cache key), compiles again in the second process and fails this test.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: with the ingest, split, embedding and fit-from-store steps that always run, these default
#: fits use every kernel module: _pairwise_kernels and _preconditioner_kernels (RankSVM),
#: _ls_kernels (SPAM), _online_kernels (OAM), _kernel_basis_kernels (KernelAUC's kernel route)
ONLY = ("RankSVM", "SPAM", "OAM", "KernelAUC(solver='kernel')")

SCRIPT = """
import json, sys
from numba.core import event

compiled = []

class Count(event.Listener):
    depth = 0
    def on_start(self, ev):
        self.depth += 1
    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:  # the kernel compiled, not the functions compiled inside it
            f = getattr(ev.data.get("dispatcher"), "py_func", None)
            compiled.append(f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}")

event.register("numba:compile", Count())

import dask
from daskauc.estimators._warmup import warm_up

with dask.config.set(scheduler="threads"):
    warm_up(only=tuple(sys.argv[1:]))
print(json.dumps(compiled))
"""


def _run() -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *ONLY], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_new_process_loads_every_kernel_of_the_default_fits_from_the_cache():
    _run()  # populates numba's on-disk cache (the suite may have done so already)
    compiled = _run()
    assert compiled == [], (
        f"compiled again in a second process, so not loaded from numba's on-disk cache: "
        f"{sorted(set(compiled))}")
