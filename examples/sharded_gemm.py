"""Sharded GEMM: rank r computes its row block c[r] = a[r] @ b on the cube
path, then every rank gathers every block with pld.tensor.allgather.

The cube path of one rank:
  * pl.load(..., target_memory=pl.MemorySpace.Mat) brings a[r] and b into
    on-chip Mat tiles;
  * pl.move puts them where the cube reads them, Left (a) and Right (b);
  * pl.matmul multiplies with an FP32 accumulator (BF16 / FP16 inputs too:
    out_dtype=pl.FP32 keeps the accumulator's precision); b_trans=True
    multiplies by b's transpose without moving it;
  * pl.store writes the [M, N] block.
Then a second kernel gathers: allgather takes this rank's block as one
[1, M*N] row (the kernel parameter's view of the same [M, N] tensor, same
element count, row-major) and fills row r of every rank's [NR, M*N] window.
After it, each rank holds the whole product c = a_all @ b, [NR*M, N].

Shapes depend on the rank count (the gathered window is [NR, M*N]), so the
program is built by build(nr, ...).
Run: python examples/sharded_gemm.py --ranks 4
"""
import argparse

import ml_dtypes
import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

MAT, LEFT, RIGHT = pl.MemorySpace.Mat, pl.MemorySpace.Left, pl.MemorySpace.Right
M, K, N = 24, 40, 36               # per-rank block: [M, K] @ [K, N]
BENCH_SHAPE = (128, 256, 256)      # bench/bench_moe.py's GEMM, per rank


def build(nr: int, m: int = M, k: int = K, n: int = N, dtype=pl.FP32, b_trans=False,
          compute=True):
    """Host entry ``main(a[nr, m, k], b, c[nr, nr*m, n])``: ``b`` is [k, n], or
    [n, k] with ``b_trans``; ``c[r]`` receives the whole FP32 product on rank
    r.  ``compute=False`` builds the same call with no kernel (the
    benchmark's baseline)."""
    b_shape = [n, k] if b_trans else [k, n]

    @pl.jit.incore
    def block_gemm(a: pl.Tensor[[m, k], dtype], b: pl.Tensor[b_shape, dtype],
                   c: pl.Out[pl.Tensor[[m, n], pl.FP32]]):
        ta = pl.move(pl.load(a, [0, 0], [m, k], target_memory=MAT), target_memory=LEFT)
        tb = pl.move(pl.load(b, [0, 0], b_shape, target_memory=MAT), target_memory=RIGHT)
        c = pl.store(pl.matmul(ta, tb, out_dtype=pl.FP32, b_trans=b_trans), [0, 0], c)
        return c

    @pl.jit.incore
    def gather_blocks(block: pl.Tensor[[1, m * n], pl.FP32],
                      c: pl.Out[pl.Tensor[[nr, m * n], pl.FP32]],
                      table: pl.InOut[pld.DistributedTensor[[nr, m * n], pl.FP32]],
                      sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        table = pld.tensor.allgather(block, table, sig)
        c = pl.store(pl.load(table, [0, 0], [nr, m * n]), [0, 0], c)
        return c

    @pl.jit
    def gemm_chip(a: pl.Tensor[[m, k], dtype], b: pl.Tensor[b_shape, dtype],
                  block: pl.Out[pl.Tensor[[m, n], pl.FP32]],
                  c: pl.Out[pl.Tensor[[nr * m, n], pl.FP32]],
                  table: pl.InOut[pld.DistributedTensor[[nr, m * n], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        if compute:
            block = block_gemm(a, b, block)
            c = gather_blocks(block, c, table, sig)
        return c

    @pl.jit.host
    def main(a: pl.Tensor[[nr, m, k], dtype], b: pl.Tensor[b_shape, dtype],
             c: pl.Out[pl.Tensor[[nr, nr * m, n], pl.FP32]]):
        blocks = pl.create_tensor([nr, m, n], dtype=pl.FP32)
        table_buf = pld.alloc_window_buffer([nr, m * n], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            gemm_chip(a[r], b, blocks[r], c[r], pld.window(table_buf, [nr, m * n], dtype=pl.FP32),
                      pld.window(sig_buf, [nr, 1], dtype=pl.INT32), device=r)
        return c

    return main


def reference(a, b, b_trans=False):
    """The whole product in float64 from the operands' exact values."""
    bb = b.astype(np.float64)
    return a.astype(np.float64).reshape(-1, a.shape[-1]) @ (bb.T if b_trans else bb)


def run(nr: int, dtype=pl.FP32, b_trans=False, seed=0):
    rng = np.random.default_rng(seed)
    np_dt = dtype.np_dtype
    a = rng.uniform(-1, 1, (nr, M, K)).astype(np_dt)
    b = rng.uniform(-1, 1, (N, K) if b_trans else (K, N)).astype(np_dt)
    c = np.full((nr, nr * M, N), np.nan, np.float32)
    build(nr, dtype=dtype, b_trans=b_trans)(
        a, b, c, config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    want = reference(a, b, b_trans)
    for r in range(nr):                    # every rank holds every block
        np.testing.assert_allclose(c[r], want, rtol=1e-5, atol=1e-5)
    return c


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    run(args.ranks)
    c = run(args.ranks, pl.BF16, b_trans=True)
    print(f"sharded GEMM over {args.ranks} ranks: [{args.ranks * M}, {K}] @ [{K}, {N}] in "
          f"{args.ranks} row blocks, gathered on every rank (FP32, and BF16 inputs with b "
          f"transposed); c[0, 0, :3] = {np.round(c[0, 0, :3], 4).tolist()}")
    print("OK")
