"""A rank-divergent collective is reported as a deadlock that names the
collective and its line, says which ranks are inside it at which barrier
generation and what every other member of the domain does instead (skipped
the call and finished, or called a different collective on the same signal)."""
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DeadlockError
from conftest import config_for

NR = pl.dynamic("NR")
S = 8


@pl.jit.incore
def diverge(data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
            sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
            mode: pl.Scalar[pl.INT32]):
    me = pld.rank(pld.get_comm_ctx(sig))
    n = pld.nranks(pld.get_comm_ctx(sig))
    if me == n - 1:
        if mode == 1:
            pld.tensor.barrier(sig)                                  # LINE:barrier
    else:
        data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)  # LINE:allreduce
    return data


@pl.jit
def diverge_chip(data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                 mode: pl.Scalar[pl.INT32]):
    return diverge(data, sig, mode)


@pl.jit.host
def diverge_main(ranks: pl.Tensor[[NR], pl.INT32], mode: pl.Scalar[pl.INT32]):
    data = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        diverge_chip(pld.window(data, [1, S], dtype=pl.FP32),
                     pld.window(sig, [NR, 1], dtype=pl.INT32), mode, device=r)


def line_of(tag):
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# LINE:{tag}"):
                return i
    raise AssertionError(tag)


def run(n, mode):
    import numpy as np
    with pytest.raises(DeadlockError) as info:
        diverge_main(np.zeros(n, np.int32), mode, config=config_for(n))
    return info.value


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_rank_that_skips_the_collective(n):
    e = run(n, 0)
    text = str(e)
    last = n - 1
    assert f"pld.tensor.allreduce at {__file__}:{line_of('allreduce')}" in text, text
    for r in range(last):
        assert f"rank {r}: inside, at barrier generation 1, waiting for rank {last} to arrive" \
            in text, text
    assert f"rank {last}: never entered this call -- finished its dispatches" in text, text
    assert "same collective calls on a signal, in the same order" in text
    inside = [b for b in e.blocked if b.get("collective") == "pld.tensor.allreduce"]
    assert sorted(b["rank"] for b in inside) == list(range(last))
    assert all(b["generation"] == 1 and b["waits_for"] == last for b in inside)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_rank_that_calls_another_collective_on_the_same_signal(n):
    e = run(n, 1)
    text = str(e)
    last = n - 1
    where = f"{__file__}:{line_of('barrier')}"
    assert f"pld.tensor.allreduce at {__file__}:{line_of('allreduce')}" in text, text
    # the barrier's arrival counts as the allreduce's first one on the other
    # ranks, so the mismatch surfaces wherever the counts stop adding up: the
    # report must still show both calls (or the barrier rank having left)
    assert (f"rank {last}: never entered this call -- inside pld.tensor.barrier at {where}"
            in text or f"rank {last}: never entered this call -- finished its dispatches"
            in text), text
    gens = {b["generation"] for b in e.blocked if b.get("collective") == "pld.tensor.allreduce"}
    assert gens and gens <= {1, 2}, text


# ------------------------------------------------------------------ defer=True
@pl.jit
def deferred_diverge_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[NR, S], pl.FP32]],
                          t: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                          sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    # the last rank skips the call: the others' TaskIds never complete, and
    # nothing spins -- the report comes from their deferred conditions
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="gather") as g:
        ctx = pld.get_comm_ctx(sig)
        if pld.rank(ctx) != pld.nranks(ctx) - 1:
            t = pld.tensor.allgather(x, t, sig, defer=True)          # LINE:deferred
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume", deps=[g]):
        y = pl.store(pl.load(t, [0, 0], [NR, S]), [0, 0], y)
    return y


@pl.jit.host
def deferred_diverge_main(xs: pl.Tensor[[NR, 1, S], pl.FP32],
                          ys: pl.Out[pl.Tensor[[NR, NR, S], pl.FP32]]):
    t = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        deferred_diverge_chip(xs[r], ys[r], pld.window(t, [NR, S], dtype=pl.FP32),
                              pld.window(sig, [NR, 1], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", [2, 3])
def test_a_deferred_collective_that_never_completes(n):
    import numpy as np
    with pytest.raises(DeadlockError) as info:
        deferred_diverge_main(np.ones((n, 1, S), np.float32),
                              np.zeros((n, n, S), np.float32), config=config_for(n))
    e = info.value
    text = str(e)
    last = n - 1
    assert f"pld.tensor.allgather at {__file__}:{line_of('deferred')}" in text, text
    for r in range(last):
        assert (f"rank {r}: inside (defer=True: its task's TaskId is pending), at barrier "
                f"generation 1, waiting for rank {last} to arrive") in text, text
    assert f"rank {last}: never entered this call -- finished its dispatches" in text, text
    inside = [b for b in e.blocked if b.get("collective") == "pld.tensor.allgather"]
    assert sorted(b["rank"] for b in inside) == list(range(last))
