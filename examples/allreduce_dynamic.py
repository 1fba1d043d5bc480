"""The quickstart allreduce with a dynamic rank count: one source for any number of ranks.

allreduce_quickstart.py builds its program inside build(nr) because the rank
count appears in its shapes ([nr, 1, SIZE] inputs, [nr, 1] signal).  Here
NR = pl.dynamic("NR") stands in for it: NR is bound from the leading dim of
the host tensors at call time, so this module-level program runs unchanged at
1, 2, 3 or 4 ranks.  NR may appear in annotations and as a value in host code;
inside the kernel the runtime count comes from pld.nranks(ctx).
The protocol: stage in -> barrier -> remote accumulate -> stage out.
Run: python examples/allreduce_dynamic.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 64
NR = pl.dynamic("NR")


@pl.jit.incore
def allreduce_kernel(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                     data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                     signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(data)
    my_rank = pld.rank(ctx)
    nranks = pld.nranks(ctx)
    # stage in: peers read contributions from windows, never from x
    local = pl.load(x, [0, 0], [1, SIZE])
    pl.store(local, [0, 0], data)
    # barrier: row my_rank of each peer's signal says "my contribution is staged";
    # every notify goes out before any wait, otherwise ranks wait on each other forever
    for peer in pl.range(nranks):
        if peer != my_rank:
            pld.system.notify(signal, peer=peer, offsets=[my_rank, 0], value=1,
                              op=pld.NotifyOp.AtomicAdd)
    for src in pl.range(nranks):
        if src != my_rank:
            pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
    # remote accumulate: every window is staged, so reading them is safe
    acc = local
    for peer in pl.range(nranks):
        if peer != my_rank:
            acc = pl.add(acc, pld.tile.remote_load(data, peer=peer, offsets=[0, 0],
                                                   shape=[1, SIZE]))
    # stage out (the windows are never written again, so no closing barrier is needed)
    y = pl.store(acc, [0, 0], y)
    return y


@pl.jit
def chip(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
         data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return allreduce_kernel(x, y, data, signal)


@pl.jit.host
def main(inputs: pl.Tensor[[NR, 1, SIZE], pl.FP32],
         outputs: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
    data_buf = pld.alloc_window_buffer(SIZE * pl.FP32.get_byte())
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)       # one cell per rank
    for r in pl.range(pld.world_size()):
        chip(inputs[r], outputs[r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return outputs


def run(nr: int) -> np.ndarray:
    rng = np.random.default_rng(nr)
    inputs = rng.integers(-8, 8, size=(nr, 1, SIZE)).astype(np.float32)
    outputs = np.full_like(inputs, np.nan)
    # the leading dim of inputs/outputs binds NR; it must match the rank count
    main(inputs, outputs,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_allclose(outputs, np.broadcast_to(inputs.sum(axis=0), inputs.shape))
    return outputs


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    out = run(args.ranks)
    print(f"allreduce with NR={args.ranks} from one source: sum starts {out[0, 0, :4].tolist()}")
    print("OK")
