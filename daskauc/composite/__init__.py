"""Composite models, a floor between the rooms (data, embed, solvers) and model selection:
models made of several rooms' pieces, as functions over arrays that the estimators and the
selections both call.

* :mod:`.kernel_model`: the Gaussian kernel-basis model at one width and lam, its route and
  its solver calls (KernelAUC's final fit and every width of the walk);
* :mod:`.pipeline`: the presets' scale, map and linear solver, as functions (embedding the
  training rows, fitting and calibrating the linear model on them);
* :mod:`.calibration`: the Platt calibration every model ends its fit with, and the
  intercept a selection scores a candidate model by.
"""
