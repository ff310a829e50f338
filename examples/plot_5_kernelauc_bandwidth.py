"""
KernelAUC: choosing the kernel width by validation AUC
======================================================

``KernelAUC`` fits a Gaussian-kernel expansion over ``n_centres`` centres with the pairwise
squared hinge. With ``gamma="auto"`` and ``lam="auto"`` it tries widths ``gamma = k / b``
(``b`` the mean squared distance of the scaled rows to their mean, Khalid et al.'s rule for
``k = 1``) and a warm-started path of ``lam`` for each, scores each pair by cross-validated
AUC on a stratified subsample, and refits the best on all rows. The folds are spent by
successive halving: every width is scored on the first fold, and only the best two go on to
the others, so a dropped width has one fold's AUC and ``mean_auc`` of ``None``.
``selection_`` keeps the whole table. A small grid and two folds keep this example to a few
seconds.
"""

import tempfile

import dask
import matplotlib.pyplot as plt

import daskauc
from daskauc.data import load_default

dask.config.set(scheduler="threads")

with tempfile.TemporaryDirectory() as tmp:
    ds = load_default(f"{tmp}/spambase.zarr")
    X, y = ds.X.compute(), ds.y.compute()
X_train, X_test, y_train, y_test = daskauc.train_test_split(
    X, y, test_size=0.2, random_state=0)

model = daskauc.KernelAUC(
    n_centres=256,
    gamma_grid=[0.125, 0.25, 0.5, 1, 2, 4, 8],
    lam_grid=[1e-2, 1e-3, 1e-4],
    cv=2,
    random_state=0,
).fit(X_train, y_train)
sel = model.selection_
print(f"chosen gamma = {sel['gamma_multiplier']:g}/b, lam = {sel['lam']:.3g} "
      f"(route: {model.route_}); test AUC {model.score(X_test, y_test):.4f}")

# %%
# First-fold validation AUC against the width, one line per ``lam`` (at the subsample's
# scale): the one score every width has. The chosen width, best by the mean over all folds
# among the two that went on, is marked.
table = sel["table"]
fig, ax = plt.subplots(figsize=(6.5, 4.5))
for lam in sorted({row["lam"] for row in table}, reverse=True):
    rows = sorted((r for r in table if r["lam"] == lam), key=lambda r: r["gamma_multiplier"])
    ax.semilogx([r["gamma_multiplier"] for r in rows], [r["fold_auc"][0] for r in rows],
                "o-", base=2, label=f"lam = {lam:.0e}")
ax.axvline(sel["gamma_multiplier"], color="0.4", linestyle=":",
           label=f"chosen: {sel['gamma_multiplier']:g}/b")
ax.set(xlabel="gamma, in multiples of 1/b", ylabel="validation AUC, first fold",
       title=f"KernelAUC, {sel['n_centres']} centres, Spambase")
best = max(r["fold_auc"][0] for r in table)
ax.set_ylim(best - 0.05, best + 0.005)
ax.legend(loc="lower center", ncol=2)
fig.tight_layout()
