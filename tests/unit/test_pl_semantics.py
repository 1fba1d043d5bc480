"""Unit checks of the pl op set's building blocks, without ranks: device
integer division against C's rule (numpy ``trunc`` / ``fmod``), constant
folding per function kind, the cast rounding modes against independent
references, the functional array update, and what the front end makes of
region assignment and device ``//``."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import ProgramValueError, RuntimeFault
from tilecomm.frontend.fold import fold
from tilecomm.runtime.rank.tile.cast_ops import convert
from tilecomm.runtime.rank.tile.scalar_ops import ScalarOps, trunc_div, trunc_divide, trunc_rem
from tilecomm.runtime import DistributedConfig, RunConfig

PAIRS = [(a, b) for a in range(-9, 10) for b in (-4, -3, -1, 1, 2, 5)]


@pytest.mark.parametrize("a,b", PAIRS)
def test_trunc_div_and_rem_are_c_semantics(a, b):
    assert trunc_div(a, b) == int(np.trunc(a / b))
    assert trunc_rem(a, b) == int(np.fmod(a, b))
    assert trunc_div(a, b) * b + trunc_rem(a, b) == a
    assert ScalarOps.divsi(a, b) == trunc_div(a, b)
    assert ScalarOps.remsi(a, b) == trunc_rem(a, b)
    assert ScalarOps.divsi(np.int32(a), np.int64(b)) == trunc_div(a, b)
    assert ScalarOps.remsi(np.int64(a), b) == trunc_rem(a, b)


def test_trunc_divide_elementwise_and_zero():
    a = np.arange(-20, 20, dtype=np.int32)
    b = np.resize(np.array([3, -7, 2, -1], np.int32), a.shape)
    np.testing.assert_array_equal(trunc_divide(a, b), np.trunc(a / b).astype(np.int32))
    with pytest.raises(RuntimeFault) as ei:
        trunc_divide(a, np.zeros_like(a))
    assert ei.value.code == "TC520"


def test_scalar_division_by_zero_is_tc520():
    for fn in (ScalarOps.divsi, ScalarOps.remsi):
        with pytest.raises(RuntimeFault) as ei:
            fn(5, 0)
        assert ei.value.code == "TC520" and "by zero" in str(ei.value)


def test_fold_follows_the_function_kind():
    assert fold("//", -7, 2, None) == -4 and fold("%", -1, 4, None) == 3          # host
    assert fold("//", -7, 2, None, device=True) == -3
    assert fold("%", -1, 4, None, device=True) == -1
    assert fold("//", -7.0, 2.0, None, device=True) == -4.0                        # floats floor
    with pytest.raises(ProgramValueError):
        fold("%", 3, 0, None, device=True)


def test_array_update_is_functional_and_wraps():
    a = np.zeros(4, np.int32)
    b = ScalarOps.array_set(a, 2, 7)
    assert list(a) == [0, 0, 0, 0] and list(b) == [0, 0, 7, 0]
    c = ScalarOps.array_set(b, 0, 2 ** 31)                  # wraps like a register store
    assert c[0] == -2 ** 31
    with pytest.raises(RuntimeFault) as ei:
        ScalarOps.array_set(a, 4, 1)
    assert ei.value.code == "TC502"


# ------------------------------------------------------------------ cast modes
X = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -2.6, 1e10, -1e10, np.nan], np.float32)


@pytest.mark.parametrize("mode,ref", [
    ("rint", np.rint), ("none", np.rint), ("floor", np.floor), ("ceil", np.ceil),
    ("trunc", np.trunc), ("round", lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5)),
])
def test_float_to_int_modes_saturate(mode, ref):
    got = convert(X, np.dtype(np.int32), mode)
    want = np.clip(np.nan_to_num(ref(X.astype(np.float64)), nan=0), -2 ** 31, 2 ** 31 - 1)
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_float_to_fp16_directed_modes_bracket_the_value():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(2000).astype(np.float32)
    lo, hi = convert(x, np.dtype(np.float16), "floor"), convert(x, np.dtype(np.float16), "ceil")
    x64 = x.astype(np.float64)
    assert np.all(lo.astype(np.float64) <= x64) and np.all(hi.astype(np.float64) >= x64)
    # neighbours: no float16 strictly between them
    assert np.all(np.nextafter(lo, np.float16(np.inf)) >= hi)
    np.testing.assert_array_equal(convert(x, np.dtype(np.float16), "rint"), x.astype(np.float16))
    odd = convert(x, np.dtype(np.float16), "odd")
    exact = lo == hi
    assert np.all((odd.view(np.uint16) & 1)[~exact] == 1)


# ------------------------------------------------------------------ front end
NR = pl.dynamic("NR")


@pl.jit.incore
def region_kernel(x: pl.Tensor[[2, 8], pl.FP32], y: pl.InOut[pl.Tensor[[4, 8], pl.FP32]],
                  r: pl.Scalar[pl.INT32]):
    y[0:2, 0:8] = pl.load(x, [0, 0], [2, 8])                 # the source's shape: assemble
    y[2:3, 0:8] = x[0:1, 0:8]
    pl.write(y, [3, 0], pl.cast((r - 5) // 2, pl.FP32))
    return y


@pl.jit
def region_chip(x: pl.Tensor[[2, 8], pl.FP32], y: pl.InOut[pl.Tensor[[4, 8], pl.FP32]],
                r: pl.Scalar[pl.INT32]):
    return region_kernel(x, y, r)


@pl.jit.host
def region_main(xs: pl.Tensor[[NR, 2, 8], pl.FP32], ys: pl.InOut[pl.Tensor[[NR, 4, 8], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        region_chip(xs[r], ys[r], (r - 5) // 2, device=r)
    return ys


def test_lowering_of_region_assignment_and_device_division():
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    args = (np.zeros((2, 2, 8), np.float32), np.zeros((2, 4, 8), np.float32))
    src = region_main.compile(*args, config=cfg).lowered(*args).source
    funcs = {chunk.split("(", 1)[0]: chunk for chunk in src.split("\ndef f_")[1:]}
    kernel = next(t for n, t in funcs.items() if n.startswith("region_kernel"))
    host = next(t for n, t in funcs.items() if n.startswith("region_main"))
    assert kernel.count("_rt.assemble(") == 2 and "_rt.assign(" not in kernel
    assert "_rt.divsi(" in kernel and "//" not in kernel
    assert "_rt.divsi(" not in host and "//" in host


@pytest.mark.parametrize("name", ["float4_e2m1fn", "float8_e4m3fn", "float8_e5m2"])
def test_directed_modes_of_narrow_floats_against_an_enumeration(name):
    """Every finite value of the narrow type, enumerated from its bit patterns,
    gives the reference neighbours of each input."""
    import ml_dtypes
    dt = np.dtype(getattr(ml_dtypes, name))
    bits = ml_dtypes.finfo(dt).bits
    values = np.arange(2 ** bits, dtype=np.uint8).view(dt).astype(np.float64)
    values = np.unique(values[np.isfinite(values)])
    rng = np.random.default_rng(9)
    x = (rng.standard_normal(500) * values.max() / 3).astype(np.float32)
    x = x[np.abs(x) < values.max()]
    x64 = x.astype(np.float64)
    lo = values[np.searchsorted(values, x64, side="right") - 1]
    hi = values[np.searchsorted(values, x64, side="left")]
    np.testing.assert_array_equal(convert(x, dt, "floor").astype(np.float64), lo)
    np.testing.assert_array_equal(convert(x, dt, "ceil").astype(np.float64), hi)
    np.testing.assert_array_equal(convert(x, dt, "trunc").astype(np.float64),
                                  np.where(x64 >= 0, lo, hi))
    # values between -smallest and +smallest step through zero correctly
    tiny = np.array([1e-9, -1e-9], np.float32)
    assert convert(tiny, dt, "ceil").astype(np.float64)[0] == values[values > 0].min()
    assert convert(tiny, dt, "floor").astype(np.float64)[1] == values[values < 0].max()
