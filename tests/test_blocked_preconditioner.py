"""The preconditioner's factor as tiles on the workers against the client-side factor.

``BlockedNystroemPreconditioner`` computes what ``NystroemPreconditioner`` computes with
another algorithm (a right-looking blocked Cholesky, chains of tile products, blocked
substitutions), so the client-side factor is its oracle: factor, triangular solves, products
and the preconditioned Newton/CG iterates to 1e-10 (float64), on the threaded scheduler and a
2-worker cluster; and the dense definitions for what neither may get wrong alike.
"""

import dask
import dask.array as da
import numpy as np
import pytest
from reference import kernel as ref

from daskauc import KernelAUC
from daskauc.engine import cost
from daskauc.engine.cost import factor_block
from daskauc.solvers.blocked_preconditioner import BlockedNystroemPreconditioner, tile_owners
from daskauc.solvers.kernel_basis import build_preconditioner, factor_placement
from daskauc.solvers.kernel_newton import kernel_pairwise_newton
from daskauc.solvers.pairwise import class_indices, pairwise_coefficients

pytestmark = pytest.mark.usefixtures("threaded_unless_cluster")

VECTOR_OPS = ("apply", "regularizer_matvec", "whiten", "coefficients", "regularizer_solve")


def _centres(seed=0, m=150, d=4):
    """Centres whose kernel matrix is well conditioned (spread out against the width), so
    that two factorizations agree to ~1e-14 and 1e-10 is a test of the algorithm."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, d)), 1.2


def _dense_lower(pc) -> np.ndarray:
    """The client-side factor's L (= T^T) as a dense matrix."""
    F = np.array(pc._F)
    np.fill_diagonal(F, pc._dT)
    return np.triu(F).T


def _relative(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max())


def _laplacian(m, seed):
    """A pairs operator as KernelBasis builds it: the Laplacian of the pairs active among
    the centres at random scores."""
    rng = np.random.default_rng(seed)
    pos, neg = class_indices(np.where(rng.random(m) < 0.4, 1, -1))
    cc = pairwise_coefficients(rng.standard_normal(m), pos, neg)

    def laplacian(B):
        for k in range(B.shape[1]):
            B[:, k] = cc.laplacian_matvec(B[:, k])
        return B

    return laplacian


@pytest.mark.parametrize("block", [37, 64, 150])
def test_blocked_factor_solves_and_products_equal_the_client_factor(block):
    C, gamma = _centres()
    m = C.shape[0]
    client = build_preconditioner(C, gamma, placement="client")
    blocked = BlockedNystroemPreconditioner(C, gamma, block=block)
    assert blocked.n_blocks == -(-m // block) and client.placement == "client"
    assert blocked.jitter == client.jitter
    L = blocked.tiles("L")
    assert _relative(L, _dense_lower(client)) < 1e-10
    # the factor is the factor: L L^T = K_mm + jitter I, checked against the dense kernel
    Kt = ref.gaussian(C, C, gamma) + blocked.jitter * np.eye(m)
    assert _relative(L @ L.T, Kt) < 1e-12
    v = np.random.default_rng(1).standard_normal(m)
    for f in ("regularizer_matvec", "whiten", "coefficients", "regularizer_solve"):
        assert _relative(getattr(blocked, f)(v), getattr(client, f)(v)) < 1e-10, f
    with pytest.raises(RuntimeError, match="factor"):
        blocked.apply(v)
    for ridge, scale, op in ((1e-3, 4.0 / m, None), (0.5, 2.0, _laplacian(m, 2)),
                             (1e-2, 30.0, None)):
        client.factor(ridge, scale, op)
        blocked.factor(ridge, scale, op)
        # M M^T = ridge I + scale L^T W L, by the dense definition
        W = np.eye(m) if op is None else op(np.eye(m, order="F"))
        M = blocked.tiles("M")
        assert _relative(M @ M.T, ridge * np.eye(m) + scale * L.T @ W @ L) < 1e-12
        for f in VECTOR_OPS:
            assert _relative(getattr(blocked, f)(v), getattr(client, f)(v)) < 1e-10, f
    assert blocked.n_factorizations == 3 and (blocked.ridge, blocked.scale) == (1e-2, 30.0)
    assert set(blocked.seconds) == set(client.seconds)
    with pytest.raises(ValueError, match="vector of length"):
        blocked.whiten(np.zeros(m + 1))
    with pytest.raises(ValueError, match="ridge > 0"):
        blocked.factor(0.0, 1.0)


def test_blocked_jitter_grows_like_the_client_factor_and_nan_is_named():
    rng = np.random.default_rng(6)
    C = rng.standard_normal((30, 2))
    C = np.vstack([C, C])  # duplicated centres: K_mm is exactly singular
    client = build_preconditioner(C, 0.5, jitter=0.0, placement="client")
    blocked = BlockedNystroemPreconditioner(C, 0.5, jitter=0.0, block=16)
    assert blocked.jitter == client.jitter > 0
    v = rng.standard_normal(60)
    assert _relative(blocked.regularizer_matvec(v), client.regularizer_matvec(v)) < 1e-12
    bad = C.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        BlockedNystroemPreconditioner(bad, 0.5, block=16)
    with pytest.raises(ValueError, match="jitter must be >= 0"):
        BlockedNystroemPreconditioner(C, 0.5, jitter=-1.0)
    with pytest.raises(ValueError, match="block must be a positive integer"):
        BlockedNystroemPreconditioner(C, 0.5, block=0)


def _problem(seed=3, n=400, d=4, m=90):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - 0.8 + 0.3 * rng.standard_normal(n) > 0,
                 1, -1).astype(np.int8)
    idx = np.sort(rng.choice(n, size=m, replace=False))
    return X, y, X[idx], y[idx], 0.8


