"""``waits.holds`` -- the wait comparison as everything in Python asks it --
agrees with the native core's, which decides the waits it runs."""
import numpy as np
import pytest

import tilecomm._native_core as nc
from tilecomm.waits import CMP_CODES, CMP_EQ, CMP_GE, CMP_GE_U, CMP_NAMES, holds, i32

EDGES = [0, 1, -1, 2, 7, 2**31 - 1, -2**31, 2**31, 2**32 - 1, 123456, -98765]


@pytest.mark.parametrize("cmp", [CMP_EQ, CMP_GE, CMP_GE_U])
def test_holds_agrees_with_the_native_wait_on_every_pair(cmp):
    rng = np.random.default_rng(cmp)
    values = EDGES + [int(v) for v in rng.integers(-2**31, 2**31, 40)]
    cell = np.zeros(1, np.int32)
    addr = cell.__array_interface__["data"][0]
    for v in values:
        cell[0] = i32(v)
        for e in values:
            native, _ = nc.wait_i32(addr, cmp, i32(e), 0, 0, 0)   # polls once
            assert holds(cmp, v, e) == bool(native), (cmp, v, e)


def test_names_and_codes_are_inverse_and_an_unknown_comparison_is_refused():
    assert {CMP_CODES[n]: n for n in CMP_CODES} == CMP_NAMES
    assert CMP_NAMES[CMP_EQ] == "Eq" and CMP_NAMES[CMP_GE] == "Ge"
    with pytest.raises(ValueError, match="unknown wait comparison"):
        holds(3, 0, 0)
