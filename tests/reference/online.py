"""Slow, obviously correct oracles for the online baselines (OAM, Uni-Exp, Uni-Squ).

The per-sample references follow the papers' pseudo-code line by line in plain Python
(lists of floats, one row at a time). They take the *random arrays* of each visit (row
order, reservoir uniforms and slots) from the caller, so they reproduce the numba kernels
exactly when fed what the kernels were fed. The closed-form / brute-force optima are
independent of the SGD code altogether.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize


def _dot(a, b):
    return sum(ai * bi for ai, bi in zip(a, b, strict=True))


def _sub(a, b):
    return [ai - bi for ai, bi in zip(a, b, strict=True)]


def oam_reference(X, y, visits, *, C, buffer_size, update, eta, average=False, state=None):
    """OAM (Zhao et al. 2011, Alg. 1-3) one row at a time.

    ``visits`` is a list of ``(rows, u, slot)``: global row indices in visiting order and the
    reservoir uniforms / slots of those visits. Returns the state dict
    ``{w, wbar, pos, neg, n_pos, n_neg}`` (``pos`` / ``neg`` lists of rows, in slot order;
    ``wbar`` the mean of the iterates after every row when ``average``).
    """
    X = np.asarray(X, dtype=np.float64)
    K = buffer_size
    if state is None:
        state = {"w": [0.0] * X.shape[1], "wbar": [0.0] * X.shape[1], "pos": [], "neg": [],
                 "n_pos": 0, "n_neg": 0}
    w = list(state["w"])
    w_sum = [v * (state["n_pos"] + state["n_neg"]) for v in state["wbar"]]
    buffers = {1: [list(r) for r in state["pos"]], -1: [list(r) for r in state["neg"]]}
    seen = {1: state["n_pos"], -1: state["n_neg"]}
    for rows, u, slot in visits:
        for s, i in enumerate(rows):
            xt = [float(v) for v in X[i]]
            yt = 1 if y[i] > 0 else -1
            opposite = buffers[-yt]
            ct = C * max(1.0, seen[-yt] / K)
            if update == "seq":
                for x in opposite:
                    diff = _sub(xt, x)
                    hinge = max(0.0, 1.0 - yt * _dot(w, diff))
                    norm2 = _dot(diff, diff)
                    if hinge > 0 and norm2 > 0:
                        tau = min(ct / 2.0, hinge / norm2)
                        w = [wf + tau * yt * df for wf, df in zip(w, diff, strict=True)]
            else:
                grad = [0.0] * len(w)
                violated = False
                for x in opposite:
                    diff = _sub(xt, x)
                    if 1.0 - yt * _dot(w, diff) > 0:
                        violated = True
                        grad = [g - ct * yt * df for g, df in zip(grad, diff, strict=True)]
                if violated:
                    w = [wf - eta * g for wf, g in zip(w, grad, strict=True)]
            w_sum = [a + b for a, b in zip(w_sum, w, strict=True)]
            # reservoir sampling of the row into its own class's buffer
            seen[yt] += 1
            own = buffers[yt]
            if len(own) < K:
                own.append(xt)
            elif u[s] < K / seen[yt]:
                own[int(slot[s])] = xt
    t = seen[1] + seen[-1]
    wbar = [v / t for v in w_sum] if average else list(state["wbar"])
    return {"w": w, "wbar": wbar, "pos": buffers[1], "neg": buffers[-1], "n_pos": seen[1],
            "n_neg": seen[-1]}


def univariate_reference(X, y, visits, *, loss, lam, eta0, schedule, average, state=None):
    """Online SGD on the class-weighted univariate loss, one row at a time.

    ``visits`` is a list of global row-index arrays in visiting order. Returns the state dict
    ``{w, b, wbar, bbar, t, n_pos}``.
    """
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    if state is None:
        state = {"w": [0.0] * d, "b": 0.0, "wbar": [0.0] * d, "bbar": 0.0, "t": 0, "n_pos": 0}
    w, b = list(state["w"]), state["b"]
    wbar, bbar = list(state["wbar"]), state["bbar"]
    t, n_pos = state["t"], state["n_pos"]
    for rows in visits:
        for i in rows:
            x = [float(v) for v in X[i]]
            yt = 1.0 if y[i] > 0 else -1.0
            t += 1
            if yt > 0:
                n_pos += 1
            p = n_pos / t
            weight = 1.0 / p if yt > 0 else 1.0 / (1.0 - p)
            s = _dot(w, x) + b
            if loss == "exp":
                dloss = -yt * math.exp(-yt * s)          # d/ds exp(-y s)
            else:
                dloss = -2.0 * yt * (1.0 - yt * s)       # d/ds (1 - y s)^2
            eta = eta0 if schedule == "constant" else eta0 / math.sqrt(t)
            grad_w = [weight * dloss * xf + lam * wf for xf, wf in zip(x, w, strict=True)]
            w = [wf - eta * gf for wf, gf in zip(w, grad_w, strict=True)]
            b = b - eta * weight * dloss
            if average:
                wbar = [(wb * (t - 1) + wf) / t for wb, wf in zip(wbar, w, strict=True)]
                bbar = (bbar * (t - 1) + b) / t
    return {"w": w, "b": b, "wbar": wbar, "bbar": bbar, "t": t, "n_pos": n_pos}


def weighted_square_optimum(X, y, lam):
    """Exact minimizer ``(w, b)`` of the class-weighted univariate squared objective.

    ``(1/n+) sum_P (1 - s)^2 + (1/n-) sum_N (1 + s)^2 + (lam/2)||w||^2``, ``s = w.x + b``
    (the same as ``(1/n) sum [1/p or 1/(1-p)] (1 - y s)^2``): its normal equations,
    with the rows weighted, solved directly.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.where(np.asarray(y) > 0, 1.0, -1.0)
    n_pos, n_neg = (y > 0).sum(), (y < 0).sum()
    c = np.where(y > 0, 1.0 / n_pos, 1.0 / n_neg)
    Z = np.hstack([X, np.ones((X.shape[0], 1))])
    A = 2.0 * (Z * c[:, None]).T @ Z
    A[:-1, :-1] += lam * np.eye(X.shape[1])
    rhs = 2.0 * (Z * c[:, None]).T @ y
    sol = np.linalg.solve(A, rhs)
    return sol[:-1], sol[-1]


def least_squares_auc_optimum(X, y, lam):
    """The LS optimum ``w* = (S+ + S- + D D^T + (lam/2) I)^(-1) D`` from class moments."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    P, N = X[y > 0], X[y < 0]
    cp, cn = P.mean(0), N.mean(0)
    Sp = (P - cp).T @ (P - cp) / len(P)
    Sn = (N - cn).T @ (N - cn) / len(N)
    D = cp - cn
    return np.linalg.solve(Sp + Sn + np.outer(D, D) + lam / 2 * np.eye(X.shape[1]), D)


def pairwise_exp_optimum(X, y):
    """Minimizer of the brute-force pairwise exponential loss ``sum_{P x N} exp(-w.(x_i - x_j))``.

    Every pair is formed explicitly (small data only); minimized with BFGS on its log
    (the same minimizer; better conditioned).
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    D = (X[y > 0][:, None, :] - X[y < 0][None, :, :]).reshape(-1, X.shape[1])

    def f(w):
        z = -D @ w
        m = z.max()
        e = np.exp(z - m)
        val = m + np.log(e.sum())
        grad = -(D * e[:, None]).sum(0) / e.sum()
        return val, grad

    res = minimize(f, np.zeros(X.shape[1]), jac=True, method="BFGS",
                   options={"gtol": 1e-10, "maxiter": 10_000})
    return res.x
