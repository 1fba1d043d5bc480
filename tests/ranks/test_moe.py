"""The expert-parallel MoE round of examples/moe_dispatch_combine.py against a
numpy reference written here, independently of the example's own check:
dispatch by published counts and prefix slot offsets, the capacity rule
(first CAP rows per expert in (source rank, token, k) order, the rest dropped
and counted), BF16 rounding of every weighted term and FP32 accumulation in
top-k order.  A faithful miniature runs at 1-4 ranks on every transport; the
DeepSeek-sized layer (T=128, K=6, E=16 per rank, H=4096, CAP=192) at 2 and 4
ranks.  Routings come from fixed seeds and include experts left empty,
experts filled exactly to capacity and experts routed beyond it."""
import importlib.util
import os

import ml_dtypes
import numpy as np
import pytest

from tilecomm.errors import RankFailure

from programs_prims import config_for

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "examples", "moe_dispatch_combine.py")
_spec = importlib.util.spec_from_file_location("moe_dispatch_combine", EXAMPLE)
moe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(moe)

BF16 = ml_dtypes.bfloat16


def expected(xs, idxs, wts, shape):
    """(y, kept per global expert, dropped per source rank), token by token."""
    nr, T, K = idxs.shape
    ne, cap = nr * shape.experts, shape.capacity
    flat = idxs.reshape(-1)                          # row-major = (source, token, k) order
    keep = np.zeros(flat.size, bool)
    for g in range(ne):
        rows = np.flatnonzero(flat == g)             # ascending = arrival order at expert g
        keep[rows[:cap]] = True
    keep = keep.reshape(idxs.shape)
    y = np.empty(xs.shape, np.float32)
    for s in range(nr):
        for t in range(T):
            acc = np.zeros(xs.shape[-1], np.float32)
            x = xs[s, t].astype(np.float32)
            for k in range(K):
                if keep[s, t, k]:
                    acc = acc + (x * wts[s, t, k]).astype(BF16).astype(np.float32)
            y[s, t] = acc
    kept = np.bincount(flat[keep.reshape(-1)], minlength=ne)
    return y, kept, (~keep).sum(axis=(1, 2))


def run_round(nr, shape, seed, **routing):
    rng = np.random.default_rng(seed)
    xs, idxs, wts = moe.make_inputs(rng, nr, shape, **routing)
    ys = np.full(xs.shape, np.nan, np.float32)
    stats = np.full((nr, 1, shape.experts + 1), -1, np.int32)
    moe.build(nr, shape)(xs, idxs, wts, ys, stats, config=config_for(nr))
    return xs, idxs, wts, ys, stats[:, 0]


def check_round(nr, shape, seed, **routing):
    xs, idxs, wts, ys, stats = run_round(nr, shape, seed, **routing)
    want_y, kept, dropped = expected(xs, idxs, wts, shape)
    np.testing.assert_array_equal(stats[:, :-1].reshape(-1), kept)
    np.testing.assert_array_equal(stats[:, -1], dropped)
    np.testing.assert_allclose(ys, want_y, rtol=2 ** -6, atol=2 ** -6)
    return kept, dropped


def edge_routing(nr, shape):
    """An exactly full expert, an empty one and -- when the tokens allow it --
    one routed beyond capacity."""
    over = (1,) if nr * shape.tokens >= shape.capacity + shape.tokens // 2 else ()
    return dict(full=(0,), empty=(nr * shape.experts - 1,), over=over)


@pytest.mark.parametrize("nr", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1])
def test_small_round_matches_reference(nr, seed):
    routing = edge_routing(nr, moe.SMALL)
    kept, dropped = check_round(nr, moe.SMALL, seed, **routing)
    cap = moe.SMALL.capacity
    assert kept[0] == cap and kept[-1] == 0
    if routing["over"]:
        assert kept[1] == cap and dropped.sum() >= moe.SMALL.tokens // 2


@pytest.mark.parametrize("nr", [2, 3])
def test_uniform_routing_without_edges(nr):
    check_round(nr, moe.SMALL, seed=7)


def test_overfull_routing_drops_exactly_the_late_rows():
    # 2 ranks, every choice of rank 1's tokens aimed at experts that rank 0
    # already fills: rank 1's rows to them are the ones dropped
    shape = moe.SMALL
    nr = 2
    rng = np.random.default_rng(3)
    xs, idxs, wts = moe.make_inputs(rng, nr, shape)
    idxs[:, :, 0] = 0
    idxs[:, :, 1] = 1                                 # 2 * T rows for a CAP < T * 2 expert
    ys = np.full(xs.shape, np.nan, np.float32)
    stats = np.full((nr, 1, shape.experts + 1), -1, np.int32)
    moe.build(nr, shape)(xs, idxs, wts, ys, stats, config=config_for(nr))
    want_y, kept, dropped = expected(xs, idxs, wts, shape)
    cap, T = shape.capacity, shape.tokens
    assert kept[0] == kept[1] == cap
    assert dropped.tolist() == [2 * max(T - cap, 0), 2 * T - 2 * max(cap - T, 0)]
    np.testing.assert_array_equal(stats[:, 0, -1], dropped)
    # rank 1's tokens got nothing back: their sums are exactly zero
    np.testing.assert_array_equal(ys[1], 0)
    np.testing.assert_allclose(ys, want_y, rtol=2 ** -6, atol=2 ** -6)


@pytest.mark.parametrize("nr", [2, 4])
def test_deepseek_sized_round(nr):
    shape = moe.DEEPSEEK
    kept, dropped = check_round(nr, shape, seed=nr, **edge_routing(nr, shape))
    assert kept[0] == shape.capacity and kept[-1] == 0
    assert kept[1] == shape.capacity and dropped.sum() == shape.tokens // 2


def test_routing_generator_hits_the_requested_loads():
    shape = moe.SMALL
    idx = moe.make_routing(np.random.default_rng(5), 3, shape, full=(2,), empty=(0, 5),
                           over=(7,))
    counts = np.bincount(idx.reshape(-1), minlength=3 * shape.experts)
    assert counts[2] == shape.capacity and counts[0] == counts[5] == 0
    assert counts[7] == shape.capacity + shape.tokens // 2
    assert all(len(set(row)) == shape.topk for row in idx.reshape(-1, shape.topk))
    with pytest.raises(ValueError):
        moe.make_routing(np.random.default_rng(5), 1, shape, full=(0,), empty=(0,))


@pytest.mark.parametrize("bad", [-1, "past-the-end"])
def test_expert_id_outside_the_world_is_a_located_rank_failure(bad):
    # a routing naming an expert no rank owns must stop the round where the id
    # is first used (the histogram), never index another expert's counts
    shape, nr = moe.SMALL, 2
    xs, idxs, wts = moe.make_inputs(np.random.default_rng(0), nr, shape)
    idxs[1, 3, 1] = -1 if bad == -1 else nr * shape.experts
    ys = np.zeros(xs.shape, np.float32)
    stats = np.zeros((nr, 1, shape.experts + 1), np.int32)
    with pytest.raises(RankFailure) as ei:
        moe.build(nr, shape)(xs, idxs, wts, ys, stats, config=config_for(nr))
    e = ei.value
    assert e.rank == 1 and e.error_code == "TC502" and "out of bounds" in str(e)
    with open(EXAMPLE) as f:
        line = next(i for i, text in enumerate(f, 1) if "hist[g] = hist[g] + 1" in text)
    assert os.path.abspath(e.span.file) == EXAMPLE and e.span.line == line
