"""The classes a model file may name: every public estimator and transformer registers itself
here where it is defined (``@model_class``), and :mod:`daskauc.io` builds models from this
table alone, so loading a file never imports anything by a name the file gives."""

from __future__ import annotations

#: class name -> class, for every estimator and transformer that ``save_model`` writes
MODEL_CLASSES: dict[str, type] = {}


def model_class(cls: type) -> type:
    """Register ``cls`` (a class decorator) under its name; two classes may not share one."""
    if MODEL_CLASSES.setdefault(cls.__name__, cls) is not cls:
        raise TypeError(f"two model classes named {cls.__name__}")
    return cls
