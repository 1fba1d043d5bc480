"""Host tensors of a call when the ranks' processes share no memory with
process 0 (run under ``TILECOMM_MPI_DIRECT=0`` or ``MPIR_CVAR_NOLOCAL=1``):
every case checks its results against numpy on every process, and each
process r > 0 reports how many of process 0's /dev/shm segments it mapped.

Prints ``OK <process> mapped=<count>`` per process, then ``HOST <hostname>
nodes=<nodes MPI counts in the job>``."""
import os
import socket
import sys

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.transport import segments

NR = pl.dynamic("NR")
S = 8
ME = int(os.environ.get("PMI_RANK", "0"))

# every segment this process maps by name (the shared-memory path's way in)
ATTACHED: list = []
_attach = segments.Segment.attach.__func__


def _counting_attach(cls, name):
    ATTACHED.append(name)
    return _attach(cls, name)


segments.Segment.attach = classmethod(_counting_attach)


# ------------------------------------------------------------------ disjoint parts of one tensor
@pl.jit.incore
def write_part(x: pl.Tensor[[1, S], pl.FP32], y: pl.InOut[pl.Tensor[[1, 4 * S], pl.FP32]],
               at: pl.Scalar[pl.INDEX]) -> pl.Tensor[[1, 4 * S], pl.FP32]:
    t = pl.mul(pl.load(x, [0, 0], [1, S]), 3.0)
    y = pl.store(t, [0, at], y)
    return y


@pl.jit
def part_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.InOut[pl.Tensor[[1, 4 * S], pl.FP32]],
              at: pl.Scalar[pl.INDEX]):
    return write_part(x, y, at)


@pl.jit.host
def parts_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], y: pl.InOut[pl.Tensor[[1, 4 * S], pl.FP32]]):
    # every rank takes the whole of y and writes its own S columns
    for r in pl.range(pld.world_size()):
        part_chip(xs[r], y, r * S, device=r)
    return y


# ------------------------------------------------------------------ rows of one tensor, at once
@pl.jit.incore
def scale_row(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
              k: pl.Scalar[pl.FP32]) -> pl.Tensor[[1, S], pl.FP32]:
    y = pl.store(pl.mul(pl.load(x, [0, 0], [1, S]), k), [0, 0], y)
    return y


@pl.jit
def row_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
             k: pl.Scalar[pl.FP32]):
    return scale_row(x, y, k)


@pl.jit.host
def rows_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        row_chip(xs[r], ys[r], 2.0, device=r)
    return ys


# ------------------------------------------------------------------ a dependency across ranks
@pl.jit.incore
def produce(x: pl.Tensor[[1, S], pl.FP32], tmp: pl.Out[pl.Tensor[[1, S], pl.FP32]],
            steps: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, S], pl.FP32]:
    acc = pl.load(x, [0, 0], [1, S])
    for i, (a,) in pl.range(steps, init_values=(acc,)):
        out = pl.yield_(pl.add(a, 1.0))
    tmp = pl.store(out, [0, 0], tmp)
    return tmp


@pl.jit.incore
def consume(tmp: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]]
            ) -> pl.Tensor[[1, S], pl.FP32]:
    y = pl.store(pl.mul(pl.load(tmp, [0, 0], [1, S]), 2.0), [0, 0], y)
    return y


@pl.jit
def produce_chip(x: pl.Tensor[[1, S], pl.FP32], tmp: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                 steps: pl.Scalar[pl.INT32]):
    return produce(x, tmp, steps)


@pl.jit
def consume_chip(tmp: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]]):
    return consume(tmp, y)


@pl.jit.host
def dep_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
    tmp = pl.create_tensor([NR, 1, S], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        produce_chip(xs[r], tmp[r], r * 2000, device=r)
    for r in pl.range(pld.world_size()):
        # rank r reads what rank r+1 wrote in this call
        consume_chip(tmp[(r + 1) % pld.world_size()], ys[r], device=r)
    return ys


# ------------------------------------------------------------------ strided views, InOut
@pl.jit.incore
def bump(a: pl.InOut[pl.Tensor[[2, S], pl.FP32]], b: pl.Tensor[[2, S], pl.FP32]
         ) -> pl.Tensor[[2, S], pl.FP32]:
    a = pl.store(pl.add(pl.load(a, [0, 0], [2, S]), pl.load(b, [0, 0], [2, S])), [0, 0], a)
    return a


@pl.jit
def bump_chip(a: pl.InOut[pl.Tensor[[2, S], pl.FP32]], b: pl.Tensor[[2, S], pl.FP32]):
    return bump(a, b)


@pl.jit.host
def strided_main(acc: pl.InOut[pl.Tensor[[2, NR, S], pl.FP32]],
                 bs: pl.Tensor[[2, NR, S], pl.FP32]):
    # acc[0:2, r] is rows 0 and 1 of column block r: a strided view
    for r in pl.range(pld.world_size()):
        bump_chip(acc[0:2, r], bs[0:2, r], device=r)
    return acc


def config(n):
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))))


