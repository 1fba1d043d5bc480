"""``tilecomm run``: a script run as ``python SCRIPT.py`` runs it (its argv,
its exit status, its traceback), with ``--detect-races``, ``--transport`` and
``--lint`` reaching every call it makes; and ``FILE.py::NAME``, one program
called once, its outputs' checksums against numpy."""
import ast
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from tilecomm.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PORTING = os.path.join(ROOT, "examples", "tutorials", "09_porting.py")

# rank 0 stores its row into rank 1's window, then notifies; rank 1 waits,
# then reads the row (RACY: the same without the wait)
PROGRAM = textwrap.dedent('''
    import argparse
    import sys

    import numpy as np

    import tilecomm.language as pl
    import tilecomm.language.distributed as pld
    from tilecomm.runtime import DistributedConfig, RunConfig

    SIZE = 8
    NR = pl.dynamic("NR")
    Row = pl.Tensor[[1, SIZE], pl.FP32]
    Box = pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]
    Flag = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]


    @pl.jit.incore
    def step(x: Row, y: pl.Out[Row], box: Box, flag: Flag):
        me = pld.rank(pld.get_comm_ctx(box))
        if me == 0:
            pld.tile.remote_store(pl.load(x, [0, 0], [1, SIZE]), box, peer=1, offsets=[0, 0])
            pld.system.notify(flag, peer=1, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
        if me == 1:
            pld.system.wait(flag, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)  # WAIT
            y = pl.store(pl.load(box, [0, 0], [1, SIZE]), [0, 0], y)  # READ
        return y


    @pl.jit
    def chip(x: Row, y: pl.Out[Row], box: Box, flag: Flag):
        return step(x, y, box, flag)


    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32],
             ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
        box = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        flag = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(box, [1, SIZE], dtype=pl.FP32),
                 pld.window(flag, [1, 1], dtype=pl.INT32), device=r)
        return ys


    if __name__ == "__main__":
        ap = argparse.ArgumentParser()
        ap.add_argument("--ranks", type=int, default=2)
        ap.add_argument("--scale", type=float, default=1.0)
        ap.add_argument("--pin-transport", default=None)
        opts = ap.parse_args()
        print("argv", sys.argv[1:])
        xs = np.arange(opts.ranks * SIZE, dtype=np.float32).reshape(opts.ranks, 1, SIZE)
        xs *= opts.scale
        ys = np.zeros_like(xs)
        main(xs, ys, config=RunConfig(  # CALL
            distributed_config=DistributedConfig(device_ids=list(range(opts.ranks))),
            transport=opts.pin_transport))
        print("ys", ys.tolist())
        # a transport's module is imported only when a call runs on it
        print("transports", sorted(m.rsplit(".", 1)[1] for m in sys.modules
                                   if m.startswith("tilecomm.transport.")))
''')
RACY = PROGRAM.replace("pld.system.wait(flag, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)",
                       "pass")


