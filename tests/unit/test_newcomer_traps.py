"""Mistakes a new user makes that would otherwise run and answer wrongly: each
is an error at the user's line before any rank starts (the firing cases are
in test_compile_errors' table), and its near miss runs and answers right."""
import inspect
import os
import re
import subprocess
import sys
import traceback

import numpy as np
import pytest

import bad_programs as B
import tilecomm
import tilecomm.ir
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.compiler import CompiledProgram
from tilecomm.errors import (FILTERING_NOTE, ConfigError, InternalError, ProgramTypeError,
                             ProgramValueError, UserError)
from tilecomm.runtime import DistributedConfig, RunConfig

PACKAGE = os.path.dirname(os.path.abspath(tilecomm.__file__))
HERE = os.path.dirname(os.path.abspath(__file__))

XS, YS, R, C, W = B.XS, B.YS, B.R, B.C, B.W


def config(world=W):
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(world))))


def inputs(world=W):
    xs = np.arange(world * R * C, dtype=np.float32).reshape(world, R, C) + 1
    return xs, np.zeros_like(xs)


# ---------------------------------------------------------------- device= left out
@pl.jit.host
def comm_less_outside_a_rank_loop(xs: XS, ys: YS):
    # round-robin placement is what a comm-less dispatch asks for
    B.plain_chip(xs[0], ys[0])
    B.plain_chip(xs[1], ys[1])
    return ys


@pl.jit.host
def comm_less_in_a_loop_over_chunks(xs: XS, ys: YS):
    # a loop over data chunks (not pl.range(pld.world_size())) may go round-robin
    for i in pl.range(W):
        B.plain_chip(xs[i], ys[i])
    return ys


@pl.jit.host
def rank_loop_with_device(xs: XS, ys: YS):
    for r in pl.range(pld.world_size()):
        B.plain_chip(xs[r], ys[r], device=r)
    return ys


@pytest.mark.parametrize("main", [comm_less_outside_a_rank_loop,
                                  comm_less_in_a_loop_over_chunks, rank_loop_with_device])
def test_dispatches_without_windows_or_with_device_run(main):
    xs, ys = inputs()
    main(xs, ys, config=config())
    np.testing.assert_array_equal(ys, xs)


# ---------------------------------------------------------------- a HOST input where the chip writes
@pl.jit.host
def written_host_param_is_out(xs: XS, ys: YS):
    for r in pl.range(pld.world_size()):
        B.plain_chip(xs[r], ys[r], device=r)
    return ys


@pl.jit.host
def written_host_param_is_inout(xs: XS, acc: pl.InOut[XS]):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        B.inout_chip(xs[r], acc[r], pld.window(wbuf, [R, C], dtype=pl.FP32), device=r)
    return acc


def test_written_host_parameters_get_the_results():
    xs, ys = inputs()
    written_host_param_is_out(xs, ys, config=config())
    np.testing.assert_array_equal(ys, xs)
    acc = np.ones_like(xs)
    written_host_param_is_inout(xs, acc, config=config())
    np.testing.assert_array_equal(acc, xs + 1)


# ---------------------------------------------------------------- a kernel called from Python
@pytest.mark.parametrize("fn,kind,hint", [
    (B.ok_kernel, "an InCore kernel (@pl.jit.incore)", "call it from a @pl.jit chip function"),
    (B.ok_chip, "a chip orchestration function (@pl.jit)", "dispatch it from a @pl.jit.host"),
])
def test_calling_a_kernel_or_chip_function_from_python_says_what_to_call(fn, kind, hint):
    xs, ys = inputs()
    with pytest.raises(TypeError) as ei:
        fn(xs[0], ys[0], None, None)          # the line the error names
    line = inspect.currentframe().f_lineno - 1
    e = ei.value
    assert isinstance(e, ProgramTypeError) and e.code == "TC301"
    assert (e.span.file, e.span.line) == (__file__, line)
    assert f"{fn.__name__} is {kind}; only a HOST orchestrator (@pl.jit.host) can be called " \
           f"from Python" in e.message
    assert hint in e.hint and " a incore" not in str(e)


def test_the_host_orchestrator_is_the_one_to_call():
    xs, ys = inputs()
    B.ok_main(xs, ys, config=config())
    np.testing.assert_array_equal(ys, xs)


