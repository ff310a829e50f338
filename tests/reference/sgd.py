"""Slow, obviously correct pairwise hinge SGD (Algorithm 3 of Khalid et al., step by step)."""

import numpy as np


def pairwise_hinge_steps(X, pos, neg, ri, rj, w, wbar, t, q, lam, t0, rskip, askip,
                         average_start=0, partners=None, *, clock=None, stride=1.0, gain=1.0,
                         drift=None):
    """Plain-Python loop over the same steps the kernel runs; returns (w, wbar, t, q, clock).
    ``rj[s] < 0`` names row ``-1 - rj[s]`` of ``partners``. A chain's frame
    (daskauc.engine.chains.chain_frame): the step's schedule runs on ``clock`` (``t`` when
    None), which advances ``stride`` per step; steps and shrinks are ``gain`` times the
    sequential ones; ``drift`` is added after every ``rskip``-th step's shrink."""
    w = np.array(w, dtype=np.float64)
    wbar = np.array(wbar, dtype=np.float64)
    c = float(t if clock is None else clock)
    for s in range(len(ri)):
        xj = X[neg[rj[s]]] if rj[s] >= 0 else partners[-1 - rj[s]]
        x = X[pos[ri[s]]].astype(np.float64) - xj.astype(np.float64)
        t += 1
        c += stride
        if float(np.dot(w, x)) < 1.0:
            w = w + gain * x / (lam * (c + t0))
        if t % rskip == 0:
            w = w - min(1.0, gain * rskip / (c + t0)) * w
            if drift is not None:
                w = w + drift
        if askip > 0 and c > average_start and t % askip == 0:
            wbar = (q * wbar + w) / (q + 1)
            q += 1
    return w, wbar, t, q, c


def regularized_cost_after_pass(D, eta, lam):
    """SVMSGD2's evaluateEta: constant-step pass over pair differences D, then the cost."""
    w = np.zeros(D.shape[1])
    for d in D:
        margin = float(w @ d)
        w = (1 - eta * lam) * w
        if margin < 1:
            w = w + eta * d
    hinge = np.maximum(0.0, 1.0 - D @ w).mean()
    return hinge + 0.5 * lam * float(w @ w)