def check_calls(n: int) -> None:
    rng = np.random.default_rng(5)
    cfg = config(n)
    xs = rng.integers(-9, 9, size=(n, 1, S)).astype(np.float32)

    y = np.full((1, 4 * S), 7.0, np.float32)
    parts_main(xs, y, config=cfg)
    want = np.full((1, 4 * S), 7.0, np.float32)
    for r in range(n):
        want[0, r * S:(r + 1) * S] = xs[r, 0] * 3
    np.testing.assert_array_equal(y, want)

    ys = np.full((n, 1, S), np.nan, np.float32)
    rows_main(xs, ys, config=cfg)
    np.testing.assert_array_equal(ys, xs * 2)

    ys = np.full((n, 1, S), np.nan, np.float32)
    dep_main(xs, ys, config=cfg)
    produced = xs + (np.arange(n, dtype=np.float32) * 2000)[:, None, None]
    np.testing.assert_array_equal(ys, np.roll(produced, -1, axis=0) * 2)

    acc = rng.integers(-9, 9, size=(2, n, S)).astype(np.float32)
    bs = rng.integers(-9, 9, size=(2, n, S)).astype(np.float32)
    want = acc + bs
    strided_main(acc, bs, config=cfg)
    np.testing.assert_array_equal(acc, want)


def check_prepared(n: int) -> None:
    """Pooled argument segments and device tensors of a prepared worker."""
    rng = np.random.default_rng(9)
    xs = rng.integers(-9, 9, size=(n, 1, S)).astype(np.float32)
    ys = np.full((n, 1, S), np.nan, np.float32)
    with rows_main.compile(xs, ys, config=config(n)).prepare() as rt:
        for k in range(3):
            xs = rng.integers(-9, 9, size=(n, 1, S)).astype(np.float32)
            ys[...] = np.nan
            rt(xs, ys)
            np.testing.assert_array_equal(ys, xs * 2)
        # device tensors: a stacked input, and an output each rank writes
        sx = rt.alloc_stacked_tensor(xs)
        sy = rt.alloc_stacked_tensor(np.zeros_like(xs))
        rt(sx, sy)
        back = np.full_like(xs, np.nan)
        rt.copy_stacked_from(sy, back)
        np.testing.assert_array_equal(back, xs * 2)
        # written again: what the ranks wrote back is process 0's bytes now
        rt(sy, sx)
        rt.copy_stacked_from(sx, back)
        np.testing.assert_array_equal(back, xs * 4)
        rt.free_stacked_tensor(sx)
        rt.free_stacked_tensor(sy)
    # a prepared call's intermediates are gone after it: process 0 maps no
    # more segments after the fifth call than after the first
    with dep_main.compile(xs, ys, config=config(n)).prepare() as rt:
        counts = []
        for k in range(5):
            ys[...] = np.nan
            rt(xs + k, ys)
            produced = xs + k + (np.arange(n, dtype=np.float32) * 2000)[:, None, None]
            np.testing.assert_array_equal(ys, np.roll(produced, -1, axis=0) * 2)
            counts.append(mapped_tilecomm_segments())
        if ME == 0:
            assert counts[0] > 0 and counts == [counts[0]] * 5, counts


def mapped_tilecomm_segments() -> int:
    """/dev/shm files of tilecomm this process maps now."""
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if "/dev/shm/tilecomm-" in line)


def main(n: int) -> None:
    check_calls(n)
    check_prepared(n)
    mapped = len([a for a in ATTACHED if a.startswith("tilecomm-")]) + \
        mapped_tilecomm_segments()
    print(f"OK {ME} mapped={mapped}", flush=True)
    # where it ran: this process's host, and how many nodes MPI counts
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    node = world.Split_type(MPI.COMM_TYPE_SHARED)
    nodes = world.allreduce(1 if node.Get_rank() == 0 else 0)
    node.Free()
    print(f"HOST {socket.gethostname()} nodes={nodes}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
