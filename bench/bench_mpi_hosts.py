"""A prepared call's host tensors on the MPI backend: a 2-rank call reading
a 1 MiB host tensor and writing another (each rank half of each), with the
processes sharing process 0's memory (segments mapped by name) and without
(``TILECOMM_MPI_DIRECT=0``: fetched and written back over RMA, as between
nodes), the latter also with MPICH's shared-memory queue cells enlarged.
A benchmark, not a test: nothing here asserts speed.

    python bench/bench_mpi_hosts.py            # ~30 s
    python bench/bench_mpi_hosts.py --quick    # fewer calls
    python bench/bench_mpi_hosts.py --quick --rows 1   # 8 KiB tensors

It starts ``mpiexec -n 2`` on itself once per mode and prints the median
and best time of one call, measured on process 0 (every process makes each
call: a call is one step of the whole job).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

C = 1024                         # a row: 1024 FP32 = 4 KiB; 128 rows = 512 KiB per rank


def _program(R: int):
    import tilecomm.language as pl
    import tilecomm.language.distributed as pld

    NR = pl.dynamic("NR")

    @pl.jit.incore
    def double(x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]
               ) -> pl.Tensor[[R, C], pl.FP32]:
        y = pl.store(pl.mul(pl.load(x, [0, 0], [R, C]), 2.0), [0, 0], y)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
        return double(x, y)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, R, C], pl.FP32], ys: pl.Out[pl.Tensor[[NR, R, C], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], device=r)
        return ys

    return main


def in_job(calls: int, R: int) -> None:
    from tilecomm.runtime import DistributedConfig, RunConfig
    main = _program(R)
    xs = np.random.default_rng(0).standard_normal((2, R, C)).astype(np.float32)
    ys = np.zeros_like(xs)
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    times = []
    with main.compile(xs, ys, config=cfg).prepare() as rt:
        for _ in range(5):
            rt(xs, ys)
        for _ in range(calls):
            t0 = time.perf_counter()
            rt(xs, ys)
            times.append(time.perf_counter() - t0)
    np.testing.assert_array_equal(ys, xs * 2)
    if int(os.environ.get("PMI_RANK", "0")) == 0:
        print("JSON " + json.dumps({"median": float(np.median(times)), "best": min(times)}),
              flush=True)


# MPICH moves RMA to a dynamic window on one node in steps of one queue cell
# (16 KiB by default); larger cells take far fewer steps
BIG_CELLS = {"MPIR_CVAR_CH4_PACK_BUFFER_SIZE": "262144",
             "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE": "262144"}
MODES = (("shared memory (segments mapped)", {}),
         ("TILECOMM_MPI_DIRECT=0 (RMA)", {"TILECOMM_MPI_DIRECT": "0"}),
         ("DIRECT=0, 256 KiB MPICH cells", {"TILECOMM_MPI_DIRECT": "0", **BIG_CELLS}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--in-job", action="store_true")
    ap.add_argument("--rows", type=int, default=128,
                    help="rows of 4 KiB per rank (128: a 1 MiB tensor in and out)")
    args = ap.parse_args()
    calls = 50 if args.quick else 300
    if args.in_job:
        in_job(calls, args.rows)
        return
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    rows = []
    for label, env in MODES:
        e = dict(os.environ, **env)
        e.pop("TILECOMM_TRANSPORT", None)
        out = subprocess.run([mpiexec, "-n", "2", sys.executable, __file__, "--in-job",
                              "--rows", str(args.rows)] +
                             (["--quick"] if args.quick else []), env=e, capture_output=True,
                             text=True, timeout=600)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("JSON ")]
        if out.returncode != 0 or not line:
            sys.exit(f"{label}: the job failed\n{out.stdout}\n{out.stderr}")
        got = json.loads(line[0][5:])
        rows.append((label, got["median"], got["best"]))
    kib = 2 * args.rows * 4
    print(f"prepared 2-rank call, {kib} KiB host tensor in + {kib} KiB out, {calls} calls")
    print(f"{'host tensors':36s} {'median':>10s} {'best':>10s}")
    for label, med, best in rows:
        print(f"{label:36s} {med * 1e3:8.2f} ms {best * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
