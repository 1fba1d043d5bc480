"""Host arguments: torch CPU tensors (fp32 and bf16) and numpy views in and out,
results written in place into the caller's tensors, and argument mismatches
rejected with ArgumentError before any rank process starts."""
import ml_dtypes
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
import tilecomm.runtime.controller.ranks as ranks_mod
from tilecomm.errors import ArgumentError, UserError

from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
S = 8


def make_exchange(dt):
    """y[r] = x[r - 1] + x[r]: rank r pulls its left neighbour's input by put."""

    @pl.jit.incore
    def kernel(x: pl.Tensor[[2, S], dt], y: pl.Out[pl.Tensor[[2, S], dt]],
               data: pl.InOut[pld.DistributedTensor[[2, S], dt]],
               sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
        ctx = pld.get_comm_ctx(data)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        nxt = (me + 1) % n
        pld.tensor.put(data, nxt, x)
        pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
        pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
        got = pl.load(data, [0, 0], [2, S])
        y = pl.store(pl.add(got, pl.load(x, [0, 0], [2, S])), [0, 0], y)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[2, S], dt], y: pl.Out[pl.Tensor[[2, S], dt]],
             data: pl.InOut[pld.DistributedTensor[[2, S], dt]],
             sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
        return kernel(x, y, data, sig)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 2, S], dt], ys: pl.Out[pl.Tensor[[NR, 2, S], dt]]):
        data_buf = pld.alloc_window_buffer([2, S], dtype=dt)
        sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(data_buf, [2, S], dtype=dt),
                 pld.window(sig_buf, [1, 1], dtype=pl.INT32), device=r)
        return ys

    return main


EXCHANGE_FP32 = make_exchange(pl.FP32)
EXCHANGE_BF16 = make_exchange(pl.BF16)


def exchange_reference(xs: np.ndarray) -> np.ndarray:
    acc = np.roll(xs, 1, axis=0).astype(np.float32) + xs.astype(np.float32)
    return acc.astype(xs.dtype)


# --------------------------------------------------------------- torch in and out
@pytest.mark.parametrize("n", WORLD_SIZES)
def test_torch_fp32_tensors_in_and_out(n):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(400 + n)
    xs = torch.randn((n, 2, S), generator=g, dtype=torch.float32)
    ys = torch.zeros((n, 2, S), dtype=torch.float32)
    x_before = xs.clone()
    ptr = ys.data_ptr()
    result = EXCHANGE_FP32(xs, ys, config=config_for(n))
    assert result is ys                              # the caller's tensor comes back
    assert ys.data_ptr() == ptr and ys.dtype == torch.float32
    np.testing.assert_array_equal(ys.numpy(), exchange_reference(xs.numpy()))
    assert torch.equal(xs, x_before)                 # inputs are not written


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_torch_bf16_tensors_in_and_out(n):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(410 + n)
    xs = torch.randint(-64, 64, (n, 2, S), generator=g).to(torch.bfloat16)
    ys = torch.full((n, 2, S), 3.0, dtype=torch.bfloat16)
    EXCHANGE_BF16(xs, ys, config=config_for(n))
    assert ys.dtype == torch.bfloat16
    xs_np = xs.float().numpy().astype(ml_dtypes.bfloat16)
    expected = exchange_reference(xs_np).astype(np.float32)
    np.testing.assert_array_equal(ys.float().numpy(), expected)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_numpy_in_torch_out_and_back(n):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(420 + n)
    xs = rng.standard_normal((n, 2, S)).astype(np.float32)
    ys = torch.zeros((n, 2, S))
    EXCHANGE_FP32(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys.numpy(), exchange_reference(xs))
    # and the other way round
    back = np.zeros((n, 2, S), np.float32)
    EXCHANGE_FP32(torch.from_numpy(xs), back, config=config_for(n))
    np.testing.assert_array_equal(back, exchange_reference(xs))


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_numpy_strided_view_is_written_in_place(n):
    rng = np.random.default_rng(430 + n)
    xs = rng.standard_normal((n, 2, S)).astype(np.float32)
    big = np.full((n, 2, 2 * S), -5.0, np.float32)
    view = big[:, :, ::2]                             # every other column
    assert not view.flags["C_CONTIGUOUS"]
    EXCHANGE_FP32(xs, view, config=config_for(n))
    np.testing.assert_array_equal(big[:, :, ::2], exchange_reference(xs))
    np.testing.assert_array_equal(big[:, :, 1::2], -5.0)


