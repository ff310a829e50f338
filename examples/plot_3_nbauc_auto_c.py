"""
NBAUC with ``C="auto"``: the validation path and the Newton steps
=================================================================

NBAUC minimizes ``1/2 ||w||^2 + C * (sum over all positive-negative pairs of the squared
hinge)`` on a k-means Nystroem embedding with a truncated Newton method. ``C="auto"`` (the
default) fits a warm-started path of C on a stratified subsample (two thirds to fit, one
third to validate), stops three values past the best validation AUC and rescales the best C
to the full training set. ``model.solver_.selection_`` records the path, and
``model.solver_.history_`` the final fit's Newton steps.
"""

import tempfile

import dask
import matplotlib.pyplot as plt
import numpy as np

import daskauc
from daskauc.data import load_default

dask.config.set(scheduler="threads")

# %%
# Spambase as numpy arrays (read once from a store of the shipped file), split 80 / 20.
with tempfile.TemporaryDirectory() as tmp:
    ds = load_default(f"{tmp}/spambase.zarr")
    X, y = ds.X.compute(), ds.y.compute()
X_train, X_test, y_train, y_test = daskauc.train_test_split(
    X, y, test_size=0.2, random_state=0)

model = daskauc.NBAUC(n_landmarks=400, random_state=0).fit(X_train, y_train)
selection = model.solver_.selection_
print(f"chosen C = {model.solver_.C_:.3g}, test AUC {model.score(X_test, y_test):.4f}")
print(selection["rule"])

# %%
# Left: validation AUC along the path of C on the subsample (the chosen point circled; the C
# used on all rows is that value rescaled). Right: the final fit's relative gradient norm at
# each Newton step, against the stopping tolerance.
table = selection["table"]
C_sub = np.array([row["C_subsample"] for row in table])
val_auc = np.array([row["val_auc"] for row in table])
history = model.solver_.history_

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
ax1.semilogx(C_sub, val_auc, "o-", base=2)
best = np.argmax(C_sub == selection["C_subsample"])
ax1.plot(C_sub[best], val_auc[best], "o", markersize=14, markerfacecolor="none",
         color="C3", label=f"chosen: C = {selection['C_subsample']:.3g} on the subsample")
ax1.set(xlabel="C on the subsample", ylabel="validation AUC",
        title=f"C path ({selection['n_train']} rows fitted)")
ax1.legend(loc="lower right")
ax2.semilogy([h["iter"] for h in history], [h["rel_grad_norm"] for h in history], "o-")
ax2.axhline(model.tol, color="0.5", linestyle=":", label=f"tol = {model.tol:g}")
ax2.set(xlabel="Newton step", ylabel="relative gradient norm",
        title=f"final fit, C = {model.solver_.C_:.3g}")
ax2.legend()
fig.tight_layout()
