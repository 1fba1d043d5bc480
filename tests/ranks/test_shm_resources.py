"""Running out of shared memory, memory or descriptors is a typed error with a
hint: a window larger than /dev/shm's free space is refused before the run,
a rank killed by SIGBUS is reported with the likely cause, and running out of
descriptors anywhere in a call is a RuntimeFault (TC506), never a raw OSError.
These run on both transports: the copy transport keeps its windows in /dev/shm
segments too (its service maps them), and it opens descriptors of its own."""
import json
import os
import resource
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import failure_programs as F
import tilecomm.language as pl
import tilecomm.language.distributed as pld
import tilecomm.runtime.controller.forking as forking_mod
from tilecomm.errors import RankFailure, RuntimeFault
from conftest import config_for, signal_a_rank_during

FILE = os.path.abspath(__file__)
HERE = os.path.dirname(FILE)
PAGE = resource.getpagesize()


def make_big_window(rows: int, cols: int):
    """A program whose window buffer has ``rows x cols`` FP32 elements on each rank."""

    @pl.jit.incore
    def touch(y: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
              w: pl.InOut[pld.DistributedTensor[[1, 4], pl.FP32]]) -> pl.Tensor[[1, 4], pl.FP32]:
        y = pl.store(pl.load(w, [0, 0], [1, 4]), [0, 0], y)
        return y

    @pl.jit
    def chip(y: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
             w: pl.InOut[pld.DistributedTensor[[1, 4], pl.FP32]]):
        return touch(y, w)

    @pl.jit.host
    def main(ys: pl.Out[pl.Tensor[[2, 1, 4], pl.FP32]]):
        big = pld.alloc_window_buffer([rows, cols], dtype=pl.FP32)  # R:big
        for r in pl.range(pld.world_size()):
            chip(ys[r], pld.window(big, [1, 4], dtype=pl.FP32), device=r)
        return ys

    return main


def marker_line(tag):
    with open(FILE) as f:
        hits = [i + 1 for i, text in enumerate(f) if text.rstrip().endswith(f"# R:{tag}")]
    assert len(hits) == 1
    return hits[0]


@pytest.fixture
def no_ranks(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("rank processes were started for a call that cannot fit")
    monkeypatch.setattr(forking_mod, "spawn", refuse)


def test_windows_larger_than_the_free_shared_memory_are_refused_before_the_run(no_ranks):
    st = os.statvfs("/dev/shm")
    free = st.f_bavail * st.f_frsize
    cols = 1024
    rows = free // (4 * cols) // 2 + 1024          # two ranks: together more than all of it
    main = make_big_window(rows, cols)
    ys = np.zeros((2, 1, 4), np.float32)
    with pytest.raises(RuntimeFault) as ei:
        main(ys, config=config_for(2))
    e = ei.value
    per_rank = rows * cols * 4
    need = 2 * (-(-per_rank // PAGE) * PAGE) + PAGE    # two window segments + the argument
    text = str(e)
    assert e.code == "TC505"
    assert f"needs {need} bytes" in text and "free" in text
    assert f"'big' 2 x {per_rank} bytes" in text
    assert os.path.abspath(e.span.file) == FILE and e.span.line == marker_line("big")
    assert "hint:" in text and "--shm-size" in text


def test_windows_that_fit_still_run():
    main = make_big_window(64, 1024)
    ys = np.full((2, 1, 4), np.nan, np.float32)
    main(ys, config=config_for(2))
    np.testing.assert_array_equal(ys, 0.0)           # fresh windows read as zeros


def test_a_rank_killed_by_sigbus_is_reported_with_a_hint():
    n = 2
    cfg = F.config(n, deadlock_timeout_s=60)
    F.block_main.compile(F.outputs(n), config=cfg)
    before = set(os.listdir(f"/proc/{os.getpid()}/task"))
    core = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, core[1]))   # no core file from the victim
    try:
        # what touching an unbacked page does
        err = signal_a_rank_during(lambda: F.block_main(F.outputs(n), config=cfg), n,
                                   signal.SIGBUS, pick=max)
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, core)
    assert isinstance(err, RankFailure), err
    text = str(err)
    assert "SIGBUS" in text and "hint:" in text and "/dev/shm" in text and "free now" in text
    # no thread of the call outlives it (native ones included: /proc, not
    # threading); a thread that existed before may end meanwhile, and one
    # still winding down under load gets a moment
    deadline = time.monotonic() + 2.0
    while set(os.listdir(f"/proc/{os.getpid()}/task")) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(os.listdir(f"/proc/{os.getpid()}/task")) - before == set()


# Lowers the descriptor limit step by step and runs a call at each step, so
# that every place a call opens a descriptor (segments, their mappings, pipes,
# ranks attaching segments) is where it runs out at some step.
SWEEP = r"""
import json, os, resource, sys
import failure_programs as F
from tilecomm.errors import RankFailure, RuntimeFault
n = int(sys.argv[1])
F.ring_main(F.outputs(n), 1, config=F.config(n))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
seen = {}
for lim in range(3, 48):
    resource.setrlimit(resource.RLIMIT_NOFILE, (lim, hard))
    try:
        F.ring_main(F.outputs(n), 1, config=F.config(n))
        kind = "ok"
    except RuntimeFault as e:
        kind = e.code if "hint:" in str(e) else "no hint"
    except RankFailure as e:
        kind = e.error_code or "untyped rank failure"
    except BaseException as e:
        kind = f"raw {type(e).__name__}: {e}"
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    seen[kind] = seen.get(kind, 0) + 1
    left = [s for s in os.listdir("/dev/shm") if s.startswith(f"tilecomm-{os.getpid()}-")]
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
        kids = f.read().split()
    if left or kids:
        seen[f"leak at {lim}"] = 1
print(json.dumps(seen))
"""


@pytest.mark.parametrize("n", [2, 3])
def test_running_out_of_descriptors_anywhere_in_a_call_is_a_typed_error(n):
    proc = subprocess.run([sys.executable, "-c", SWEEP, str(n)], cwd=HERE, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": HERE})
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(seen) == {"ok", "TC506"}, seen
    assert seen["TC506"] >= 3                          # the limit did bite, in several places
