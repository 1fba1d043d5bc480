"""The race check under ``mpiexec -n N`` (test_mpi_races.py), one mode per
command-line argument:

  race   a notify that comes before its data: every process catches the
         DataRaceError (the same races) and holds the call's outputs,
         written back on process 0; prints "RACED <rank> <lines>"
  clean  the fixed program: no error, the data received; prints "CLEAN <rank>"
  nodes  the control block reached over RMA (TILECOMM_MPI_DIRECT=0, as
         across nodes): every process gets the ConfigError before any rank
         runs; prints "REFUSED <rank>"
"""
import inspect
import sys

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import ConfigError, DataRaceError
from tilecomm.runtime import DistributedConfig, RunConfig

NR = pl.dynamic("NR")
S = 8
W = pld.DistributedTensor[[1, S], pl.FP32]
SIG = pld.DistributedTensor[[1, 1], pl.INT32]


@pl.jit.incore
def ring(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
         got: pl.Out[pl.Tensor[[1, S], pl.FP32]], win: pl.InOut[W], sig: pl.InOut[SIG],
         early: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, S], pl.FP32]:
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    t = pl.load(x, [0, 0], [1, S])
    if early == 1:
        pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
        pld.tile.remote_store(t, win, nxt, [0, 0])  # store
    else:
        pld.tile.remote_store(t, win, nxt, [0, 0])
        pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Ge)
    got = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], got)  # load
    y = pl.store(pl.mul(t, 2.0), [0, 0], y)
    return y


@pl.jit
def ring_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
              got: pl.Out[pl.Tensor[[1, S], pl.FP32]], win: pl.InOut[W], sig: pl.InOut[SIG],
              early: pl.Scalar[pl.INT32]):
    return ring(x, y, got, win, sig, early)


@pl.jit.host
def ring_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]],
              gots: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]], early: pl.Scalar[pl.INT32]):
    wb = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sb = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ring_chip(xs[r], ys[r], gots[r], pld.window(wb, [1, S], dtype=pl.FP32),
                  pld.window(sb, [1, 1], dtype=pl.INT32), early, device=r)
    return ys


def line_of(marker):
    lines, first = inspect.getsourcelines(ring.fn)
    return next(first + i for i, t in enumerate(lines) if t.rstrip().endswith(f"# {marker}"))


mode, n = sys.argv[1], int(sys.argv[2])
from mpi4py import MPI  # noqa: E402  (after tilecomm: the backend initialises MPI)
me = MPI.COMM_WORLD.Get_rank()
cfg = RunConfig(distributed_config=DistributedConfig(list(range(n))), detect_races=True)
xs = np.arange(n * S, dtype=np.float32).reshape(n, 1, S) + 1
ys, gots = np.zeros_like(xs), np.zeros_like(xs)
if mode == "race":
    try:
        ring_main(xs, ys, gots, 1, config=cfg)
        raise SystemExit("no race reported")
    except DataRaceError as e:
        np.testing.assert_array_equal(ys, 2 * xs)          # written back, on every process
        lines = sorted({(a.rank, int(a.line.rsplit(":", 1)[1])) for r in e.races
                        for a in (r.first, r.second)})
        want = sorted({(r, line_of(m)) for r in range(n) for m in ("store", "load")})
        assert lines == want, (lines, want)
        assert e.code == "TC601" and e.omitted == 0
        print("RACED", me, len(e.races), flush=True)
elif mode == "clean":
    ring_main(xs, ys, gots, 0, config=cfg)
    np.testing.assert_array_equal(gots, np.roll(xs, 1, axis=0))
    print("CLEAN", me, flush=True)
else:
    try:
        ring_main(xs, ys, gots, 0, config=cfg)
    except ConfigError as e:
        assert "every rank on one machine" in str(e) and e.code == "TC402", str(e)
        assert not ys.any()
        print("REFUSED", me, flush=True)
