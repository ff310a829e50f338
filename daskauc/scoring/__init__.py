"""Batch scoring: a fitted model applied to every row of a store or a Parquet input, the id,
``decision_function`` and ``predict_proba``'s positive column written per row to Zarr or
Parquet, chunk by chunk (:func:`write_scores`; ``daskauc predict`` on the command line).

* :mod:`.batch`: the checks made before any work (:func:`plan_scores`) and the one pass.
* :mod:`.inputs`: dataset stores and Parquet files or directories, read by row chunks.
* :mod:`.outputs`: the Zarr and Parquet outputs, written chunk by chunk and committed.
"""

from .batch import ScoresWritten, ScoringPlan, plan_scores, write_scores

__all__ = ["ScoresWritten", "ScoringPlan", "plan_scores", "write_scores"]
