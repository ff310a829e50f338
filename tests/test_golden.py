"""The golden fits (``tests/golden.py``): every public estimator's fitted values, scores and
selections equal those recorded from main before the floor-plan renovation (issue 26).

Bit-identical on the threaded scheduler when this machine's libraries and CPU are the ones
recorded (``tests/golden/environment.json``); elsewhere, and on the cluster, equal to 1e-9
relative (the results depend on summation order only through BLAS and the CPU's vector width).
"""

import json

import dask
import golden
import numpy as np

RTOL = 1e-9


def _mismatches(expected: dict, actual: dict, exact: bool) -> list[str]:
    problems = []
    for case in sorted(set(expected) | set(actual)):
        if case not in actual or case not in expected:
            problems.append(f"{case}: {'not run' if case not in actual else 'not recorded'}")
            continue
        e, a = expected[case], actual[case]
        for key in sorted(set(e) | set(a)):
            if key not in a or key not in e:
                problems.append(f"{case} {key}: {'missing' if key not in a else 'new'}")
                continue
            ev, av = e[key], np.asarray(a[key])
            if key.endswith("#sha256") and not exact:
                continue  # the sample and the sum stand for the array
            if ev.dtype.kind in "US" or av.dtype.kind in "US":
                same = ev.shape == av.shape and bool(np.all(ev == av))
            elif exact:
                same = ev.dtype == av.dtype and np.array_equal(ev, av, equal_nan=True)
            else:
                same = ev.shape == av.shape and np.allclose(av, ev, rtol=RTOL, atol=RTOL,
                                                            equal_nan=True)
            if not same:
                diff = ""
                if ev.shape == av.shape and ev.dtype.kind in "fiu":
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
    problems = _mismatches(expected, actual, exact=_same_environment())
    assert not problems, f"{len(problems)} golden values changed:\n" + "\n".join(problems[:40])


def test_golden_cluster(tmp_path, dask_cluster_client):
    expected = golden.load(golden.GOLDEN_DIR / "cluster.npz")
    actual = golden.run_cases("cluster", tmp_path)
    problems = _mismatches(expected, actual, exact=False)
    assert not problems, f"{len(problems)} golden values changed:\n" + "\n".join(problems[:40])


def test_golden_detects_a_change():
    """The comparison is not blind: a one-ulp change in one coefficient is caught exactly."""
    expected = golden.load(golden.GOLDEN_DIR / "threads.npz")
    case = "NBAUC/set/dask"
    key = next(k for k, v in expected[case].items() if v.dtype.kind == "f" and v.size > 1)
    changed = {c: dict(v) for c, v in expected.items()}
    changed[case][key] = expected[case][key].copy()
    changed[case][key].flat[0] = np.nextafter(changed[case][key].flat[0], np.inf)
    step = abs(changed[case][key].flat[0] - expected[case][key].flat[0])
    assert _mismatches(expected, changed, exact=True) == [
        f"{case} {key} (max abs difference {step:.3g})"]
    assert _mismatches(expected, expected, exact=True) == []
