"""Rank-dependent compute: every rank runs the same kernel, the result depends on who it is.

Each rank computes y = x * (rank + 1) + rank on its own row.  A kernel has no
implicit "my rank": it learns it from a window's comm context
(pld.rank(pld.get_comm_ctx(win))), which is why this example allocates a window
even though no data crosses ranks.  The host also passes its loop index r as a
plain scalar, and the kernel records both so the test can see they agree.
Run: python examples/hello_rank.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 16


@pl.jit.incore
def scale_kernel(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                 ids: pl.Out[pl.Tensor[[1, 3], pl.INT32]],
                 win: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                 host_r: pl.Scalar[pl.INT32]):
    # the window is only the key to the comm context: rank and size of its domain
    ctx = pld.get_comm_ctx(win)
    my_rank = pld.rank(ctx)
    nranks = pld.nranks(ctx)
    # tiles do not promote dtypes implicitly: turn the INT32 rank into an FP32 scalar
    rf = pl.cast(my_rank, pl.FP32)
    t = pl.load(x, [0, 0], [1, SIZE])
    t = pl.add(pl.mul(t, pl.add(rf, 1.0)), rf)
    y = pl.store(t, [0, 0], y)
    # bookkeeping for the host: [rank from ctx, rank passed by host, domain size]
    pl.write(ids, [0, 0], my_rank)
    pl.write(ids, [0, 1], host_r)
    pl.write(ids, [0, 2], nranks)
    return y


@pl.jit
def chip(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
         ids: pl.Out[pl.Tensor[[1, 3], pl.INT32]],
         win: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
         host_r: pl.Scalar[pl.INT32]):
    # tensors first, scalars last: the dispatch ABI packs them in that order
    return scale_kernel(x, y, ids, win, host_r)


NR = pl.dynamic("NR")     # the rank count comes from the leading dim of the host tensors


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
         ids: pl.Out[pl.Tensor[[NR, 1, 3], pl.INT32]]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        # device=r sends this call to rank r; xs[r] drops the leading rank dim
        chip(xs[r], ys[r], ids[r], pld.window(buf, [1, 1], dtype=pl.INT32), r, device=r)
    return ys


def run(nr: int):
    rng = np.random.default_rng(1)
    xs = rng.integers(-4, 5, size=(nr, 1, SIZE)).astype(np.float32)
    ys = np.zeros_like(xs)
    ids = np.full((nr, 1, 3), -1, np.int32)
    main(xs, ys, ids,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    rank = np.arange(nr, dtype=np.float32).reshape(nr, 1, 1)
    np.testing.assert_array_equal(ys, xs * (rank + 1) + rank)
    expected_ids = np.stack([np.arange(nr), np.arange(nr), np.full(nr, nr)], axis=1)
    np.testing.assert_array_equal(ids.reshape(nr, 3), expected_ids)
    return ys, ids


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    ys, ids = run(args.ranks)
    print(f"{args.ranks} ranks; (ctx rank, host r, nranks) per rank: "
          f"{[tuple(v) for v in ids.reshape(-1, 3).tolist()]}")
    print("OK")
