"""One task of many blocks: pl.spmd splits a matrix by rows over the rank's cores.

`for i in pl.spmd(ROWS)` submits one task of ROWS blocks; block i scales row
i of its input.  The blocks are independent by construction, so they run
concurrently on the rank's cores, and the task completes when the last block
does.  A second task, `with pl.spmd(...) as tid` with deps=, reads every
block's output through pl.get_block_idx() once the first task completed.
Run: python examples/spmd_rows.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

NR = pl.dynamic("NR")
ROWS, N = 4, 16


@pl.jit
def chip(x: pl.Tensor[[ROWS, N], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, N], pl.FP32]],
         tmp: pl.Out[pl.Tensor[[ROWS, N], pl.FP32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="scale_all") as scaled:
        for i in pl.range(ROWS):
            tmp = pl.store(pl.mul(pl.load(x, [i, 0], [1, N]), 2.0), [i, 0], tmp)
    with pl.manual_scope():
        with pl.spmd(ROWS, name_hint="shift_rows", deps=[scaled]) as shifted:
            b = pl.get_block_idx()
            y = pl.store(pl.add(pl.load(tmp, [b, 0], [1, N]), 1.0), [b, 0], y)
    return y


@pl.jit.host
def main(xs: pl.Tensor[[NR, ROWS, N], pl.FP32], ys: pl.Out[pl.Tensor[[NR, ROWS, N], pl.FP32]],
         tmps: pl.Out[pl.Tensor[[NR, ROWS, N], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], tmps[r], device=r)
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    n = ap.parse_args().ranks
    xs = np.random.default_rng(1).standard_normal((n, ROWS, N)).astype(np.float32)
    ys, tmps = np.zeros_like(xs), np.zeros_like(xs)
    main(xs, ys, tmps, config=RunConfig(distributed_config=DistributedConfig(
        device_ids=list(range(n)))))
    np.testing.assert_allclose(ys, xs * 2 + 1, rtol=1e-6)
    print(f"{n} ranks: every row of every rank scaled by its own block")
    print("OK")
