"""daskauc's benchmarks: one module per benchmark, run from the repository root as
``python -m benchmarks.NAME`` (``--help`` lists its options; every benchmark has ``--out DIR``,
most ``--quick`` and ``--seed``), and ``benchmarks.reproduce``, one module per paper.

Not part of the ``daskauc`` package (the wheel installs ``daskauc*`` only). They share one
harness, :mod:`benchmarks._harness`; each writes its page, the JSON of its results with the
machine they ran on and, where there is one, a figure into ``docs/benchmarks/``.
"""
