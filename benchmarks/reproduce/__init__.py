"""Reproductions of the papers' tables, one module per paper.

``khalid`` (Khalid, Ray & Chitsaz, Tables 2 and 4) and ``natole`` (Natole, Ying & Lyu's SPAM
and SPDAM tables), each runnable as ``python -m benchmarks.reproduce.NAME``, all of them as
``python -m benchmarks.reproduce``; ``diagnostics`` measures what the explanations of the rows
below the papers rest on; ``_shared`` holds the data, the row cache, the tables and the
command line they share. Rows are cached in docs/benchmarks/reproduce/, with the tables
generated from them; docs/reproduction.md is the text around the tables.
"""
