"""Slow, obviously correct oracles the tests compare daskauc against (one module per area)."""
