"""Tests of daskauc._gaussian: the Gaussian kernel block in its two forms, one exponential."""

import numpy as np
import pytest
from reference import embed as ref_embed
from reference import kernel as ref_kernel

from daskauc._gaussian import exp_bits, gaussian_block, gaussian_centres, kernel_block
from daskauc._gaussian_kernels import _exp_tile, _gauss_from_gram

TOL = {np.float32: 2e-5, np.float64: 1e-12}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_both_forms_compute_the_gaussian_kernel(dtype):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 4)).astype(dtype)
    C = rng.normal(size=(30, 4))
    U = C.astype(dtype)  # the Nystroem map casts its landmarks to the rows' dtype
    nystroem = gaussian_block(X, U, np.einsum("ij,ij->i", U, U), 0.5)
    basis = kernel_block(X, gaussian_centres(C, 0.5, dtype))
    assert nystroem.dtype == basis.dtype == dtype
    np.testing.assert_allclose(nystroem, ref_embed.gaussian_kernel(X, U, 0.5), rtol=0,
                               atol=TOL[dtype])
    np.testing.assert_allclose(basis, ref_kernel.gaussian(X, C, 0.5), rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype, rel, per_unit, lo", [(np.float32, 3e-7, 3e-9, -87.0),
                                                       (np.float64, 1e-15, 5e-17, -708.0)])
def test_exponential_of_a_tile(dtype, rel, per_unit, lo):
    # exponents as a BLAS product leaves them: mostly <= 0, a few rounded just above 0; the
    # relative error grows with |x| (measured against 50 digits: float64 2.8e-16 on [-1, 0],
    # 2.4e-14 near -708; float32 1.8e-7 on [-1, 0], 3.8e-7 near -87)
    rng = np.random.default_rng(3)
    G = np.concatenate([rng.uniform(lo - 5, 0, 2000), rng.uniform(-3, 0, 2000),
                        rng.uniform(0, 1e-6, 10), [0.0, lo - 1e-3, -1e4]])
    G = G.astype(dtype).reshape(1, -1)
    E = G.copy()
    _exp_tile(E, exp_bits(dtype, E.shape[1]))
    g = np.minimum(G.astype(np.float64), 0.0)
    inside = G > lo
    err = np.abs(E[inside] - np.exp(g[inside])) / np.exp(g[inside])
    assert np.all(err <= rel + per_unit * np.abs(g[inside]))
    assert np.all(E[~inside] == 0)  # flushed to 0 where 2^k would not be normal


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gauss_from_gram_matches_explicit_differences(dtype):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(70, 6)).astype(dtype)
    U = np.concatenate([X[:5], 3 * rng.normal(size=(40, 6))]).astype(dtype)  # exact hits
    for gamma in (1e-3, 0.2, 5.0):
        K = X @ U.T
        bits = np.int32 if dtype == np.float32 else np.int64
        X.setflags(write=False)  # kernels accept read-only inputs
        _gauss_from_gram(np.einsum("ij,ij->i", X, X), np.einsum("ij,ij->i", U, U),
                         np.empty(45, bits), K, gamma)
        expect = ref_embed.gaussian_kernel(X, U, gamma)
        # float32: the Gram trick loses ~eps32 * ||x||^2 in the distance
        np.testing.assert_allclose(K, expect, rtol=TOL[dtype] * 10, atol=TOL[dtype])
        assert K.dtype == dtype
        assert np.all(K <= 1.0) and np.all(K >= 0.0)
        np.testing.assert_allclose(np.diagonal(K[:5, :5]), 1.0, rtol=TOL[dtype])
    K = np.zeros((2, 3), dtype)  # far apart: underflows to exactly 0
    _gauss_from_gram(np.full(2, 1e4, dtype), np.full(3, 1e4, dtype), np.empty(3, bits), K, 1.0)
    assert np.all(K == 0)


def test_float32_kernel_is_accurate_far_from_the_origin():
    # the centres' mean is subtracted before ||x||^2 + ||c||^2 - 2 x.c: without it a 1e3
    # offset would leave float32 nothing of the distances
    rng = np.random.default_rng(1)
    X = (rng.standard_normal((300, 5)) + 1e3).astype(np.float32)  # as the rows arrive
    C = X[:40].astype(np.float64) + 0.1
    K = ref_kernel.gaussian(X, C, 0.3)  # on the same float32-rounded rows
    got = kernel_block(X, gaussian_centres(C, 0.3, np.float32))
    np.testing.assert_allclose(got, K, rtol=0, atol=2e-6)
