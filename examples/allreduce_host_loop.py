"""HOST allreduce in a loop: publish -> allreduce -> consume, 100 rounds on
ONE explicit signal.

The host orchestrator repeats three steps per round:
  1. publish: a per-rank dispatch stages this round's row in the rank's
     `data` window;
  2. pld.tensor.allreduce(data, signal), written in the host body: a HOST
     builtin.  It becomes one builtin dispatch per member rank of the
     window's comm domain; the builtins run concurrently and meet on the
     signal, and a rank's later dispatches see the reduced window;
  3. consume: a per-rank dispatch copies the reduced row out.
No extra barrier is needed although ranks drift apart: each rank runs its
own dispatches in host program order (its round k+1 publish comes after its
round k consume), and the allreduce returns on a rank only once every rank
has finished reading the peers' windows, so a fast rank's next publish
cannot reach a slow rank's current reduction.

The signal (rank-1 [NR] INT32) is allocated once, before the loop.  That is
what makes the loop legal: a collective's signal clears itself (each call
takes back the credits it added), so back-to-back calls can share it, and
the last consume reads it back as all zeros.  Never write those cells
yourself (a Set would destroy the count).  Leaving the signal out instead
(allreduce_host_synthesized.py) allocates a fresh one per call, which is why
that form is refused inside a loop.

Every round has its own data and every round's result is checked.
Run: python examples/allreduce_host_loop.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 64
ROUNDS = 100
NR = pl.dynamic("NR")


@pl.jit.incore
def publish_kernel(x: pl.Tensor[[1, SIZE], pl.FP32],
                   data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
    return data


@pl.jit
def publish(x: pl.Tensor[[1, SIZE], pl.FP32],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    return publish_kernel(x, data)


@pl.jit.incore
def consume_kernel(y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                   data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    y = pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)
    return y


@pl.jit
def consume(y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    return consume_kernel(y, data)


@pl.jit.incore
def read_signal_kernel(cells: pl.Out[pl.Tensor[[NR], pl.INT32]],
                       signal: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    for i in pl.range(NR):
        pl.write(cells, [i], pl.read(signal, [i]))
    return cells


@pl.jit
def read_signal(cells: pl.Out[pl.Tensor[[NR], pl.INT32]],
                signal: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    return read_signal_kernel(cells, signal)


@pl.jit.host
def main(xs: pl.Tensor[[ROUNDS, NR, 1, SIZE], pl.FP32],
         ys: pl.Out[pl.Tensor[[ROUNDS, NR, 1, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, NR], pl.INT32]]):
    data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR], dtype=pl.INT32)
    # one signal view for every round
    signal = pld.window(sig_buf, [NR], dtype=pl.INT32)
    for rd in pl.range(ROUNDS):
        for r in pl.range(pld.world_size()):
            publish(xs[rd, r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32), device=r)
        pld.tensor.allreduce(pld.window(data_buf, [1, SIZE], dtype=pl.FP32), signal)
        for r in pl.range(pld.world_size()):
            consume(ys[rd, r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32), device=r)
    for r in pl.range(pld.world_size()):
        read_signal(cells[r], signal, device=r)
    return ys


def run(nr: int):
    rng = np.random.default_rng(nr)
    xs = rng.integers(-8, 8, (ROUNDS, nr, 1, SIZE)).astype(np.float32)   # exact integer sums
    ys = np.full_like(xs, np.nan)
    cells = np.full((nr, nr), -1, np.int32)
    main(xs, ys, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    for rd in range(ROUNDS):
        want = np.broadcast_to(xs[rd].sum(axis=0), xs[rd].shape)
        np.testing.assert_array_equal(ys[rd], want, err_msg=f"round {rd}")
    np.testing.assert_array_equal(cells, 0, err_msg="signal after the last round")
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    ys = run(args.ranks)
    print(f"{ROUNDS} HOST allreduce rounds over {args.ranks} ranks on one signal; "
          f"last round starts {ys[-1, 0, 0, :4].tolist()}; signal all zeros")
    print("OK")