# --------------------------------------------------------------- mismatches, before any rank starts
@pytest.fixture
def no_workers(monkeypatch):
    """Fail loudly if a call gets as far as starting rank processes."""
    def refuse(self, *a, **k):
        raise AssertionError("rank processes were started for an invalid call")
    monkeypatch.setattr(ranks_mod.Ranks, "start", refuse)


def _bad_args(case, n):
    xs = np.ones((n, 2, S), np.float32)
    ys = np.zeros((n, 2, S), np.float32)
    return {
        "too_few": (xs,),
        "too_many": (xs, ys, ys),
        "wrong_static_dim": (np.ones((n, 2, S + 1), np.float32), ys),
        "wrong_rank": (np.ones((n, 2 * S), np.float32), ys),
        "wrong_dtype": (xs.astype(np.float64), ys),
        "wrong_int_dtype": (xs, ys.astype(np.int32)),
        "scalar_for_tensor": (1.0, ys),
    }[case]


BAD_CASES = ["too_few", "too_many", "wrong_static_dim", "wrong_rank", "wrong_dtype",
             "wrong_int_dtype", "scalar_for_tensor"]


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("case", BAD_CASES)
def test_argument_mismatch_raises_argument_error(no_workers, case, n):
    args = _bad_args(case, n)
    snapshot = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    with pytest.raises(ArgumentError) as ei:
        EXCHANGE_FP32(*args, config=config_for(n))
    e = ei.value
    assert e.code == "TC410"
    assert isinstance(e, TypeError)
    if case not in ("too_few", "too_many"):
        assert "'xs'" in e.message or "'ys'" in e.message   # names the parameter
    for a, b in zip(args, snapshot):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)


def test_argument_of_unsupported_type(no_workers):
    ys = np.zeros((2, 2, S), np.float32)
    with pytest.raises(ArgumentError) as ei:
        EXCHANGE_FP32([[1.0] * S] * 2, ys, config=config_for(2))
    assert ei.value.code == "TC411"
    assert "list" in ei.value.message and "'xs'" in ei.value.message
    with pytest.raises(ArgumentError) as ei:
        EXCHANGE_FP32(np.ones((2, 2, S), np.complex64), ys, config=config_for(2))
    assert ei.value.code == "TC411"
    assert "complex64" in ei.value.message


def test_torch_mismatches_raise_argument_error(no_workers):
    torch = pytest.importorskip("torch")
    ys = torch.zeros((2, 2, S))
    with pytest.raises(ArgumentError) as ei:
        EXCHANGE_FP32(torch.zeros((2, 2, S), dtype=torch.float64), ys, config=config_for(2))
    assert ei.value.code == "TC410"
    with pytest.raises(ArgumentError) as ei:
        EXCHANGE_FP32(torch.zeros((2, 2, S)), ys.to(torch.bfloat16), config=config_for(2))
    assert ei.value.code == "TC410"
    # a non-contiguous torch view cannot be shared without a copy the caller never sees
    strided = torch.zeros((2, 2, 2 * S))[:, :, ::2]
    assert not strided.is_contiguous()
    with pytest.raises(ArgumentError) as ei:
        EXCHANGE_FP32(torch.zeros((2, 2, S)), strided, config=config_for(2))
    assert ei.value.code == "TC410"
    assert "contiguous" in ei.value.message


def test_inconsistent_dynamic_dim_rejected_before_start(no_workers):
    # NR is bound by xs (3) and contradicted by ys (2): a user error, reported
    # before any rank starts
    xs = np.ones((3, 2, S), np.float32)
    ys = np.zeros((2, 2, S), np.float32)
    with pytest.raises(UserError) as ei:
        EXCHANGE_FP32(xs, ys, config=config_for(2))
    assert "NR" in ei.value.message and "'ys'" in ei.value.message
    assert isinstance(ei.value, (TypeError, ValueError))
