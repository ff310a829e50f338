"""The ``daskauc`` command line: ingest, split, embed, fit, evaluate, predict, demo, warmup,
cluster.

Every subcommand is a thin layer over the public API. Progress bars and log lines go to
stderr, results to stdout (``--json`` for machine-readable results). Without ``--scheduler``
a LocalCluster sized for the machine is started (one single-threaded worker per core) and
stopped at the end; ``daskauc cluster`` starts one that stays, for several commands and the
dashboard.

The unit by idea: :mod:`.parser` (the subcommands and their options), :mod:`.options` (what
every subcommand shares), :mod:`.session` (where the commands run), :mod:`.stores` (ingest,
split, embed), :mod:`.models` (fit, evaluate, predict, demo), :mod:`.main` (errors as one
line, signals, exit statuses).
"""

from .main import _configure_logging, main
from .models import _embedding_methods, _methods
from .parser import build_parser

#: the tests reach the method tables and the logging setup through the package
__all__ = ["main", "build_parser", "_configure_logging", "_methods", "_embedding_methods"]
