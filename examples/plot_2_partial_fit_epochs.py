"""
A validation curve over epochs with ``partial_fit``
===================================================

Every stochastic solver draws an epoch's random numbers from ``random_state`` and the epoch
number only, so ``k`` calls of ``partial_fit`` give exactly the model of
``fit(n_epochs=k)``: a whole validation curve over epochs costs one fit of the largest epoch
count. The presets fit their scaler and Nystroem map on the first call and keep them. Here
NSAUC (averaged pairwise hinge SGD), NSVMSGD2 (its last iterate) and NSOLAM (saddle-point
SGD) are compared on the same 400-landmark embedding, as in Fig. 1 of Khalid et al.
"""

import tempfile

import dask
import matplotlib.pyplot as plt
import numpy as np

import daskauc
from daskauc.data import load_default

dask.config.set(scheduler="threads")

with tempfile.TemporaryDirectory() as tmp:
    ds = load_default(f"{tmp}/spambase.zarr")
    X, y = ds.X.compute(), ds.y.compute()
X_train, X_val, y_train, y_val = daskauc.train_test_split(
    X, y, test_size=0.25, random_state=0)

# %%
# One epoch per call; the validation AUC after each.
epochs = np.arange(1, 21)
models = {
    "NSAUC": daskauc.NSAUC(n_landmarks=400, random_state=0),
    "NSVMSGD2": daskauc.NSVMSGD2(n_landmarks=400, random_state=0),
    "NSOLAM": daskauc.NSOLAM(n_landmarks=400, random_state=0),
}
curves = {}
for name, model in models.items():
    curves[name] = []
    for _ in epochs:
        model.partial_fit(X_train, y_train, classes=[-1, 1])
        curves[name].append(model.score(X_val, y_val))
    best = int(np.argmax(curves[name]))
    print(f"{name:9s} best validation AUC {curves[name][best]:.4f} after {epochs[best]} epochs")

# %%
# The curve says how many epochs to ask of ``fit``.
fig, ax = plt.subplots(figsize=(6.5, 4.5))
for name, curve in curves.items():
    ax.plot(epochs, curve, "o-", markersize=3, label=name)
ax.set(xlabel="epochs (partial_fit calls)", ylabel="validation AUC",
       title="Spambase, 400 k-means landmarks", xticks=[1, 5, 10, 15, 20])
ax.legend(loc="lower right")
ax.grid(alpha=0.3)
fig.tight_layout()
