"""Run artefacts when the ranks' processes share no memory with process 0
(run under ``TILECOMM_MPI_DIRECT=0`` or ``MPIR_CVAR_NOLOCAL=1``): ranks of
processes r > 0 write to a private directory and send their files to
process 0, which writes them under its output directory and merges the
trace -- also for a failed call.  argv: world size, a directory of process
0's (process 0 checks the files; every process checks it wrote nothing of
its own there and left no private directory behind).

Prints ``OK <process> roots=<private directories used>`` per process."""
import json
import os
import re
import sys

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import RankFailure
from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.runtime.rank import artefacts
from tilecomm.runtime.rank.tracing import pid_of

NR = pl.dynamic("NR")
N = 8
ME = int(os.environ.get("PMI_RANK", "0"))
SIG = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]

# the directory each RankArtefacts of this process writes to
ROOTS: list = []
_init = artefacts.RankArtefacts.__init__


def _recording_init(self, *a, **k):
    _init(self, *a, **k)
    ROOTS.append(self.s.root)


artefacts.RankArtefacts.__init__ = _recording_init


@pl.jit.incore
def reduce_rows(x: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                data: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]],
                asig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]
                ) -> pl.Tensor[[1, N], pl.FP32]:
    data = pl.store(pl.load(x, [0, 0], [1, N]), [0, 0], data)
    data = pld.tensor.allreduce(data, asig, op=pld.ReduceOp.Sum)
    return pl.store(pl.load(data, [0, 0], [1, N]), [0, 0], y)


@pl.jit
def reduce_chip(x: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                data: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]],
                asig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return reduce_rows(x, y, data, asig)


@pl.jit.host
def reduce_main(xs: pl.Tensor[[NR, 1, N], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, N], pl.FP32]]):
    dbuf = pld.alloc_window_buffer([1, N], dtype=pl.FP32)
    abuf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        reduce_chip(xs[r], ys[r], pld.window(dbuf, [1, N], dtype=pl.FP32),
                    pld.window(abuf, [pld.world_size(), 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.incore
def last_rank_faults(count: pl.Out[pl.Tensor[[1, 1], pl.INT32]], sig: SIG
                     ) -> pl.Tensor[[1, 1], pl.INT32]:
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    if me == n - 1:
        pld.system.notify(sig, n + 5, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)   # no such peer
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Ge)
    pl.write(count, [0, 0], pl.read(sig, [0, 0]))
    return count


@pl.jit
def faulty_chip(count: pl.Out[pl.Tensor[[1, 1], pl.INT32]], sig: SIG):
    return last_rank_faults(count, sig)


@pl.jit.host
def faulty_main(counts: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        faulty_chip(counts[r], pld.window(sbuf, [1, 1], dtype=pl.INT32), device=r)
    return counts


def config(n, cache, **dfx):
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))),
                     cache_dir=cache, **dfx)


def files_of(root) -> set:
    out = set()
    for dp, _, fs in os.walk(root):
        for f in fs:
            # a dispatch's part of the merged trace is named for the time it was written
            out.add(re.sub(r"merged_swimlane_\d{8}_\d{6}\.json$", "merged_swimlane_<time>.json",
                           os.path.relpath(os.path.join(dp, f), root)))
    return out


def traced_call(n: int, top: str) -> None:
    xs = np.random.default_rng(3).integers(-8, 9, (n, 1, N)).astype(np.float32)
    ys = np.zeros_like(xs)
    cache = os.path.join(top, "traced")
    cp = reduce_main.compile(xs, ys, config=config(n, cache))
    cp(xs, ys, config=config(n, cache, enable_chip_swimlane=2, enable_dump_args=2))
    np.testing.assert_array_equal(ys, np.broadcast_to(xs.sum(axis=0), xs.shape))
    if ME != 0:
        return
    root = os.path.join(cp.output_dir, "dfx_outputs")
    want = {"merged_swimlane.json"}
    for r in range(n):
        want |= {f"rank{r}/d0/{f}" for f in ("deps.json", "chip_swimlane_records.json",
                                             "merged_swimlane_<time>.json",
                                             "args_dump/args.json")}
        want |= {f"rank{r}/d0/args_dump/{w}/{i:02d}_{name}.npy" for w in ("before", "after")
                 for i, name in enumerate(["x", "y", "data", "asig"])}
    assert files_of(root) == want, sorted(files_of(root) ^ want)
    for r in range(n):
        # every rank's dumps hold its own input and the reduced result
        d = os.path.join(root, f"rank{r}", "d0", "args_dump")
        np.testing.assert_array_equal(np.load(os.path.join(d, "before", "00_x.npy")), xs[r])
        np.testing.assert_array_equal(np.load(os.path.join(d, "after", "01_y.npy")),
                                      xs.sum(axis=0))
    merged = json.load(open(os.path.join(root, "merged_swimlane.json")))
    disp = [e for e in merged["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "dispatch"]
    assert sorted(e["pid"] for e in disp) == [pid_of(r) for r in range(n)], disp


def failed_call(n: int, top: str) -> None:
    counts = np.zeros((n, 1, 1), np.int32)
    cache = os.path.join(top, "failed")
    cp = faulty_main.compile(counts, config=config(n, cache))
    try:
        cp(counts, config=config(n, cache, enable_chip_swimlane=2))
    except RankFailure as e:
        assert e.rank == n - 1, e
    else:
        raise AssertionError("the faulty call returned")
    if ME != 0:
        return
    merged = json.load(open(cp.trace_path))
    disp = {e["pid"]: e for e in merged["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") == "dispatch"}
    # every rank that began its dispatch is in the trace; the failed one unfinished
    assert disp[pid_of(n - 1)]["args"]["finished"] is False, disp
    named = {e["pid"] for e in merged["traceEvents"] if e.get("name") == "process_name"}
    assert named == {pid_of(r) for r in range(n)}, named


def main(n: int, top: str) -> None:
    traced_call(n, top)
    failed_call(n, top)
    out = os.path.realpath(top)
    for root in ROOTS:
        if ME != 0:
            # a private directory, not process 0's, and gone after the call
            assert not os.path.realpath(root).startswith(out), root
            assert not os.path.exists(root), root
    print(f"OK {ME} roots={sum(1 for r in ROOTS if not r.startswith(out))}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
