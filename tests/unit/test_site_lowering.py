"""Which loads of a kernel the lowering turns into views (lower/sites.py), and
the call-site tile pool (runtime/rank/tile/site_ops.py).  The program runs on
one rank and its results are checked against numpy: a view the proof did not
allow would show the later write."""
import re

import numpy as np

import tilecomm.language as pl
from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.runtime.rank.tile.site_ops import Site

S = 4


@pl.jit.incore
def views_kernel(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[4, S], pl.FP32]],
                 acc: pl.InOut[pl.Tensor[[1, S], pl.FP32]]) -> pl.Tensor[[4, S], pl.FP32]:
    quiet = pl.load(x, [0, 0], [1, S])            # used up before anything writes
    twice = pl.add(quiet, quiet)
    named = pl.load(x, [0, 0], [1, S])            # used across stores: a copy
    y = pl.store(pl.add(pl.load(x, [0, 0], [1, S]), named), [0, 0], y)
    y = pl.store(pl.load(x, [0, 0], [1, S]), [1, 0], y)
    # the inner store writes acc before the outer one reads its tile: the
    # load of acc must be a copy taken before that write
    acc = pl.store(pl.load(acc, [0, 0], [1, S]), [0, 0],
                   pl.store(pl.mul(named, named), [0, 0], acc))
    y = pl.store(pl.load(acc, [0, 0], [1, S]), [2, 0], y)
    y = pl.store(pl.sub(twice, named), [3, 0], y)
    return y


@pl.jit
def views_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[4, S], pl.FP32]],
               acc: pl.InOut[pl.Tensor[[1, S], pl.FP32]]):
    return views_kernel(x, y, acc)


@pl.jit.host
def views_main(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[4, S], pl.FP32]],
               acc: pl.InOut[pl.Tensor[[1, S], pl.FP32]]):
    views_chip(x, y, acc, device=0)
    return y


def test_views_only_where_nothing_writes_before_the_use(tmp_path):
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0]), cache_dir=str(tmp_path))
    x = np.array([[1, 2, 3, 4]], np.float32)
    y = np.zeros((4, S), np.float32)
    acc = np.full((1, S), 10, np.float32)
    compiled = views_main.compile(x, y, acc, config=cfg)
    src = compiled.lowered(x, y, acc).source
    body = src[src.index("def f_views_kernel"):]
    loads = re.findall(r"_rt\.load_at\(\d+, (True|False), (\w+)", body)
    # quiet named, named, operand of add, under an impure store
    assert loads == [("True", "x"), ("False", "x"), ("True", "x"), ("False", "acc")], loads
    # a stored view is one copy from region to region: the stored tile, the
    # final reload
    copies = re.findall(r"_rt\.copy_at\(\d+, \d+, (\w+)", body)
    assert copies == ["x", "acc"], copies
    assert "_rt.store_binary_at(" in body          # add computed into y's region
    views_main(x, y, acc, config=cfg)
    np.testing.assert_array_equal(y[0], 2 * x[0])
    np.testing.assert_array_equal(y[1], x[0])
    np.testing.assert_array_equal(acc, np.full((1, S), 10, np.float32))  # the copy won
    np.testing.assert_array_equal(y[2], acc[0])
    np.testing.assert_array_equal(y[3], x[0])


def test_a_site_reuses_only_tiles_nobody_references():
    s = Site()
    a = s.fresh((2, 3), np.dtype(np.float32))
    b = s.fresh((2, 3), np.dtype(np.float32))
    assert a is not b                              # a is held by its name
    held = a[0]                                    # a view keeps its base alive
    del a
    c = s.fresh((2, 3), np.dtype(np.float32))
    assert c is not held.base and c is not b
    del held, c
    d = s.fresh((2, 3), np.dtype(np.float32))      # the pool's tiles are free now
    assert d.shape == (2, 3) and any(d is t for t in s.pool)
    e = s.fresh((5,), np.dtype(np.int32))          # another shape: a new tile
    assert e.shape == (5,) and e.dtype == np.int32
    assert len(s.pool) <= 2