# ---------------------------------------------------------------- errors first
def _tilecomm_frames(tb):
    return [f.filename for f in traceback.extract_tb(tb)
            if os.path.abspath(f.filename).startswith(PACKAGE + os.sep)]


def test_a_user_error_through_a_decorated_call_shows_only_user_frames(monkeypatch):
    monkeypatch.delenv("TILECOMM_TRACEBACK_FILTERING", raising=False)
    xs, ys = inputs()
    with pytest.raises(UserError) as ei:
        B.host_windows_without_device(xs, ys, config=config())
    e = ei.value
    assert e.code == "TC227" and _tilecomm_frames(e.__traceback__) == []
    assert e.__suppress_context__
    assert sys.version_info < (3, 11) or FILTERING_NOTE in e.__notes__
    with pytest.raises(UserError) as ei:      # the class form's entry point too
        tilecomm.ir.compile(B.host_windows_without_device, distributed_config=DistributedConfig(
            device_ids=[0, 1]))(xs, ys)
    assert _tilecomm_frames(ei.value.__traceback__) == []


@pl.jit.host
def assigns_to_another_view(xs: XS, ys: YS):
    for r in pl.range(pld.world_size()):
        ys[0] = B.plain_chip(xs[r], ys[r], device=r)      # rank 1's result into row 0
    return ys


def test_a_fault_in_the_host_orchestrator_shows_no_lowered_code(monkeypatch):
    monkeypatch.delenv("TILECOMM_TRACEBACK_FILTERING", raising=False)
    xs, ys = inputs()
    with pytest.raises(UserError) as ei:
        assigns_to_another_view(xs, ys, config=config())
    files = [f.filename for f in traceback.extract_tb(ei.value.__traceback__)]
    assert files == [__file__]                  # not tilecomm's, not the generated code's
    assert ei.value.span.line == _line_of("ys[0] = B.plain_chip", assigns_to_another_view)


def test_the_environment_variable_shows_every_frame(monkeypatch):
    monkeypatch.setenv("TILECOMM_TRACEBACK_FILTERING", "off")
    xs, ys = inputs()
    with pytest.raises(UserError) as ei:
        B.host_rank_loop_without_device(xs, ys, config=config())
    frames = _tilecomm_frames(ei.value.__traceback__)
    assert any(f.endswith(os.path.join("frontend", "dispatch.py")) for f in frames)
    assert not getattr(ei.value, "__notes__", None)


def test_an_internal_error_keeps_every_frame(monkeypatch):
    monkeypatch.delenv("TILECOMM_TRACEBACK_FILTERING", raising=False)

    def broken(self, *a, **kw):
        raise InternalError("a bug in tilecomm")

    monkeypatch.setattr(CompiledProgram, "specialise", broken)
    xs, ys = inputs()
    with pytest.raises(InternalError) as ei:
        B.ok_main(xs, ys, config=config())
    assert os.path.join("tilecomm", "compiler.py") in "".join(
        _tilecomm_frames(ei.value.__traceback__))


SCRIPT = """
import numpy as np
import bad_programs as B
from tilecomm.runtime import DistributedConfig, RunConfig
xs = np.ones((2, B.R, B.C), np.float32)
B.host_windows_without_device(xs, np.zeros_like(xs),
    config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1])))
"""


@pytest.mark.parametrize("how", ["python", "tilecomm run"])
def test_an_uncaught_user_error_prints_the_users_lines_and_the_error_last(tmp_path, how):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, str(script)] if how == "python" else \
        [sys.executable, "-m", "tilecomm", "run", str(script)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    env.pop("TILECOMM_TRACEBACK_FILTERING", None)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 1
    err = p.stderr
    assert PACKAGE not in err, err                     # no frame of tilecomm's
    files = re.findall(r'File "([^"]+)"', err)
    assert files == [str(script)], err                 # only the user's call
    line = next(i for i, t in enumerate(SCRIPT.splitlines(), 1) if "B.host_windows" in t)
    assert f'File "{script}", line {line}' in err
    assert "error[TC227]" in err and "hint: name the rank that runs it" in err
    assert sys.version_info < (3, 11) or err.rstrip().endswith(FILTERING_NOTE)


# ---------------------------------------------------------------- no DistributedConfig
NR = pl.dynamic("NR")
ROWS = pl.Tensor[[NR, R, C], pl.FP32]


@pl.jit.incore
def to_the_right(x: B.X, y: B.Y, win: B.WIN, sig: B.SIG):
    ctx = pld.get_comm_ctx(win)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)       # a peer for any world size
    pld.tile.remote_store(pl.load(x, [0, 0], [R, C]), win, peer=right, offsets=[0, 0])
    y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit.incore
