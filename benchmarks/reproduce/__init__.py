"""Reproductions of the papers' tables, one module per paper."""
