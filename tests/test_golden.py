"""The golden fits (``tests/golden.py``): every public estimator's fitted values, scores and
selections equal those recorded from main before the floor-plan renovation (issue 26).

On the machine of the recording (the libraries, BLAS kernels and CPU of
``tests/golden/environment.json``): bit-identical on the threaded scheduler, and equal to 1e-9
relative on the cluster (where the partial sums of a reduction may meet in another order).

On any other machine the products themselves differ in their last bits (another BLAS code
path, another vector width), and an iterative solver stopping at a relative tolerance of
1e-3 may then take one step more or less; ill-conditioned internals (KernelAUC's dual
coefficients) move far more than the model does. There, only the models' outputs on the
held-out rows are compared, to 1e-2 of their scale: that still catches a renovation that
changed a model, not the last bits of one.
"""

import json

import dask
import golden
import numpy as np

RTOL = 1e-9
#: another machine: the outputs (decision_function / transform / predict) to this fraction of
#: their largest magnitude (see the module docstring)
OUTPUT_RTOL = 1e-2
OUTPUTS = ("decision_function", "transform", "predict")


def _mismatches(expected: dict, actual: dict, mode: str) -> list[str]:
    """Values of ``actual`` that differ from ``expected``: every value bit for bit
    (``mode="exact"``), to RTOL (``"close"``), or only the outputs, to OUTPUT_RTOL of their
    scale (``"outputs"``)."""
    problems = []
    for case in sorted(set(expected) | set(actual)):
        if case not in actual or case not in expected:
            problems.append(f"{case}: {'not run' if case not in actual else 'not recorded'}")
            continue
        e, a = expected[case], actual[case]
        keys = sorted(set(e) | set(a))
        if mode == "outputs":  # a large output's sample stands for it (its sum may cancel)
            keys = [k for k in keys if k.partition("#")[0] in OUTPUTS
                    and k.partition("#")[2] in ("", "sample")]
        for key in keys:
            if key not in a or key not in e:
                problems.append(f"{case} {key}: {'missing' if key not in a else 'new'}")
                continue
            ev, av = e[key], np.asarray(a[key])
            if key.endswith("#sha256") and mode != "exact":
                continue  # the sample and the sum stand for the array
            if ev.dtype.kind in "US" or av.dtype.kind in "US":
                same = ev.shape == av.shape and bool(np.all(ev == av))
            elif mode == "exact":
                same = ev.dtype == av.dtype and np.array_equal(ev, av, equal_nan=True)
            elif mode == "close":
                same = ev.shape == av.shape and np.allclose(av, ev, rtol=RTOL, atol=RTOL,
                                                            equal_nan=True)
            else:
                scale = float(np.max(np.abs(ev), initial=0.0))
                same = ev.shape == av.shape and np.allclose(
                    av, ev, rtol=0.0, atol=OUTPUT_RTOL * max(scale, 1e-12), equal_nan=True)
            if not same:
                diff = ""
                if ev.shape == av.shape and ev.dtype.kind in "fiu" and av.dtype.kind in "fiu":
                    diff = f" (max abs difference {np.max(np.abs(av - ev), initial=0):.3g})"
                problems.append(f"{case} {key}{diff}")
    return problems


def _same_environment() -> bool:
    recorded = json.loads((golden.GOLDEN_DIR / "environment.json").read_text())
    return recorded == golden.environment()


def test_golden_threaded(tmp_path):
    expected = golden.load(golden.GOLDEN_DIR / "threads.npz")
    with dask.config.set(scheduler="threads"):
        actual = golden.run_cases("threads", tmp_path)
    problems = _mismatches(expected, actual, "exact" if _same_environment() else "outputs")
    assert not problems, f"{len(problems)} golden values changed:\n" + "\n".join(problems[:40])


def test_golden_cluster(tmp_path, dask_cluster_client):
    expected = golden.load(golden.GOLDEN_DIR / "cluster.npz")
    actual = golden.run_cases("cluster", tmp_path)
    problems = _mismatches(expected, actual, "close" if _same_environment() else "outputs")
    assert not problems, f"{len(problems)} golden values changed:\n" + "\n".join(problems[:40])


def test_golden_detects_a_change():
    """The comparison is not blind: a one-ulp change in one coefficient is caught exactly, and
    on another machine a model whose outputs moved by 5% of their scale is caught, while one
    ulp there is not a change."""
    expected = golden.load(golden.GOLDEN_DIR / "threads.npz")
    case = "NBAUC/set/dask"
    key = next(k for k, v in expected[case].items() if v.dtype.kind == "f" and v.size > 1)
    changed = {c: dict(v) for c, v in expected.items()}
    changed[case][key] = expected[case][key].copy()
    changed[case][key].flat[0] = np.nextafter(changed[case][key].flat[0], np.inf)
    step = abs(changed[case][key].flat[0] - expected[case][key].flat[0])
    assert _mismatches(expected, changed, "exact") == [
        f"{case} {key} (max abs difference {step:.3g})"]
    for mode in ("exact", "close", "outputs"):
        assert _mismatches(expected, expected, mode) == []
    scores = expected[case]["decision_function"]
    moved = {c: dict(v) for c, v in expected.items()}
    moved[case]["decision_function"] = scores + 0.05 * np.max(np.abs(scores))
    moved[case][key] = expected[case][key] * (1 + 1e-6)  # an internal: not compared there
    assert _mismatches(expected, moved, "outputs") == [
        f"{case} decision_function (max abs difference {0.05 * np.max(np.abs(scores)):.3g})"]
    assert _mismatches(expected, changed, "outputs") == []


def test_the_environment_tells_blas_kernels_apart():
    """Bit-identity is claimed only where the BLAS kernels are those of the recording: the
    environment names them (another CPU generation picks other kernels)."""
    env = golden.environment()
    assert env["blas"] and all("openblas" in b or "mkl" in b or "blis" in b for b in env["blas"])
    assert env["cpu"] == {} or "flags" in env["cpu"]