def to_rank_one(x: B.X, y: B.Y, win: B.WIN, sig: B.SIG):
    me = pld.rank(pld.get_comm_ctx(win))
    pld.tile.remote_store(pl.load(x, [0, 0], [R, C]), win, peer=1 - me, offsets=[0, 0])
    return y


def host_of(kernel):
    @pl.jit
    def chip(x: B.X, y: B.Y, win: B.WIN, sig: B.SIG):
        return kernel(x, y, win, sig)

    @pl.jit.host
    def main(xs: ROWS, ys: pl.Out[ROWS]):
        wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                 pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
        return ys
    return main


def _line_of(text, func):
    lines, first = inspect.getsourcelines(func)
    return next(first + i for i, t in enumerate(lines) if text in t)


def test_rows_per_rank_without_a_config_name_the_missing_config():
    xs, ys = inputs(2)
    main = host_of(to_the_right)
    with pytest.raises(ConfigError) as ei:
        main(xs, ys)                                     # the line the error names
    line = inspect.currentframe().f_lineno - 1
    e = ei.value
    assert e.code == "TC403" and (e.span.file, e.span.line) == (__file__, line)
    assert "called without a DistributedConfig, so it runs on 1 rank" in e.message
    assert f"'xs' has 2 rows, one per rank (xs[r] goes to device=r at {__file__}:" \
           f"{_line_of('chip(xs[r]', host_of)}" in e.message
    assert "DistributedConfig(device_ids=list(range(2)))" in e.hint
    assert np.all(ys == 0)


def test_a_peer_beyond_one_rank_without_a_config_names_the_missing_config():
    xs, ys = inputs(1)
    with pytest.raises(ConfigError) as ei:
        host_of(to_rank_one)(xs, ys)
    e = ei.value
    assert e.code == "TC403"
    assert f"peer 1 is named at {__file__}:{_line_of('peer=1 - me', to_rank_one)}" in e.message


def test_a_constant_device_beyond_one_rank_without_a_config_says_why():
    xs, ys = inputs()
    with pytest.raises(ProgramValueError) as ei:
        B.host_device_out_of_range(xs, ys)
    assert ei.value.code == "TC212"
    assert "no DistributedConfig was given" in ei.value.hint
    with pytest.raises(ProgramValueError) as ei:           # with a config: the plain error
        B.host_device_out_of_range(xs, ys, config=config())
    assert "no DistributedConfig" not in (ei.value.hint or "")


def test_without_a_config_a_program_for_any_world_size_runs_on_one_rank():
    xs, ys = inputs(1)
    host_of(to_the_right)(xs, ys)
    np.testing.assert_array_equal(ys, xs)


def test_with_a_config_the_same_call_runs_on_its_ranks():
    xs, ys = inputs(2)
    host_of(to_the_right)(xs, ys, config=config(2))
    np.testing.assert_array_equal(ys, xs)


def test_a_config_given_only_at_the_call_of_a_compiled_program_is_an_error():
    xs, ys = inputs(2)
    compiled = host_of(to_the_right).compile()          # no DistributedConfig: 1 rank
    with pytest.raises(ConfigError) as ei:
        compiled(xs, ys, config=config(2))
    line = inspect.currentframe().f_lineno - 1
    e = ei.value
    assert e.code == "TC403" and (e.span.file, e.span.line) == (__file__, line)
    assert "compiled without a DistributedConfig, for 1 rank" in e.message
    assert "names 2" in e.message and ".compile(config=...)" in e.hint
    # the near miss: the config given where the program is compiled
    compiled = host_of(to_the_right).compile(config=config(2))
    compiled(xs, ys, config=config(2))
    np.testing.assert_array_equal(ys, xs)
