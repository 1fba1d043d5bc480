"""The MPI backend next to the shared-memory one and next to mpi4py itself,
measured in one run and printed as one table.  A benchmark, not a test:
nothing here asserts speed.

    python bench/bench_mpi.py            # ~1-2 min on this 2-core VM
    python bench/bench_mpi.py --quick    # fewer rounds, < 1 min
    python bench/bench_mpi.py --hosts 2  # one process on each of two simulated
                                         # hosts (root; tools/twohosts.py)

It starts ``mpiexec -n 2`` (the one next to this Python) on itself; inside
the job both processes measure

* tilecomm on MPI: notify -> wait ping-pong round trip inside a kernel,
  ``pld.tensor.put`` of 4 KiB / 4 MiB, an in-kernel ``pld.tensor.allreduce``
  of 8 B / 1 MiB / 16 MiB (FP32) -- each (t_N - t_0) / N over calls of a
  prepared worker whose kernel loops N or 0 times, best of interleaved
  repeats (the programs are bench_primitives' and bench_collectives');
* the anchors, raw mpi4py in the same job: the RMA round trip
  (``MPI_Accumulate`` REPLACE + flush into the peer's cell, poll one's own
  with ``MPI_Fetch_and_op`` NO_OP + flush), ``Put`` + ``Flush`` of the same
  sizes, and ``Allreduce`` (in place) of the same sizes.

Then the same tilecomm figures on the shared-memory backend run in a plain
(non-MPI) process.  Targets (DESIGN.md section 4): round trip within 2x of
the raw RMA round trip, 16 MiB allreduce within 1.5x of ``MPI_Allreduce``.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
KiB, MiB = 1024, 1024 * 1024
PUT_SIZES = (4 * KiB, 4 * MiB)
AR_SIZES = (8, 1 * MiB, 16 * MiB)


# ------------------------------------------------------------------ tilecomm figures
def per_iteration(call, n: int, repeats: int) -> float:
    """(t_n - t_0) / n, each the best of ``repeats`` interleaved calls."""
    call(0)
    call(n)
    b0 = bn = float("inf")
    for _ in range(repeats):
        b0 = min(b0, call(0))
        bn = min(bn, call(n))
    return (bn - b0) / n


def timed(worker, *args) -> float:
    t0 = time.perf_counter()
    worker(*args)
    return time.perf_counter() - t0


def tilecomm_figures(quick: bool, hosts: int = 1) -> dict:
    """Per-iteration seconds of each tilecomm figure on the backend this
    process selects (every process of an MPI job runs this alike)."""
    from bench_collectives import allreduce_case, build_allreduce
    from bench_primitives import build_bandwidth, pingpong_main

    from tilecomm.runtime import DistributedConfig, RunConfig

    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    reps = 3 if quick else 5
    out = {}

    outs = np.zeros((2, 1, 1), np.int32)
    n = 2000 if quick else 10000
    with pingpong_main.compile(outs, 0, config=cfg).prepare() as w:
        out["roundtrip"] = per_iteration(lambda k: timed(w, outs, k), n, reps)

    for size in PUT_SIZES:
        rows = size // (1024 * 4)                # rows of one 4 KiB FP32 row each
        put_main, _ = build_bandwidth(rows, 1024)
        x = np.ones((rows, 1024), np.float32)
        k = (200 if size < MiB else 20) if quick else (2000 if size < MiB else 50)
        with put_main.compile(x, 0, config=cfg).prepare() as w:
            out[f"put{size}"] = per_iteration(lambda kk: timed(w, x, kk), k, reps)

    for size in AR_SIZES:
        cols = size // 4
        main = build_allreduce(2, cols)
        (xs, ys), _, expected = allreduce_case(2, cols)
        k = {8: 2000, MiB: 100, 16 * MiB: 10}[size]
        if hosts == 2 and size >= MiB:
            # a call's host tensors cross the link too (tens of ms, noisy):
            # enough iterations that the difference is the allreduce's
            k *= 5
        if quick:
            k = max(5, k // 5)
        with main.compile(xs, ys, 0, config=cfg).prepare() as w:
            out[f"ar{size}"] = per_iteration(lambda kk: timed(w, xs, ys, kk), k, reps)
            w(xs, ys, 3)
            if not np.array_equal(ys, expected(3)):
                raise RuntimeError(f"allreduce of {size} bytes gave a wrong result")
    return out


# ------------------------------------------------------------------ raw MPI anchors
def mpi_anchors(quick: bool, hosts: int = 1) -> dict:
    """On one host the window is shared memory and the round trip's write an
    ``Accumulate`` (REPLACE); across hosts an ordinary window (as the
    backend's there) and the write a ``Put``, each flushed."""
    from tilecomm.backends.mpi.comm import require_mpi
    MPI = require_mpi()
    comm = MPI.COMM_WORLD
    me, peer = comm.Get_rank(), 1 - comm.Get_rank()
    out = {}
    size = max(PUT_SIZES) + 64
    win = MPI.Win.Allocate_shared(size, 1, comm=comm) if hosts == 1 else \
        MPI.Win.Allocate(size, 1, comm=comm)
    win.Lock_all()
    one = np.zeros(1, np.int32)
    got = np.zeros(1, np.int32)

    def own_cell():
        win.Fetch_and_op([one, MPI.INT32_T], [got, MPI.INT32_T], me, 0, MPI.NO_OP)
        win.Flush(me)
        return got[0]

    def write(v):
        if hosts == 1:
            win.Accumulate([v, MPI.INT32_T], peer, [0, 1, MPI.INT32_T], MPI.REPLACE)
        else:
            win.Put([v, MPI.INT32_T], peer, [0, 1, MPI.INT32_T])
        win.Flush(peer)

    # ping-pong on cell 0 of each process, values 1..n
    n = 2000 if quick else 20000
    best = float("inf")
    for _ in range(3):
        win.Accumulate([np.zeros(1, np.int32), MPI.INT32_T], me, [0, 1, MPI.INT32_T],
                       MPI.REPLACE)
        win.Flush(me)
        comm.Barrier()
        t0 = time.perf_counter()
        for i in range(1, n + 1):
            v = np.array([i], np.int32)
            if me == 0:
                write(v)
                while own_cell() != i:
                    pass
            else:
                while own_cell() != i:
                    pass
                write(v)
        best = min(best, (time.perf_counter() - t0) / n)
        comm.Barrier()
    out["roundtrip"] = best

    for size in PUT_SIZES:
        buf = np.ones(size, np.uint8)
        k = (200 if size < MiB else 20) if quick else (2000 if size < MiB else 100)
        best = float("inf")
        for _ in range(3):
            comm.Barrier()
            t0 = time.perf_counter()
            if me == 0:
                for _ in range(k):
                    win.Put([buf, MPI.BYTE], peer, [64, size, MPI.BYTE])
                    win.Flush(peer)
            best = min(best, (time.perf_counter() - t0) / k)
        out[f"put{size}"] = comm.bcast(best, root=0)
    win.Unlock_all()
    win.Free()

    for size in AR_SIZES:
        a = np.ones(size // 4, np.float32)
        k = {8: 20000, MiB: 200, 16 * MiB: 20}[size] // (5 if quick else 1)
        best = float("inf")
        for _ in range(3):
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(k):
                comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)
            best = min(best, (time.perf_counter() - t0) / k)
        out[f"ar{size}"] = comm.bcast(best, root=0)
    return out


# ------------------------------------------------------------------ driver
def fmt(s: float) -> str:
    if s is None:
        return "—"
    return f"{s * 1e6:.2f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def label(key: str) -> str:
    if key == "roundtrip":
        return "notify→wait round trip (2 ranks, in a kernel)"
    size = int(key[3:] if key.startswith("put") else key[2:])
    size_s = f"{size // MiB} MiB" if size >= MiB else (f"{size // KiB} KiB" if size >= KiB
                                                         else f"{size} B")
    return f"put {size_s} (+ flush)" if key.startswith("put") else f"allreduce FP32 {size_s}"


def in_job(args) -> None:
    """Inside ``mpiexec -n 2``: both processes measure; process 0 prints JSON."""
    from tilecomm.backends.mpi.comm import require_mpi
    MPI = require_mpi()
    anchors = mpi_anchors(args.quick, args.hosts)
    figures = tilecomm_figures(args.quick, args.hosts)
    where = MPI.COMM_WORLD.gather(MPI.Get_processor_name())
    if MPI.COMM_WORLD.Get_rank() == 0:
        print("JSON " + json.dumps({"mpi": figures, "raw": anchors, "where": where,
                                    "library": MPI.Get_library_version().splitlines()[0]}))


def job_on_two_hosts(argv: list, env: dict):
    """``mpiexec -n 2`` with one process on each of two simulated hosts of
    this machine (tools/twohosts.py: needs root), removed afterwards."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
    import twohosts
    hosts = twohosts.Hosts(f"bench{os.getpid()}")
    # a time-out's SIGTERM still takes the hosts down (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        hosts.up(tied=True)
    except twohosts.Unavailable as e:
        sys.exit(f"--hosts 2: {e}")
    try:
        return subprocess.run(hosts.mpiexec(MPIEXEC, 2, 1, argv), capture_output=True,
                              text=True, env=env)
    finally:
        hosts.down()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--hosts", type=int, choices=(1, 2), default=1,
                    help="2: one process on each of two simulated hosts (tools/twohosts.py, "
                         "root), talking TCP over a veth pair; no shared-memory column")
    ap.add_argument("--in-job", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--shm-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.in_job:
        return in_job(args)
    if args.shm_only:
        print("JSON " + json.dumps(tilecomm_figures(args.quick)))
        return
    quick = ["--quick"] if args.quick else []
    env = {k: v for k, v in os.environ.items() if k != "TILECOMM_TRANSPORT"}
    inner = [sys.executable, os.path.abspath(__file__), "--in-job", "--hosts", str(args.hosts),
             *quick]
    job = subprocess.run([MPIEXEC, "-n", "2", *inner], capture_output=True, text=True,
                         env=env) if args.hosts == 1 else job_on_two_hosts(inner, env)
    if job.returncode != 0:
        sys.exit(f"the MPI job failed:\n{job.stdout}\n{job.stderr}")
    res = json.loads(next(l for l in job.stdout.splitlines() if l.startswith("JSON "))[5:])
    if args.hosts == 1:
        shm = subprocess.run([sys.executable, __file__, "--shm-only", *quick],
                             capture_output=True, text=True,
                             env=dict(env, TILECOMM_TRANSPORT="shm"))
        if shm.returncode != 0:
            sys.exit(f"the shared-memory run failed:\n{shm.stdout}\n{shm.stderr}")
        res["shm"] = json.loads(next(l for l in shm.stdout.splitlines()
                                     if l.startswith("JSON "))[5:])
    else:
        res["shm"] = {}
    print(f"MPI library: {res['library']}; {os.cpu_count()} cores; processes on "
          f"{', '.join(res['where'])}\n")
    raw_rt = "Accumulate" if args.hosts == 1 else "Put"
    print(f"| figure | tilecomm on MPI | mpi4py raw (same job; round trip: {raw_rt} + flush) "
          f"| MPI / raw | tilecomm on shm | target |")
    print("|---|---|---|---|---|---|")
    targets = {"roundtrip": 2.0, f"ar{16 * MiB}": 1.5}
    if args.hosts == 2:                    # across hosts: both large sizes
        targets[f"ar{MiB}"] = 1.5
    for key in ["roundtrip"] + [f"put{s}" for s in PUT_SIZES] + [f"ar{s}" for s in AR_SIZES]:
        m, r, s = res["mpi"][key], res["raw"][key], res["shm"].get(key)
        ratio = m / r if r > 0 else float("inf")
        t = targets.get(key)
        verdict = "—" if t is None else (f"≤ {t:g}× raw: {'pass' if ratio <= t else 'miss'}")
        if m <= 0:            # (t_N - t_0) / N lost in the calls' own noise
            ratio, verdict = float("nan"), "unmeasured (noise): run again"
        print(f"| {label(key)} | {fmt(m)} | {fmt(r)} | {ratio:.2f}× | {fmt(s)} | {verdict} |")


if __name__ == "__main__":
    main()
