"""The cost of the MPI backend's RMA control plane (the layout of a job
across nodes) next to the node-shared one, in one ``mpiexec -n 2`` job with
``TILECOMM_MPI_DIRECT=0`` (window pool an ordinary MPI window in both, so
only the control plane differs).  A benchmark, not a test: nothing here
asserts speed.

    python bench/bench_mpi_control.py --quick    # < 1 min on this 2-core VM
    python bench/bench_mpi_control.py            # more rounds

Figures, each measured with both control planes in alternating rounds:

* notify -> wait round trip inside a kernel (bench/kernels.py's ping-pong:
  (t_N - t_0) / N over calls of a prepared worker); a blocked wait publishes
  its record and polls the abort flag through the control plane;
* a small call of a prepared 2-rank worker (the same program, 0 iterations):
  median wall time per call, which includes resetting the plane, every
  rank's state changes, its progress and the monitor's polling.

The node-shared plane is forced, for the comparison only, by giving
``spmd.MpiBackend`` a job and plane factory that build it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _force_plane(kind: str) -> None:
    """Make ``spmd.MpiBackend`` build the ``kind`` control plane ("rma" is
    what DIRECT=0 selects; "shared" is the node-shared one)."""
    from tilecomm.backends.mpi import control as mpi_control
    from tilecomm.backends.mpi import spmd as mpi_spmd
    if kind == "rma":
        mpi_spmd.MpiJob = _ORIGINAL["job"]
        mpi_spmd.RmaControlPlane = mpi_control.RmaControlPlane
        return

    class SharedJob(_ORIGINAL["job"]):
        def __init__(self, MPI, world, shared):
            super().__init__(MPI, world, True)

    mpi_spmd.MpiJob = SharedJob
    mpi_spmd.RmaControlPlane = lambda comm, world, job: mpi_spmd.MpiControlPlane(
        mpi_spmd._Block(job.memory), world, job)


_ORIGINAL: dict = {}


def measure(kind: str, quick: bool) -> dict:
    from bench_primitives import pingpong_main

    from tilecomm.runtime import DistributedConfig, RunConfig

    _force_plane(kind)
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    outs = np.zeros((2, 1, 1), np.int32)
    n = 500 if quick else 3000
    calls = 40 if quick else 200
    with pingpong_main.compile(outs, 0, config=cfg).prepare() as w:
        plane = type(w._ranks.control).__name__ if w._ranks is not None else "?"

        def timed(k):
            t0 = time.perf_counter()
            w(outs, k)
            return time.perf_counter() - t0

        timed(0)
        timed(n)
        b0 = min(timed(0) for _ in range(3))
        bn = min(timed(n) for _ in range(3))
        if not (outs == n).all():
            raise RuntimeError(f"ping-pong of {n} rounds left {outs.ravel().tolist()}")
        per_call = statistics.median(timed(0) for _ in range(calls))
        plane = type(w._ranks.control).__name__
    return {"plane": plane, "roundtrip": (bn - b0) / n, "call": per_call}


def in_job(quick: bool) -> None:
    from tilecomm.backends.mpi import spmd as mpi_spmd
    from tilecomm.backends.mpi.comm import require_mpi
    MPI = require_mpi()
    _ORIGINAL["job"] = mpi_spmd.MpiJob
    rounds = 2 if quick else 4
    res = {"shared": [], "rma": []}
    for _ in range(rounds):
        for kind in ("shared", "rma"):
            res[kind].append(measure(kind, quick))
    if MPI.COMM_WORLD.Get_rank() == 0:
        print("JSON " + json.dumps(res))


def fmt(s: float) -> str:
    us = s * 1e6
    return f"{us:.1f} µs" if us < 1000 else f"{us / 1000:.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--in-job", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.in_job:
        return in_job(args.quick)
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    env = {k: v for k, v in os.environ.items() if k != "TILECOMM_TRANSPORT"}
    env["TILECOMM_MPI_DIRECT"] = "0"
    quick = ["--quick"] if args.quick else []
    job = subprocess.run([mpiexec, "-n", "2", sys.executable, __file__, "--in-job", *quick],
                         capture_output=True, text=True, env=env)
    if job.returncode != 0:
        sys.exit(f"the MPI job failed:\n{job.stdout}\n{job.stderr}")
    res = json.loads(next(l for l in job.stdout.splitlines() if l.startswith("JSON "))[5:])
    print(f"mpiexec -n 2, TILECOMM_MPI_DIRECT=0; {os.cpu_count()} cores; best round of "
          f"{len(res['rma'])}\n")
    print("| figure | node-shared control plane | RMA control plane | RMA / shared |")
    print("|---|---|---|---|")
    for key, label in (("roundtrip", "notify→wait round trip, in a kernel"),
                       ("call", "prepared 2-rank call (median)")):
        s = min(r[key] for r in res["shared"])
        m = min(r[key] for r in res["rma"])
        print(f"| {label} | {fmt(s)} | {fmt(m)} | {m / s:.2f}× |")
    planes = {k: {r["plane"] for r in v} for k, v in res.items()}
    print(f"\nplanes measured: {planes}")


if __name__ == "__main__":
    main()