def program_file(tmp_path, text=PROGRAM, name="exchange.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def line_of(path, marker):
    return next(i for i, line in enumerate(open(path).read().splitlines(), 1)
                if line.rstrip().endswith(f"# {marker}"))


def tilecomm_run(*args, cwd=None):
    """``python -m tilecomm run ARGS`` in a new process (a script forks ranks
    and sets variables: it gets a process of its own), the checkers' variables
    unset unless the options set them."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TILECOMM_DETECT_RACES", "TILECOMM_TRANSPORT", "TILECOMM_LINT",
                        "TILECOMM_POISON_WINDOWS")}
    return subprocess.run([sys.executable, "-m", "tilecomm", "run", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def printed(stdout, name):
    """The Python value a script printed on its line ``name VALUE``."""
    line = next(x for x in stdout.splitlines() if x.startswith(name + " "))
    return ast.literal_eval(line[len(name) + 1:])


def invoke(*args):
    return CliRunner().invoke(main, ["run", *args], catch_exceptions=False)


# ------------------------------------------------------------------ SCRIPT.py
def test_a_script_runs_with_its_own_arguments(tmp_path):
    path = program_file(tmp_path)
    proc = tilecomm_run(path, "--ranks", "2", "--scale", "2")
    assert proc.returncode == 0, proc.stderr
    assert printed(proc.stdout, "argv") == ["--ranks", "2", "--scale", "2"]
    xs = np.arange(2 * 8, dtype=np.float32).reshape(2, 1, 8) * 2
    want = np.zeros_like(xs)
    want[1] = xs[0]                          # rank 1 holds rank 0's row
    np.testing.assert_array_equal(np.array(printed(proc.stdout, "ys"), np.float32), want)


def test_detect_races_reports_a_missing_wait_at_the_scripts_lines(tmp_path):
    path = program_file(tmp_path, RACY, "racy.py")
    proc = tilecomm_run("--detect-races", path, "--ranks", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = proc.stderr
    # the script's uncaught DataRaceError (TC601), its traceback from the script's call
    assert "tilecomm.errors.DataRaceError: 1 data race(s) found" in err, err
    assert f'File "{path}", line {line_of(path, "CALL")}, in <module>' in err
    assert f"rank 1's pl.load at {path}:{line_of(path, 'READ')}" in err
    assert f"pld.tile.remote_store at {path}:" in err
    assert "ys " not in proc.stdout                  # the script stopped at the call


def test_without_detect_races_the_racy_script_runs_through(tmp_path):
    path = program_file(tmp_path, RACY, "racy.py")
    proc = tilecomm_run(path, "--ranks", "2")
    assert proc.returncode == 0, proc.stderr
    assert "DataRaceError" not in proc.stderr and "ys " in proc.stdout


@pytest.mark.parametrize("source", [
    "import sys\nprint('out', sys.argv[1:])\nraise SystemExit(3)\n",
    "import sys\nsys.exit('a message, status 1')\n",
    "def f(x):\n    return 1 / x\n\n\nprint('before')\nf(0)\n",
    "x = = 1\n",
])
def test_exit_status_and_traceback_are_pythons(tmp_path, source):
    """Against python itself: the same stdout, stderr and status (the
    traceback holds the script's frames only)."""
    path = tmp_path / "script.py"
    path.write_text(source)
    want = subprocess.run([sys.executable, str(path), "a", "-b"], capture_output=True,
                          text=True, timeout=60)
    got = tilecomm_run(str(path), "a", "-b")
    assert want.returncode in (1, 3)
    assert (got.returncode, got.stdout, got.stderr) == \
        (want.returncode, want.stdout, want.stderr)


def test_transport_copy_reaches_every_call_the_script_does_not_pin(tmp_path):
    path = program_file(tmp_path)
    plain = tilecomm_run(path)
    copy = tilecomm_run("--transport", "copy", path)
    pinned = tilecomm_run("--transport", "copy", path, "--pin-transport", "shm")
    for proc in (plain, copy, pinned):
        assert proc.returncode == 0, proc.stderr
        assert printed(proc.stdout, "ys")[1] == [list(map(float, range(8)))]
    assert "copy" not in printed(plain.stdout, "transports")
    assert "copy" in printed(copy.stdout, "transports")
    # RunConfig(transport="shm") given by the script wins over the option
    assert "copy" not in printed(pinned.stdout, "transports")


def test_lint_error_makes_a_finding_an_error_before_any_rank(tmp_path):
    path = program_file(tmp_path, RACY, "racy.py")
    read = line_of(path, "READ")
    warned = tilecomm_run(path)
    assert warned.returncode == 0 and f"{path}:{read}:" in warned.stderr
    assert "warning[TC707]" in warned.stderr
    failed = tilecomm_run("--lint", "error", path)
    assert failed.returncode == 1
    assert re.search(rf"^tilecomm\.errors\.LintError: {re.escape(path)}:{read}:\d+: "
                     r"error\[TC707\]", failed.stderr, re.M), failed.stderr
    assert "ys " not in failed.stdout


# -------------------------------------------------------------- FILE.py::NAME
def checksum(out, name):
    """(shape, dtype, sum, max|x|) of the output line ``name``."""
    m = re.search(rf"^{name}  \(([\d, ]+)\)  (\w+)  sum=(\S+)  max\|x\|=(\S+)$", out, re.M)
    assert m, out
    shape = tuple(int(d) for d in m.group(1).split(",") if d.strip())
    return shape, m.group(2), float(m.group(3)), float(m.group(4))


def inputs(shape):
    """The inputs the command makes: small integers from seed 0."""
    return np.random.default_rng(0).integers(-8, 8, shape).astype(np.float32)


def test_a_host_program_prints_its_outputs_checksums(tmp_path):
    res = invoke(f"{program_file(tmp_path)}::main", "--ranks", "3", "--transport", "copy")
    assert res.exit_code == 0, res.output
    xs = inputs((3, 1, 8))
    want = np.zeros_like(xs)
    want[1] = xs[0]
    assert checksum(res.stdout, "ys") == ((3, 1, 8), "float32", want.sum(), np.abs(want).max())
    assert res.stdout.count("\n") == 1              # one line per output, xs is none
    assert "on 3 rank(s) over copy" in res.stderr


def test_poison_windows_shows_an_output_nobody_wrote(tmp_path):
    """Rank 0 writes no row of its pl.Out: with --poison-windows it comes back
    as NaN, in both forms of the command; without, as the zeros passed in."""
    path = program_file(tmp_path)
    res = invoke(f"{path}::main", "--ranks", "2", "--poison-windows")
    assert res.exit_code == 0, res.output
    assert "ys  (2, 1, 8)  float32  sum=nan" in res.stdout, res.output
    assert "sum=nan" not in invoke(f"{path}::main", "--ranks", "2").stdout
    proc = tilecomm_run("--poison-windows", path, "--ranks", "2")
    assert proc.returncode == 0, proc.stderr
    ys = next(x for x in proc.stdout.splitlines() if x.startswith("ys "))
    rows = ys[len("ys "):].replace("nan", "None")
    got = ast.literal_eval(rows)
    assert got[0] == [[None] * 8]
    assert got[1] == [[float(v) for v in range(8)]]
    plain = tilecomm_run(path, "--ranks", "2")
    assert "nan" not in next(x for x in plain.stdout.splitlines() if x.startswith("ys "))


def test_a_program_class_runs_by_its_name_or_its_entry():
    for target in ("RowSum", "RowSum.main"):
        res = invoke(f"{PORTING}::{target}", "-n", "3", "--detect-races")
        assert res.exit_code == 0, res.output
        xs = inputs((3, 1, 8))
        want = xs.sum(axis=0) + np.arange(3, dtype=np.float32)[:, None, None]
        assert checksum(res.stdout, "ys") == ((3, 1, 8), "float32", want.sum(),
                                              np.abs(want).max())
        assert "race check on: no race" in res.stderr


def test_a_racy_program_is_reported_without_a_traceback(tmp_path):
    path = program_file(tmp_path, RACY, "racy.py")
    res = invoke(f"{path}::main", "--detect-races", "--lint", "off")
    assert res.exit_code == 1
    assert res.stdout.startswith("DataRaceError: 1 data race(s) found"), res.output
    assert f"rank 1's pl.load at {path}:{line_of(path, 'READ')}" in res.stdout
    assert "Traceback" not in res.output
    clean = invoke(f"{path}::main", "--lint", "off")      # the race check off: it runs
    assert clean.exit_code == 0 and "race check off" in clean.stderr


def test_a_lint_error_of_a_program_is_its_report(tmp_path):
    path = program_file(tmp_path, RACY, "racy.py")
    res = invoke(f"{path}::main", "--lint", "error")
    assert res.exit_code == 1
    assert res.stdout.startswith(f"LintError: {path}:{line_of(path, 'READ')}:"), res.output
    assert "error[TC707]" in res.stdout


@pytest.mark.parametrize("args, message", [
    (["{dir}/missing.py"], "no such script: {dir}/missing.py"),
    (["{dir}/missing.py::main"], "no such file: {dir}/missing.py"),
    (["{path}::"], "expected FILE.py::NAME"),
    (["{path}::nothing"], "defines no 'nothing' (its HOST programs: main)"),
    (["{path}::step"], "step in {path} is not a @pl.jit.host function or a @pl.program class"),
    (["{path}::SIZE"], "SIZE in {path} is not a @pl.jit.host function"),
    (["{path}::main", "extra"], "takes no arguments of its own; got extra"),
    (["{path}::main", "--bogus"], "No such option"),
    (["--ranks", "2", "{path}"], "--ranks: for FILE.py::NAME only"),
    (["--bogus", "{path}"], "No such option '--bogus'"),
    ([PORTING + "::RowSum.kernel"], "RowSum has no entry 'kernel'; its entries: main"),
])
def test_bad_targets_are_usage_errors(tmp_path, args, message):
    path = program_file(tmp_path)
    fill = {"path": path, "dir": str(tmp_path)}
    res = CliRunner().invoke(main, ["run", *[a.format(**fill) for a in args]])
    assert res.exit_code == 2 and message.format(**fill) in res.output, res.output


def test_help_states_what_wins_over_the_options():
    text = " ".join(invoke("--help").output.split())
    assert "A RunConfig field the script sets itself wins over them" in text
    assert "fields left unset (None, the default) follow the option" in text


def test_a_file_whose_top_level_raises_shows_its_own_traceback(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import numpy\n\nx = 1 / 0\n")
    res = CliRunner().invoke(main, ["run", f"{path}::main"])
    assert res.exit_code == 1
    assert res.stderr.startswith(f'Traceback (most recent call last):\n  File "{path}", line 3, '
                                 f'in <module>\n'), res.stderr
    assert res.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
