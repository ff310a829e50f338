"""The runtime every layer uses: streaming row chunks with one epoch driver, chains, chunk
placement and persistence, the cost model and machine rates, the cluster, progress.

It imports only the ground floor (``_config``, ``_compute``, ``store``,
``_validation``, ``_gaussian``, ``_arrays``); ``data``, ``embed`` and ``solvers`` stand on it.
"""