@pytest.mark.parametrize("weighting, lam", [("mean", 1e-2), ("pairs", 1e-2), ("pairs", 1e-3)])
def test_preconditioned_newton_iterates_equal_the_client_factor(weighting, lam):
    # at lam = 1e-4 the two factors' 1e-14 differences grow through 30-odd CG steps a Newton
    # step to 1e-4 of the middle iterates (3e-8 at the end): a test of conditioning, not of
    # the factor; these settings take 5-12 CG steps a Newton step
    X, y, C, yc, gamma = _problem()
    runs = {}
    for name, pc in (("client", build_preconditioner(C, gamma, placement="client")),
                     ("blocked", BlockedNystroemPreconditioner(C, gamma, block=32))):
        iterates = []
        res = kernel_pairwise_newton(
            X, y, C, gamma=gamma, lam=lam, tol=1e-6, cg_tol=1e-2, weighting=weighting,
            centre_labels=yc, preconditioner=pc,
            callback=lambda a, rec, out=iterates: out.append(np.array(a)))
        runs[name] = (res, iterates)
    (a, ia), (b, ib) = runs["client"], runs["blocked"]
    assert a.converged and b.converged and a.n_iter == b.n_iter >= 3
    assert [r.get("cg_iter") for r in a.history] == [r.get("cg_iter") for r in b.history]
    assert len(ia) == len(ib)
    for x, z in zip(ia[1:], ib[1:], strict=True):  # the first is 0
        assert _relative(z, x) < 1e-10
    assert b.state["placement"] == "workers" and b.state["n_factorizations"] >= 1


def test_same_model_threaded_and_on_a_cluster_and_the_client_holds_no_factor(
        dask_cluster_client, monkeypatch):
    from distributed import Future, get_task_stream

    monkeypatch.setattr(cost, "factor_block", lambda m: 32)  # 4 x 4 tiles
    X, y, C, yc, gamma = _problem(seed=4, n=500, m=120)
    Xd = da.from_array(X, chunks=(125, -1))
    params = dict(n_centres=120, gamma=gamma, lam=1e-2, tol=1e-4, random_state=0,
                  solver="kernel")
    on_cluster = KernelAUC(**params, factor_placement="workers").fit(Xd, y)
    pc = build_preconditioner(C, gamma, placement="workers")
    assert pc.placement == "workers" and pc.n_blocks == 4
    # what the client holds of the factor: futures of the tiles, no array of the factor
    assert all(isinstance(v, Future) for t in pc._L.values()
               for v in dict(t.__dask_graph__()).values())
    assert sum(v.nbytes for v in vars(pc).values() if isinstance(v, np.ndarray)) == 0
    # each tile's tasks on its owner: the 10 tiles dealt in column order, 5 to each worker
    # (left to the scheduler, the tiles followed their inputs: one worker held most of them)
    workers = sorted(dask_cluster_client.scheduler_info()["workers"])
    owners = tile_owners(4, workers)
    assert [owners[(i, 0)] for i in range(4)] == [workers[0], workers[1]] * 2
    with get_task_stream(dask_cluster_client) as stream:
        pc = build_preconditioner(C, gamma, placement="workers")
        pc.factor(1e-2, 1.0)
        pc.whiten(np.ones(120))  # L^{-1} v: tile (i, j) times x_j, then the diagonal tile (i, i)
    ran = [(t["key"], t["worker"]) for t in stream.data if isinstance(t["key"], tuple)
           and "blocked" in t["key"][0] and not t["key"][0].endswith("-out")]
    tile = {key: key[1:] if len(key) == 3 else (key[1], key[1]) for key, _ in ran}
    assert len(ran) >= 2 * 10 + 10 and {w for _, w in ran} == set(workers)
    assert sum("vector" in key[0] for key, _ in ran) == 10
    assert all(w == owners[tile[key]] for key, w in ran), ran
    with dask.config.set(scheduler="threads"):
        threaded = KernelAUC(**params, factor_placement="workers").fit(Xd, y)
        client = KernelAUC(**params, factor_placement="client").fit(Xd, y)
    assert on_cluster.factor_placement_ == threaded.factor_placement_ == "workers"
    assert client.factor_placement_ == "client"
    assert on_cluster.n_iter_ == threaded.n_iter_ == client.n_iter_
    for other in (threaded, client):
        assert _relative(on_cluster.dual_coef_, other.dual_coef_) < 1e-10
        # the scores sum alphas of both signs: their rounding shows a little more (4.6e-10
        # once in CI), still far below any difference of model
        assert _relative(on_cluster.decision_function(X), other.decision_function(X)) < 1e-8


