"""Return-style calls and tuple results through every level."""
import numpy as np
import pytest

from tilecomm.errors import ProgramValueError
from conftest import config_for
from worker_programs import N2, WS, dynamic_out_main, sum_diff_main


def _inputs():
    rng = np.random.default_rng(3)
    a = rng.integers(-9, 9, size=(N2, 1, WS)).astype(np.float32)
    b = rng.integers(-9, 9, size=(N2, 1, WS)).astype(np.float32)
    return a, b


def _expected(a, b):
    # the host runs sum_diff twice: the second time on the first's (sum, difference)
    s1, d1 = a + b, a - b
    return s1 + d1, s1 - d1


def test_tuple_results_reach_the_host_in_place():
    a, b = _inputs()
    s, d = np.zeros_like(a), np.zeros_like(a)
    got = sum_diff_main(a, b, s, d, config=config_for(N2))
    es, ed = _expected(a, b)
    assert isinstance(got, tuple) and got[0] is s and got[1] is d
    np.testing.assert_array_equal(s, es)
    np.testing.assert_array_equal(d, ed)


def test_return_style_allocates_and_returns_outputs_one_shot_and_prepared():
    a, b = _inputs()
    es, ed = _expected(a, b)
    compiled = sum_diff_main.compile(config=config_for(N2))   # shapes from the annotations
    s, d = compiled(a, b)
    np.testing.assert_array_equal(s, es)
    np.testing.assert_array_equal(d, ed)
    with compiled.prepare(persistent=True) as rt:
        for _ in range(2):
            s, d = rt(a, b)
            np.testing.assert_array_equal(s, es)
            np.testing.assert_array_equal(d, ed)
        h = rt.submit(compiled, a, b)
        s, d = h.result()
        np.testing.assert_array_equal(d, ed)


def test_wrong_count_names_both_call_styles():
    a, _ = _inputs()
    with pytest.raises(TypeError, match=r"expects 4 arguments \(in-place, one per parameter\) or "
                                        r"2 \(return style"):
        sum_diff_main(a, config=config_for(N2))


def test_return_style_refuses_outputs_with_dynamic_dims():
    xs = np.zeros((2, 1, 8), np.float32)
    with pytest.raises(ProgramValueError, match=r"Cannot allocate output tensor 'ys'.*dynamic "
                                                r"dimensions") as ei:
        dynamic_out_main(xs, xs, config=config_for(2))
    assert ei.value.code == "TC422" and isinstance(ei.value, ValueError)
    assert ei.value.span is not None and ei.value.span.file.endswith("worker_programs.py")
    ys = np.zeros_like(xs)                                  # in place it runs
    assert dynamic_out_main(xs, xs + 1, ys, config=config_for(2)) is ys
    np.testing.assert_array_equal(ys, xs + xs + 1)
