"""Programs with several orchestration functions: compiled["name"], the
ambiguity error, the KeyError that lists the names, one worker for all."""
import numpy as np
import pytest

import tilecomm
from conftest import WORLD_SIZES, config_for
from worker_programs import TwoEntries


def _compile(n):
    return tilecomm.ir.compile(TwoEntries, distributed_config=config_for(n).distributed_config)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_each_orchestration_function_by_name_one_shot_and_on_one_worker(n):
    compiled = _compile(n)
    assert compiled.names() == ["forward", "backward"]
    xs = np.random.default_rng(n).integers(-9, 9, size=(n, 1, 8)).astype(np.float32)
    ys = np.zeros_like(xs)
    compiled["forward"](xs, ys)
    np.testing.assert_array_equal(ys, 2 * xs)
    with compiled.prepare(persistent=True) as rt:
        rt.run(compiled["backward"], xs, ys)
        np.testing.assert_array_equal(ys, 2 * np.roll(xs, -1, axis=0))
        rt.run(compiled["forward"], xs, ys)
        np.testing.assert_array_equal(ys, 2 * xs)
        with pytest.raises(TypeError, match="ambiguous"):
            rt(xs, ys)


def test_calling_without_a_name_is_ambiguous_and_unknown_names_are_listed():
    compiled = _compile(2)
    xs = np.zeros((2, 1, 8), np.float32)
    with pytest.raises(TypeError, match=r"several orchestration functions \['forward', "
                                        r"'backward'\]") as ei:
        compiled(xs, xs)
    assert ei.value.code == "TC424"
    with pytest.raises(KeyError, match=r"no orchestration function 'sideways'.*\['forward', "
                                       r"'backward'\]"):
        compiled["sideways"]
