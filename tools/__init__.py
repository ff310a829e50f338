"""Developer tools that are not benchmarks, run from the repository root: the fault matrix
(``python -m tools.fault_matrix``), the multi-host run (``sudo tools/multihost.sh``, with its
probe ``multihost_probe.py``) and the command line's transcript (``tools/cli_transcript.sh``).
Like the benchmarks, not part of the ``daskauc`` package.
"""
