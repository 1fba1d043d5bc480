"""``tilecomm run``: a script run as python runs it, with the checkers
chosen on the command line reaching every call it makes; and one program of
a file called once with arguments from its annotations."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from tilecomm.cli import main

# A ring shift: every rank stores its row into its right neighbour's window
# and notifies it; the neighbour waits (or, RACY, does not) and reads it.
SCRIPT = textwrap.dedent('''
    import sys

    import numpy as np

    import tilecomm.language as pl
    import tilecomm.language.distributed as pld
    from tilecomm.runtime import DistributedConfig, RunConfig

    NR = pl.dynamic("NR")
    S = 8


    @pl.jit.incore
    def shift(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
              win: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[1, S], pl.FP32]:
        ctx = pld.get_comm_ctx(sig)
        right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
        pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, peer=right, offsets=[0, 0])
        pld.system.notify(sig, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
        if WAIT:
            pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
        return y


    @pl.jit
    def chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
             win: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
        return shift(x, y, win, sig)


    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
        win = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(win, [1, S], dtype=pl.FP32),
                 pld.window(sig, [1, 1], dtype=pl.INT32), device=r)
        return ys


    if __name__ == "__main__":
        n = int(sys.argv[sys.argv.index("--ranks") + 1])
        xs = np.arange(n * S, dtype=np.float32).reshape(n, 1, S)
        ys = np.zeros_like(xs)
        main(xs, ys, config=RunConfig(distributed_config=DistributedConfig(
            device_ids=list(range(n)))))
        if WAIT:
            np.testing.assert_array_equal(ys, np.roll(xs, 1, axis=0))
        print("argv", sys.argv[1:])
        print("OK")
''')


def script(tmp_path, wait=True, name="ring.py", tail=""):
    path = tmp_path / name
    path.write_text(SCRIPT.replace("WAIT", str(wait)) + tail)
    return path


def tilecomm_run(*args, env=None):
    """``python -m tilecomm run ARGS`` in a process of its own (a script's
    calls start ranks and set the environment)."""
    full = dict(os.environ)
    for var in ("TILECOMM_DETECT_RACES", "TILECOMM_TRANSPORT", "TILECOMM_LINT"):
        full.pop(var, None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "tilecomm", "run", *map(str, args)],
                          capture_output=True, text=True, env=full, timeout=120)


# ------------------------------------------------------------------ a script
def test_a_script_runs_as_python_runs_it_with_its_own_arguments(tmp_path):
    res = tilecomm_run(script(tmp_path), "--ranks", "3", "-v")
    assert res.returncode == 0, res.stderr
    assert "argv ['--ranks', '3', '-v']" in res.stdout and "OK" in res.stdout


def test_detect_races_reaches_every_call_of_the_script(tmp_path):
    racy = script(tmp_path, wait=False)
    res = tilecomm_run("--detect-races", racy, "--ranks", "2")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "DataRaceError: 2 data race(s) found" in res.stderr
    assert re.search(rf"{re.escape(str(racy))}:\d+", res.stderr), res.stderr
    # the script's own frame starts the traceback, as under python
    assert "Traceback" in res.stderr and "runpy" not in res.stderr
    unchecked = tilecomm_run(racy, "--ranks", "2")
    assert unchecked.returncode == 0 and "data race" not in unchecked.stderr, unchecked.stderr


def test_the_transport_option_reaches_the_runtime(tmp_path):
    # the transport a call of the script's without its own choice runs on
    probe = '\nprint("transport", RunConfig().resolved_transport())\n'
    res = tilecomm_run("--transport", "copy", script(tmp_path, tail=probe), "--ranks", "2")
    assert res.returncode == 0, res.stderr
    assert "transport copy" in res.stdout and "OK" in res.stdout


def test_lint_error_turns_a_finding_into_an_error(tmp_path):
    # without the wait, the read of the window is a TC707 finding as well as a race
    racy = script(tmp_path, wait=False)
    res = tilecomm_run("--lint", "error", racy, "--ranks", "2")
    assert res.returncode == 1 and "LintError" in res.stderr and "TC707" in res.stderr
    warned = tilecomm_run(racy, "--ranks", "2")
    assert warned.returncode == 0 and "TC707" in warned.stderr


@pytest.mark.parametrize("tail, status, text", [
    ("\nraise SystemExit(3)\n", 3, ""),
    ("\nraise SystemExit('stopped by the script')\n", 1, "stopped by the script"),
    ("\nraise KeyError('boom')\n", 1, "KeyError: 'boom'"),
])
def test_the_exit_status_is_the_scripts(tmp_path, tail, status, text):
    path = script(tmp_path, tail=tail)
    res = tilecomm_run(path, "--ranks", "1")
    assert res.returncode == status, res.stderr
    assert text in res.stderr
    if "KeyError" in tail:
        assert f'File "{path}", line' in res.stderr and "runpy" not in res.stderr


# ------------------------------------------------------------------ one program
def test_a_program_runs_once_and_prints_its_outputs(tmp_path):
    path = script(tmp_path)
    res = CliRunner().invoke(main, ["run", f"{path}::main", "--ranks", "3"])
    assert res.exit_code == 0, res.output
    # the arguments the command makes: inputs from a fixed seed, as explore's
    xs = np.random.default_rng(0).integers(-8, 8, (3, 1, 8)).astype(np.float32)
    want = np.roll(xs, 1, axis=0)
    line = next(ln for ln in res.output.splitlines() if ln.strip().startswith("ys:"))
    assert f"[3, 1, 8] float32  sum {want.sum():.6g}  max|x| {np.abs(want).max():.6g}" in line
    assert "main ran on 3 rank(s)" in res.output


def test_a_racy_program_with_detect_races_prints_the_report(tmp_path):
    path = script(tmp_path, wait=False)
    res = CliRunner().invoke(main, ["run", "--detect-races", f"{path}::main"])
    assert res.exit_code == 1
    assert "DataRaceError: 2 data race(s) found" in res.output
    assert f"{path}:" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("target, extra, message", [
    ("missing.py::main", [], "no such file"),
    ("{path}::nope", [], "nope in"),
    ("{path}::S", [], "is not a @pl.jit.host function"),
    ("{path}::main", ["stray"], "takes options only; got stray"),
    ("missing.py", [], "no such script"),
])
def test_bad_targets_are_usage_errors(tmp_path, target, extra, message):
    path = script(tmp_path)
    res = CliRunner().invoke(main, ["run", target.format(path=path), *extra])
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_program_options_are_refused_for_a_script(tmp_path):
    res = CliRunner().invoke(main, ["run", "--ranks", "2", str(script(tmp_path))])
    assert res.exit_code == 2 and "--ranks is for FILE.py::NAME" in res.output
