"""``tilecomm explore FILE.py::NAME``: the search from the command line, its
report, and the replay of the schedule it prints."""
import pathlib
import re
import textwrap

import pytest
from click.testing import CliRunner

from tilecomm.cli import main

PROGRAM = textwrap.dedent('''
    import tilecomm.language as pl
    import tilecomm.language.distributed as pld

    NR = pl.dynamic("NR")


    @pl.jit.incore
    def counter(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
        ctx = pld.get_comm_ctx(sig)
        if pld.rank(ctx) == 0:
            for k in pl.range(1, pld.nranks(ctx)):
                pld.system.wait(sig, offsets=[0, 0], expected=k, cmp=pld.WaitCmp.CMP)
        else:
            pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)


    @pl.jit
    def chip(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
             sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
        counter(out, sig)


    @pl.jit.host
    def main(outs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]], tag: pl.Scalar[pl.INT32]):
        sig = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(outs[r], pld.window(sig, [1, 1], dtype=pl.INT32), device=r)
        return outs


    if __name__ == "__main__":
        raise SystemExit("the file's main block must not run")
''')


def program(tmp_path, cmp):
    path = tmp_path / f"counter_{cmp.lower()}.py"
    path.write_text(PROGRAM.replace("CMP", cmp))
    return str(path)


def run(*args):
    return CliRunner().invoke(main, ["explore", *args], catch_exceptions=False)


def test_a_deadlock_is_printed_with_its_schedule_and_the_replay_repeats_it(tmp_path):
    path = program(tmp_path, "Eq")
    res = run(f"{path}::main", "--ranks", "3", "--scalar", "tag=1", "--time-budget", "60")
    assert res.exit_code == 1, res.output
    assert res.output.startswith("deadlock after ")
    assert "waiting for == 1 (WaitCmp.Eq)" in res.output
    steps = re.findall(r"^\s+\d+\. rank \d: .* at (\S+):\d+$", res.output, re.M)
    assert steps and all(s == path for s in steps)
    token = re.search(r"--replay (\S+)$", res.output, re.M).group(1)
    again = run(f"{path}::main", "--ranks", "3", "--scalar", "tag=1", "--replay", token)
    assert again.exit_code == 1 and again.output.startswith("DeadlockError: deadlock")


def test_a_correct_protocol_is_verified(tmp_path):
    res = run(f"{program(tmp_path, 'Ge')}::main", "--ranks", "3", "--scalar", "tag=1")
    assert res.exit_code == 0, res.output
    assert re.match(r"no failure, verified: 3 ranks, .*; complete: every order of dependent "
                    r"operations \(\d+ schedule\(s\)", res.output), res.output


def test_a_search_the_budget_ends_first_verifies_nothing_and_says_so(tmp_path):
    res = run(f"{program(tmp_path, 'Ge')}::main", "--ranks", "3", "--scalar", "tag=1",
              "--time-budget", "0")
    assert res.exit_code == 3, res.output
    assert "no failure, not verified" in res.output and "incomplete" in res.output
    assert "0 schedule(s)" in res.output


def test_a_bounded_search_is_verified_at_its_bound(tmp_path):
    res = run(f"{program(tmp_path, 'Ge')}::main", "--ranks", "3", "--scalar", "tag=1",
              "--bound", "0")
    assert res.exit_code == 0, res.output
    assert "verified" in res.output and "preemption bound 0" in res.output, res.output


@pytest.mark.parametrize("token", ["tcs2-3-{pid}-u-0x-1", "tcs2-3-{pid}-u-1x0", "tcs2-3-{pid}-u-",
                                   "tcs2-3-{pid}-u-3x1", "tcs2-2-{pid}-u-0x1",
                                   "tcs2-3-000000000000-u-0x1", "x"])
def test_a_malformed_or_foreign_token_is_a_usage_error(tmp_path, token):
    path = program(tmp_path, "Ge")
    first = run(f"{path}::main", "--ranks", "3", "--scalar", "tag=1", "--bound", "0",
                "--replay", "tcs2-3-000000000000-u-d")
    pid = re.search(r"this one's is ([0-9a-f]{12})", first.output).group(1)
    res = run(f"{path}::main", "--ranks", "3", "--scalar", "tag=1",
              "--replay", token.format(pid=pid))
    assert res.exit_code == 2 and "ConfigError" in res.output and "[TC605]" in res.output, \
        res.output
    good = run(f"{path}::main", "--ranks", "3", "--scalar", "tag=1", "--replay",
               f"tcs2-3-{pid}-u-d")
    assert good.exit_code == 0 and "no failure" in good.output, good.output


def test_ctrl_c_is_exit_status_130(tmp_path, monkeypatch):
    import tilecomm.cli.explore as cli_explore

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli_explore, "explore", interrupted)
    res = run(f"{program(tmp_path, 'Ge')}::main", "--ranks", "2", "--scalar", "tag=1")
    assert res.exit_code == 130, res.output


@pytest.mark.parametrize("args, message", [
    (["{path}"], "expected FILE.py::NAME"),
    (["{path}::counter"], "is not a @pl.jit.host function"),
    (["{path}::main"], "--scalar tag=VALUE"),
    (["{path}::main", "--scalar", "tag=x"], "expected NAME=NUMBER"),
])
def test_bad_targets_and_arguments_are_usage_errors(tmp_path, args, message):
    path = program(tmp_path, "Ge")
    res = CliRunner().invoke(main, ["explore", *[a.format(path=path) for a in args]])
    assert res.exit_code == 2 and message in res.output, res.output


def test_a_program_explore_refuses_is_an_error_message_not_a_traceback():
    """examples/dependency_inference.py needs two tasks of a rank at once."""
    example = pathlib.Path(__file__).parents[2] / "examples" / "dependency_inference.py"
    res = CliRunner().invoke(main, ["explore", f"{example}::main", "--ranks", "2"])
    assert res.exit_code == 2, res.output
    assert "error[TC604]" in res.output and "task 'produce' holds the core" in res.output
    assert "Traceback" not in res.output
