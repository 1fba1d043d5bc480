"""A BF16 program's ranks find ml_dtypes already imported: the controller
imports it once before forking instead of every rank importing it (about a
second each) after the fork.  Importing tilecomm itself does not import it.
Runs in a fresh interpreter: this one has imported ml_dtypes long ago."""
import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

SCRIPT = r"""
import json, os, sys
import numpy as np
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig
after_import = "ml_dtypes" in sys.modules
NR = pl.dynamic("NR")

@pl.jit.incore
def round_kernel(x: pl.Tensor[[1, 8], pl.FP32], y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
    y = pl.store(pl.cast(pl.cast(pl.load(x, [0, 0], [1, 8]), pl.BF16), pl.FP32), [0, 0], y)
    return y

@pl.jit
def round_chip(x: pl.Tensor[[1, 8], pl.FP32], y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
    return round_kernel(x, y)

@pl.jit.host
def round_main(xs: pl.Tensor[[NR, 1, 8], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, 8], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        round_chip(xs[r], ys[r], device=r)
    return ys

n = int(sys.argv[1])
at_fork = []                 # whether ml_dtypes was imported when each rank was forked
os.register_at_fork(before=lambda: at_fork.append("ml_dtypes" in sys.modules))
xs = np.array(json.loads(sys.argv[2]), np.float32)
ys = np.zeros_like(xs)
round_main(xs, ys, config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n)))))
print(json.dumps(dict(after_import=after_import, at_fork=at_fork, ys=ys.tolist())))
"""


@pytest.mark.parametrize("n", [1, 3])
def test_bf16_element_type_is_imported_before_the_ranks_are_forked(n, tmp_path):
    # FP32 in and out, BF16 only inside the kernel: nothing but the fork path
    # gives the controller a reason to import ml_dtypes
    xs = np.random.default_rng(n).uniform(-4, 4, size=(n, 1, 8)).astype(np.float32)
    script = tmp_path / "bf16_program.py"          # programs are read from their file
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(n), json.dumps(xs.tolist())],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["after_import"] is False, "importing tilecomm imported ml_dtypes"
    assert out["at_fork"] == [True] * n
    np.testing.assert_array_equal(np.array(out["ys"], np.float32),
                                  xs.astype(ml_dtypes.bfloat16).astype(np.float32))