def test_factor_placement_follows_the_cost_model(dask_cluster_client, monkeypatch):
    assert factor_block(8192) == 1024 and factor_block(16384) == 2048
    assert factor_block(32768) == factor_block(10**5) == 4096 and factor_block(100) == 1024
    with dask.config.set(scheduler="threads"):
        assert factor_placement(50_000, "auto", None) == ("client", {})
    where, costs = factor_placement(2048, "auto", dask_cluster_client)
    # on the 2 cores here the client's LAPACK is faster than the same cores' tiles
    assert where == "client" and costs["client"] < costs["workers"]
    monkeypatch.setattr(cost, "CLIENT_FACTOR_FRACTION", 0.0)  # the client has no room
    where, costs = factor_placement(2048, "auto", dask_cluster_client)
    assert where == "workers" and costs["client"] == np.inf
    with pytest.raises(MemoryError, match="fits neither the client"):
        factor_placement(10**6, "auto", dask_cluster_client)  # 8 TB
    assert factor_placement(64, "workers", None)[0] == "workers"
    with pytest.raises(ValueError, match="placement must be one of"):
        factor_placement(64, "gpu", None)
    with pytest.raises(ValueError, match="factor_placement must be one of"):
        KernelAUC(factor_placement="gpu", gamma=1.0, lam=1e-3).fit(*_problem()[:2])


def test_the_low_rank_preconditioner_is_its_definition_and_at_full_rank_the_full_factor():
    """benchmarks.covtype_capacity.LowRankPreconditioner (the rank-k alternative measured
    against the full factor): apply is the inverse of its dense P = V diag(ridge l + scale
    l^2) V^T + tau (I - V V^T), V orthonormal; at k = m the Nystroem approximation is K_mm
    itself, so it applies (ridge K + scale K^2)^{-1} as the full factor does."""
    from benchmarks.covtype_capacity import LowRankPreconditioner

    C, gamma = _centres(m=60, d=3)
    full = build_preconditioner(C, gamma, placement="client")
    full.factor(1.0, 3.0)
    r = np.random.default_rng(1).standard_normal(60)
    low = LowRankPreconditioner(full, C, gamma, 12)
    low.factor(1.0, 3.0)
    V, d = low.V, low.d
    assert V.shape == (60, 12) and np.allclose(V.T @ V, np.eye(12), atol=1e-12)
    P = V @ np.diag(d) @ V.T + low.tau * (np.eye(60) - V @ V.T)
    np.testing.assert_allclose(P @ low.apply(r), r, rtol=0, atol=1e-10 * np.abs(r).max())
    assert low.tau == pytest.approx(d.min()) and low.nbytes == 60 * 12 * 8
    # the problem's operators stay the full factor's
    np.testing.assert_array_equal(low.whiten(r), full.whiten(r))
    whole = LowRankPreconditioner(full, C, gamma, 60)
    whole.factor(1.0, 3.0)
    K = ref.gaussian(C, C, gamma)
    H = K + 3.0 * K @ K
    np.testing.assert_allclose(whole.apply(H @ r), r, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(whole.apply(r), full.apply(r), rtol=1e-7, atol=1e-9)
