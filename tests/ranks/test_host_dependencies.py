"""Host tensors order dispatches across ranks: a dispatch reading a host tensor
another rank writes waits for that write (windows carry no such edge)."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DeadlockError
from conftest import WORLD_SIZES, config_for
from programs_host_deps import N, chip_consume, chip_produce

NR = pl.dynamic("NR")
SLOW = 3000          # iterations per rank index: rank r+1 produces long after rank r


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, N], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, N], pl.FP32]]):
    wb = pld.alloc_window_buffer([1, N], dtype=pl.FP32)
    tmp = pl.create_tensor([NR, 1, N], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip_produce(xs[r], tmp[r], pld.window(wb, [1, N], dtype=pl.FP32), r * SLOW, device=r)
    for r in pl.range(pld.world_size()):
        # rank r consumes what rank r+1 produced
        chip_consume(tmp[(r + 1) % pld.world_size()], ys[r],
                     pld.window(wb, [1, N], dtype=pl.FP32), device=r)
    return ys


def _expected(xs):
    n = xs.shape[0]
    produced = xs + (np.arange(n, dtype=np.float32) * SLOW)[:, None, None]
    return np.roll(produced, -1, axis=0) * 2


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_consumer_waits_for_the_producing_rank(n):
    xs = np.random.default_rng(n).integers(-4, 4, size=(n, 1, N)).astype(np.float32)
    ys = np.full_like(xs, np.nan)
    main(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys, _expected(xs))


# ------------------------------------------------------------------ gated producer
# Rank 1's producer may only write after rank 0 has passed its consumer
# dispatch (it waits for a signal rank 0 sends in a later dispatch).  The
# host-tensor edge makes rank 0's consumer wait for rank 1's producer first,
# so the program must deadlock -- deterministically, with the edge named in
# the report.  Without the edge the consumer would run first and read a tmp
# nobody wrote yet, and the call would return.
@pl.jit.incore
def gated_produce(x: pl.Tensor[[1, N], pl.FP32], tmp: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]
                  ) -> pl.Tensor[[1, N], pl.FP32]:
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Ge)
    tmp = pl.store(pl.load(x, [0, 0], [1, N]), [0, 0], tmp)
    return tmp


@pl.jit.incore
def gated_consume(tmp: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]
                  ) -> pl.Tensor[[1, N], pl.FP32]:
    y = pl.store(pl.load(tmp, [0, 0], [1, N]), [0, 0], y)
    return y


@pl.jit.incore
def gated_release(sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    pld.system.notify(sig, 1, [0, 0], 1, op=pld.NotifyOp.Set)


@pl.jit
def chip_gated_produce(x: pl.Tensor[[1, N], pl.FP32], tmp: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                       sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return gated_produce(x, tmp, sig)


@pl.jit
def chip_gated_consume(tmp: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                       sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return gated_consume(tmp, y, sig)


@pl.jit
def chip_gated_release(sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    gated_release(sig)


@pl.jit.host
def gated_main(xs: pl.Tensor[[2, 1, N], pl.FP32], ys: pl.Out[pl.Tensor[[2, 1, N], pl.FP32]]):
    sb = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    tmp = pl.create_tensor([2, 1, N], dtype=pl.FP32)
    chip_gated_produce(xs[1], tmp[1], pld.window(sb, [1, 1], dtype=pl.INT32), device=1)
    chip_gated_consume(tmp[1], ys[0], pld.window(sb, [1, 1], dtype=pl.INT32), device=0)
    chip_gated_release(pld.window(sb, [1, 1], dtype=pl.INT32), device=0)
    return ys


def test_the_consumer_is_ordered_after_the_producer_by_the_runtime():
    xs = np.ones((2, 1, N), np.float32)
    ys = np.full_like(xs, np.nan)
    with pytest.raises(DeadlockError) as ei:
        gated_main(xs, ys, config=config_for(2, deadlock_timeout_s=0.2))
    text = str(ei.value)
    assert "rank 0: waits for rank 1 to finish dispatch #1 (it has finished #0): a host tensor " \
           "dependency" in text, text
    kinds = {b["rank"]: b["kind"] for b in ei.value.blocked}
    assert kinds == {0: "dispatch", 1: "signal"}, text
    assert np.isnan(ys).all()                      # a failed call leaves outputs alone
