"""
The least-squares AUC family: one optimum, several roads to it
==============================================================

The pairwise least-squares AUC loss ``mean over pairs of (1 - w.(x_i - x_j))^2 + lam/2
||w||^2`` depends on the data only through the class means and covariances, so ``LSAUC``
computes its minimizer ``w*`` exactly in one pass. TwoPassAUC, OPAUC, regSOLAM, SPAM and
SPDAM are stochastic methods for the same objective; all take ``lam`` on the same scale.
Here each runs one epoch per ``partial_fit`` call and we follow its distance to ``w*``.
Features are scaled to [-1, 1], as in those methods' papers.
"""

import tempfile
import time

import dask
import matplotlib.pyplot as plt
import numpy as np

import daskauc
from daskauc.data import load_default

dask.config.set(scheduler="threads")

with tempfile.TemporaryDirectory() as tmp:
    ds = load_default(f"{tmp}/spambase.zarr")
    X, y = ds.X.compute(), ds.y.compute()
X_train, X_test, y_train, y_test = daskauc.train_test_split(
    X, y, test_size=0.2, random_state=0)
scaler = daskauc.MinMaxScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

# %%
# The exact optimum, then 15 epochs of each stochastic method.
lam = 1e-3
exact = daskauc.LSAUC(lam=lam).fit(X_train, y_train)
w_star = exact.coef_

methods = {
    "TwoPassAUC": daskauc.TwoPassAUC(lam=lam, random_state=0),
    "OPAUC": daskauc.OPAUC(lam=lam, random_state=0),
    "regSOLAM": daskauc.SOLAM(penalty="l2", lam=lam, zeta=0.1, random_state=0),
    "SPAM": daskauc.SPAM(lam=lam, random_state=0),
    "SPDAM": daskauc.SPDAM(lam=lam, random_state=0),
}
epochs = np.arange(1, 16)
distance, test_auc, seconds = {}, {"LSAUC": exact.score(X_test, y_test)}, {}
for name, model in methods.items():
    start, distance[name] = time.perf_counter(), []
    for _ in epochs:
        model.partial_fit(X_train, y_train, classes=[-1, 1])
        distance[name].append(np.linalg.norm(model.coef_ - w_star) / np.linalg.norm(w_star))
    seconds[name] = time.perf_counter() - start
    test_auc[name] = model.score(X_test, y_test)
    print(f"{name:10s} test AUC {test_auc[name]:.4f}  ({seconds[name]:.2f} s for 15 epochs)")
print(f"LSAUC      test AUC {test_auc['LSAUC']:.4f}")

# %%
# Left: relative distance to ``w*`` after each epoch. Right: test AUC after 15 epochs; the
# dashed line is the exact optimum's. Step sizes are the defaults except regSOLAM's
# ``zeta`` (its default of 100 suits unit-norm embeddings, not 57 features in [-1, 1]).
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
for name, d in distance.items():
    ax1.semilogy(epochs, d, "o-", markersize=3, label=name)
ax1.set(xlabel="epoch", ylabel="||w - w*|| / ||w*||", ylim=(0.02, 1.2),
        title=f"distance to LSAUC's w* (lam={lam:g})")
ax1.legend(loc="lower left", ncol=3, fontsize="small")
names = list(methods)
aucs = [test_auc[n] for n in names]
ax2.barh(names, aucs, color=[f"C{i}" for i in range(len(names))])
for i, auc in enumerate(aucs):
    ax2.text(auc + 0.0005, i, f"{auc:.4f}", va="center", fontsize="small")
ax2.axvline(test_auc["LSAUC"], color="k", linestyle="--")
ax2.set(xlim=(min(aucs) - 0.01, test_auc["LSAUC"] + 0.01), xlabel="test AUC",
        title=f"after 15 epochs (dashed: LSAUC's {test_auc['LSAUC']:.4f})")
ax2.xaxis.set_major_locator(plt.MaxNLocator(5))
fig.tight_layout()
