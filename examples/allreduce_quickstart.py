"""Mesh allreduce from primitives: stage in -> barrier -> remote accumulate -> stage out.

Every rank contributes one row of SIZE floats; afterwards every rank holds the
elementwise sum over all ranks.  Run: python examples/allreduce_quickstart.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 64


def build(nr: int):
    @pl.jit.incore
    def allreduce_kernel(x: pl.Tensor[[1, SIZE], pl.FP32],
                         y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                         data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                         signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        ctx = pld.get_comm_ctx(data)
        my_rank = pld.rank(ctx)
        nranks = pld.nranks(ctx)
        # stage in: publish this rank's contribution in its own window
        local = pl.load(x, [0, 0], [1, SIZE])
        pl.store(local, [0, 0], data)
        # barrier: tell every peer "my data is staged", then wait for all of them
        for peer in pl.range(nranks):
            if peer != my_rank:
                pld.system.notify(signal, peer=peer, offsets=[my_rank, 0], value=1,
                                  op=pld.NotifyOp.AtomicAdd)
        for src in pl.range(nranks):
            if src != my_rank:
                pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
        # remote accumulate
        acc = local
        for peer in pl.range(nranks):
            if peer != my_rank:
                acc = pl.add(acc, pld.tile.remote_load(data, peer=peer, offsets=[0, 0],
                                                       shape=[1, SIZE]))
        # stage out
        y = pl.store(acc, [0, 0], y)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
             data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
             signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        return allreduce_kernel(x, y, data, signal)

    @pl.jit.host
    def main(inputs: pl.Tensor[[nr, 1, SIZE], pl.FP32],
             outputs: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]]):
        data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(inputs[r], outputs[r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32),
                 pld.window(sig_buf, [pld.world_size(), 1], dtype=pl.INT32), device=r)
        return outputs

    return main


def run(nr: int) -> np.ndarray:
    main = build(nr)
    rng = np.random.default_rng(0)
    inputs = rng.integers(-8, 8, size=(nr, 1, SIZE)).astype(np.float32)
    outputs = np.zeros_like(inputs)
    main(inputs, outputs,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    expected = np.broadcast_to(inputs.sum(axis=0), inputs.shape)
    np.testing.assert_allclose(outputs, expected)
    return outputs


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    out = run(args.ranks)
    print(f"allreduce over {args.ranks} ranks: row sums {out[:, 0, :4].tolist()} ...")
    print("OK")
