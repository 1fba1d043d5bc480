"""Traces are easy to get: ``tilecomm run --trace DIR`` traces every call of
a script into DIR, and a traced one-shot call says where its trace went."""
import json
import os
import subprocess
import sys

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

ROW = pl.Tensor[[1, 4], pl.FP32]


@pl.jit.incore
def copy_row(x: ROW, y: pl.Out[ROW]):
    y = pl.store(pl.load(x, [0, 0], [1, 4]), [0, 0], y)
    return y


@pl.jit
def chip(x: ROW, y: pl.Out[ROW]):
    return copy_row(x, y)


@pl.jit.host
def main(xs: pl.Tensor[[2, 1, 4], pl.FP32], ys: pl.Out[pl.Tensor[[2, 1, 4], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], device=r)
    return ys


def config(**kw):
    return RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]), **kw)


def test_a_traced_call_says_where_its_trace_went(capfd, monkeypatch):
    monkeypatch.delenv("TILECOMM_TRACE", raising=False)
    xs, ys = np.ones((2, 1, 4), np.float32), np.zeros((2, 1, 4), np.float32)
    main(xs, ys, config=config())
    assert "trace" not in capfd.readouterr().err          # untraced: nothing said
    main(xs, ys, config=config(enable_chip_swimlane=2))
    path = main.compile(config=config(enable_chip_swimlane=2)).trace_path
    err = capfd.readouterr().err
    assert f"tilecomm: trace of this call of main written to {path} " \
           f"(tilecomm trace {path} summarises it)" in err
    assert os.path.isfile(path)


SCRIPT = f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import numpy as np
import test_trace_where as T
xs = np.ones((2, 1, 4), np.float32)
ys = np.zeros_like(xs)
T.main(xs, ys, config=T.config())
T.main(xs, ys, config=T.config())
print("OK", ys.sum())
"""


def test_run_trace_dir_traces_every_call_of_a_script(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TILECOMM_TRACE"}
    quiet = subprocess.run([sys.executable, "-m", "tilecomm", "run", str(script)],
                           capture_output=True, text=True, env=env, timeout=120)
    assert quiet.returncode == 0 and "trace" not in quiet.stderr     # no --trace: no trace
    out = tmp_path / "traces"
    p = subprocess.run([sys.executable, "-m", "tilecomm", "run", "--trace", str(out),
                        str(script)], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "OK 8.0"
    files = sorted(os.listdir(out))
    assert len(files) == 2 and files[0].startswith("test_trace_where.main-2r-cpu-")
    assert [f.rsplit("-", 1)[1] for f in files] == ["1.json", "2.json"]
    for f in files:
        assert f"written to {out / f} (tilecomm trace {out / f} summarises it)" in p.stderr
        with open(out / f) as fh:
            trace = json.load(fh)
        ranks = {ev["args"]["name"] for ev in trace["traceEvents"]
                 if ev.get("name") == "process_name"}
        assert {"rank 0", "rank 1"} <= ranks
