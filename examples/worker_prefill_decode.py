"""Two programs on one prepared worker sharing a device-resident KV cache.

``prefill`` fills each rank's shard of the cache from the prompt; ``decode``
then runs several steps that read the cache and append nothing to it (a
sketch of the serving loop: y[r] = kv[r] + q[r]).  Both programs are prepared
on one set of ranks (``DistributedWorker([prefill, decode])``, which requires
the same platform and device_ids), the cache is a ``StackedDeviceTensor``
(shard r on rank r) passed by reference to both, and calls name their program
(``rt.run(prefill, ...)``): ``rt(...)`` would be ambiguous.
Run: python examples/worker_prefill_decode.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, DistributedWorker, RunConfig

SEQ, DIM = 4, 16


def build(nr: int):
    @pl.jit.incore
    def fill(x: pl.Tensor[[SEQ, DIM], pl.FP32], kv: pl.Out[pl.Tensor[[SEQ, DIM], pl.FP32]]
             ) -> pl.Tensor[[SEQ, DIM], pl.FP32]:
        t = pl.load(x, [0, 0], [SEQ, DIM])
        kv = pl.store(pl.mul(t, 2.0), [0, 0], kv)
        return kv

    @pl.jit.incore
    def attend(q: pl.Tensor[[SEQ, DIM], pl.FP32], kv: pl.Tensor[[SEQ, DIM], pl.FP32],
               y: pl.Out[pl.Tensor[[SEQ, DIM], pl.FP32]]) -> pl.Tensor[[SEQ, DIM], pl.FP32]:
        t = pl.add(pl.load(q, [0, 0], [SEQ, DIM]), pl.load(kv, [0, 0], [SEQ, DIM]))
        y = pl.store(t, [0, 0], y)
        return y

    @pl.jit
    def prefill_chip(x: pl.Tensor[[SEQ, DIM], pl.FP32],
                     kv: pl.Out[pl.Tensor[[SEQ, DIM], pl.FP32]]):
        return fill(x, kv)

    @pl.jit
    def decode_chip(q: pl.Tensor[[SEQ, DIM], pl.FP32], kv: pl.Tensor[[SEQ, DIM], pl.FP32],
                    y: pl.Out[pl.Tensor[[SEQ, DIM], pl.FP32]]):
        return attend(q, kv, y)

    @pl.jit.host
    def prefill(prompt: pl.Tensor[[nr, SEQ, DIM], pl.FP32],
                kv: pl.Out[pl.Tensor[[nr, SEQ, DIM], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            prefill_chip(prompt[r], kv[r], device=r)
        return kv

    @pl.jit.host
    def decode(q: pl.Tensor[[nr, SEQ, DIM], pl.FP32], kv: pl.Tensor[[nr, SEQ, DIM], pl.FP32],
               y: pl.Out[pl.Tensor[[nr, SEQ, DIM], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            decode_chip(q[r], kv[r], y[r], device=r)
        return y

    return prefill, decode


def run(nr: int, steps: int = 3) -> None:
    prefill, decode = build(nr)
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))))
    shape = (nr, SEQ, DIM)
    rng = np.random.default_rng(1)
    prompt = rng.integers(-8, 8, size=shape).astype(np.float32)
    zeros = np.zeros(shape, np.float32)
    p = prefill.compile(prompt, zeros, config=cfg)
    d = decode.compile(zeros, zeros, zeros, config=cfg)
    with DistributedWorker([p, d]) as rt:
        kv = rt.alloc_stacked_tensor(zeros)              # the cache lives in the ranks
        rt.run(p, prompt, kv)
        for _ in range(steps):
            q = rng.integers(-8, 8, size=shape).astype(np.float32)
            y = np.zeros(shape, np.float32)
            rt.run(d, q, kv, y)
            np.testing.assert_array_equal(y, q + 2 * prompt)
        cache = np.zeros(shape, np.float32)
        rt.copy_stacked_from(kv, cache)                  # read the cache back
        np.testing.assert_array_equal(cache, 2 * prompt)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    run(args.ranks)
    print(f"prefill + 3 decode steps on {args.ranks} ranks sharing one KV cache: matches numpy")
    print("OK")
