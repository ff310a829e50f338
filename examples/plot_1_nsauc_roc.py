"""
NSAUC on Spambase, through Zarr stores: the ROC curve
=====================================================

NSAUC standardizes the features, maps them through a k-means Nystroem embedding of the
Gaussian kernel and runs averaged pairwise hinge SGD on the embedding. Here it trains on a
Zarr store, as it would on a cluster, and its test ROC curve is drawn beside the linear
least-squares AUC optimum (LSAUC) on the same rows.
"""

import shutil
import tempfile
from pathlib import Path

import dask
import matplotlib.pyplot as plt

import daskauc
from daskauc.data import load_default

# Dask's threaded scheduler in this process (a distributed.Client would run the same calls)
dask.config.set(scheduler="threads")

# %%
# The data: the Spambase file shipped with daskauc (4,601 e-mails, 57 features, spam is the
# positive class) ingested into a Zarr store with its rows shuffled, then split into
# stratified train and test stores.
work = Path(tempfile.mkdtemp(prefix="daskauc-example-"))
store, train, test = (str(work / name) for name in ("spambase.zarr", "train.zarr", "test.zarr"))
load_default(store, shuffle=True, random_state=0)
daskauc.split_store(store, train, test, test_size=0.2, random_state=0)

# %%
# Fit on the store path and score the test store: every estimator accepts a store, a numpy
# array or a dask array.
nsauc = daskauc.NSAUC(n_landmarks=400, random_state=0).fit(train)
print(f"NSAUC test AUC: {nsauc.score(test):.4f}")

# the linear baseline on standardized features
train_ds, test_ds = daskauc.open_dataset(train), daskauc.open_dataset(test)
scaler = daskauc.StandardScaler().fit(train_ds.X)
lsauc = daskauc.LSAUC(lam=1e-3).fit(scaler.transform(train_ds.X), train_ds.y)

# %%
# ROC curves: ``roc_curve`` and ``roc_auc`` are exact (ties count one half) on numpy and on
# dask arrays alike.
y_test = test_ds.y
fig, ax = plt.subplots(figsize=(5.5, 5))
for name, scores in [
    ("NSAUC (400 landmarks)", nsauc.decision_function(test_ds.X)),
    ("LSAUC (linear)", lsauc.decision_function(scaler.transform(test_ds.X))),
]:
    fpr, tpr, _ = daskauc.roc_curve(y_test, scores)
    ax.plot(fpr, tpr, label=f"{name}: AUC {daskauc.roc_auc(y_test, scores):.4f}")
ax.plot([0, 1], [0, 1], color="0.7", linestyle=":", label="chance")
ax.set(xlabel="false positive rate", ylabel="true positive rate",
       title="Spambase, 921 test rows", xlim=(0, 1), ylim=(0, 1.01))
ax.legend(loc="lower right")
fig.tight_layout()

shutil.rmtree(work)
