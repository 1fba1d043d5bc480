"""Builds kept under output_dir and reloaded in another process without the
program's source: CompiledProgram.from_dir / execute_distributed_compiled."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilecomm

from tilecomm.compiler import CompiledProgram
from tilecomm.runtime import DistributedConfig
from tilecomm.runtime.worker.builds import execute_distributed_compiled
from conftest import config_for
from worker_programs import add_main

PROGRAM = textwrap.dedent('''
    import sys
    import numpy as np
    import tilecomm
    import tilecomm.language as pl
    import tilecomm.language.distributed as pld
    from tilecomm.runtime import DistributedConfig

    NR = pl.dynamic("NR")

    @pl.jit.incore
    def k(x: pl.Tensor[[1, 4], pl.FP32], y: pl.Out[pl.Tensor[[1, 4], pl.FP32]]):
        t = pl.load(x, [0, 0], [1, 4])
        y = pl.store(pl.mul(t, 3.0), [0, 0], y)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[1, 4], pl.FP32], y: pl.Out[pl.Tensor[[1, 4], pl.FP32]]):
        return k(x, y)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, 4], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, 4], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], device=r)
        return ys

    n, out = int(sys.argv[1]), sys.argv[2]
    xs = np.ones((n, 1, 4), np.float32)
    c = tilecomm.ir.compile(main, out, distributed_config=DistributedConfig(list(range(n))))
    c(xs, np.zeros_like(xs))
    print("BUILT", c.output_dir)
''')

RELOAD = textwrap.dedent('''
    import sys
    import numpy as np
    from tilecomm.compiler import CompiledProgram
    n, out = int(sys.argv[1]), sys.argv[2]
    program = CompiledProgram.from_dir(out)
    xs = np.arange(n * 4, dtype=np.float32).reshape(n, 1, 4)
    ys = np.zeros_like(xs)
    program(xs, ys)
    np.testing.assert_array_equal(ys, 3 * xs)
    with program.prepare(persistent=True) as rt:
        rt(xs + 1, ys)
    np.testing.assert_array_equal(ys, 3 * (xs + 1))
    print("OK")
''')


def _run(code, *argv, cwd):
    path = os.path.join(cwd, "script.py")
    with open(path, "w") as f:
        f.write(code)
    proc = subprocess.run([sys.executable, path, *map(str, argv)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)
    os.unlink(path)                          # the source is gone before the next step
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize("n", [1, 3])
def test_a_build_reloads_in_a_new_process_without_its_source(tmp_path, n):
    out = tmp_path / "build"
    assert "BUILT" in _run(PROGRAM, n, out, cwd=tmp_path)
    assert (out / "distributed_meta.json").exists()
    assert _run(RELOAD, n, out, cwd=tmp_path).strip().endswith("OK")


def test_reload_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tilecomm build"):
        CompiledProgram.from_dir(str(tmp_path))
    n = 2
    xs, ws, ys = (np.full((n, 1, 8), v, np.float32) for v in (1, 2, 0))
    built = tilecomm.ir.compile(add_main, str(tmp_path / "add"),
                                distributed_config=config_for(n).distributed_config)
    built.specialise((xs, ws, ys))
    with pytest.raises(ValueError, match="is for 2 rank") as ei:
        CompiledProgram.from_dir(built.output_dir, distributed_config=DistributedConfig([0]))
    assert ei.value.code == "TC401"
    with pytest.raises(ValueError, match="platform"):
        CompiledProgram.from_dir(built.output_dir, platform="a5")
    loaded = CompiledProgram.from_dir(built.output_dir)
    with pytest.raises(TypeError, match=r"not compiled for arguments .*float32.*\[2, 1, 16\]"):
        wide = np.zeros((n, 1, 16), np.float32)
        loaded(wide, wide, wide)
    execute_distributed_compiled(built.output_dir, (xs, ws, ys))
    np.testing.assert_array_equal(ys, xs + ws)
