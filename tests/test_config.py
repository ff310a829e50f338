"""The process-wide BLAS thread limit shared by nested and concurrent users."""

from __future__ import annotations

import threading

from threadpoolctl import threadpool_info

from daskauc import _config


def _blas_threads():
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_nested_requests_take_the_smallest_and_restore_the_original():
    before = _blas_threads()
    with _config.blas_limit(1):
        assert set(_blas_threads()) == {1}
        with _config.blas_limit(8):  # asking for more never lifts an enclosing limit
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before


def test_concurrent_users_restore_the_original_when_the_last_leaves():
    # after the main thread limited BLAS (the test above), threadpoolctl would ignore limits
    # set from other threads: blas_limit takes control for whichever thread calls it
    before = _blas_threads()
    inside = threading.Barrier(4)
    leave = [threading.Event() for _ in range(4)]
    seen = []

    def user(i):
        with _config.blas_limit(1):
            inside.wait()
            leave[i].wait()
            seen.append(set(_blas_threads()))

    threads = [threading.Thread(target=user, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for i in range(4):  # leave one after another: the limit holds for those still inside
        leave[i].set()
        threads[i].join()
    assert seen == [{1}] * 4
    assert _blas_threads() == before


def test_main_thread_limits_after_a_pool_thread_took_control():
    before = _blas_threads()
    done = threading.Event()
    stop = threading.Event()

    def pool_thread():  # a long-lived worker thread that limited BLAS once (as a Dask task)
        with _config.blas_limit(1):
            pass
        done.set()
        stop.wait()

    t = threading.Thread(target=pool_thread)
    t.start()
    done.wait()
    try:
        with _config.blas_limit(1):
            assert set(_blas_threads()) == {1}
        assert _blas_threads() == before
    finally:
        stop.set()
        t.join()
