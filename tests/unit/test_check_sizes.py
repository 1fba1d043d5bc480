"""``tilecomm check`` finds what the lint of a real call finds: it checks
each program at the world size the program or its file implies, else at 2,
3 and 4; binds pl.dynamic dims to the world size as ``explore`` and ``run``
do; takes several files and folders; and sees programs a factory built."""
import json

from click.testing import CliRunner

from tilecomm.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args))


HEAD = '''
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

NR = pl.dynamic("NR")
'''

# a wait that no notify can satisfy when there are three ranks: TC703 at size 3 only
ODD = HEAD + '''
SIG = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]


@pl.jit.incore
def step(sig: SIG):
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pld.system.notify(sig, peer=(me + 1) % n, offsets=[me, 0], value=1, op=pld.NotifyOp.Set)
    if n == SIZE:
        pld.system.wait(sig, offsets=[(me + n - 1) % n, 0], expected=2, cmp=pld.WaitCmp.Ge)
    pld.system.wait(sig, offsets=[(me + n - 1) % n, 0], expected=1, cmp=pld.WaitCmp.Ge)


@pl.jit
def chip(sig: SIG):
    return step(sig)


@pl.jit.host
def main(out: pl.Out[ROWS]):
    buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(pld.window(buf, [NR, 1], dtype=pl.INT32), device=r)
    return out
'''


def odd(tmp_path, size=3, rows="pl.Tensor[[NR, 1], pl.INT32]", tail="", name="prog.py"):
    path = tmp_path / name
    path.write_text(ODD.replace("SIZE", str(size)).replace("ROWS", rows) + tail)
    return str(path)


def codes_at(output):
    return [(d["code"], d["line"]) for d in json.loads(output)]


def line_of(path, text):
    return next(i for i, t in enumerate(open(path).read().splitlines(), 1) if text in t)


def test_without_options_every_small_world_size_is_checked_and_reported(tmp_path):
    path = odd(tmp_path)
    out = run("check", path)
    assert "1 warning(s) (world sizes 2, 3, 4)" in out.output
    assert f"{path}:{line_of(path, 'expected=2')}:9: warning[TC703]" in out.output
    # the near miss: a size where the wait is not there finds nothing
    assert "0 warning(s) (world size 2)" in run("check", "-n", "2", path).output


def test_the_size_a_program_implies_is_the_one_checked(tmp_path):
    # one row per rank, three rows: the program is for three ranks
    rows = "pl.Tensor[[3, 1], pl.INT32]"
    body = ODD.replace("SIZE", "2").replace("ROWS", rows).replace(
        "chip(pld.window(buf", "chip(out[r], pld.window(buf").replace(
        "def chip(sig: SIG):\n    return step(sig)",
        "def chip(o: pl.Out[pl.Tensor[[1], pl.INT32]], sig: SIG):\n    return step(sig)")
    path = tmp_path / "three.py"
    path.write_text(body)
    out = run("check", str(path))
    # at size 2 the extra wait would be a false alarm; the program says 3
    assert "0 error(s), 0 warning(s) (world size 3)" in out.output, out.output


def test_a_device_ids_computed_from_a_constant_names_the_size(tmp_path):
    tail = "\nN = 3\nCFG = RunConfig(distributed_config=DistributedConfig(" \
           "device_ids=list(range(N))))\n"
    path = odd(tmp_path, tail=tail)
    out = run("check", path)
    assert "1 warning(s) (world size 3)" in out.output
    # computed from a function's local: not known, every small size checked
    local = "\ndef go(n):\n    return DistributedConfig(device_ids=list(range(n)))\n"
    assert "(world sizes 2, 3, 4)" in run("check", odd(tmp_path, tail=local, name="l.py")).output


STRAY = HEAD + '''
SIG = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]


@pl.jit.incore
def step(sig: SIG):
    me = pld.rank(pld.get_comm_ctx(sig))
    n = pld.nranks(pld.get_comm_ctx(sig))
    pld.tensor.barrier(sig)
    pld.system.notify(sig, peer=(me + 1) % n, offsets=[me, 0], value=1, op=pld.NotifyOp.Set)


@pl.jit
def chip(sig: SIG):
    return step(sig)


@pl.jit.host
def main(out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]]):
    buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(pld.window(buf, [NR, 1], dtype=pl.INT32), device=r)
    return out
'''


def test_dynamic_dims_are_the_world_size_as_run_binds_them(tmp_path):
    path = tmp_path / "stray.py"
    path.write_text(STRAY)
    out = run("check", "--format", "json", str(path))
    assert set(codes_at(out.stdout)) == {("TC705", line_of(str(path), "pld.system.notify("))}
    # a dim the world size does not fit (NR - 5 rows to load from) is left open, said so
    path2 = tmp_path / "open.py"
    path2.write_text(STRAY.replace("def step(sig: SIG):", "def step(sig: SIG, w: W):\n"
                                   "    t = pl.load(w, [0, 0], [1, 1])")
                     .replace("return step(sig)", "return step(sig, w)")
                     .replace("def chip(sig: SIG):", "def chip(sig: SIG, w: W):")
                     .replace("pl.INT32]]):\n    buf", "pl.INT32]], w: W):\n    buf")
                     .replace("dtype=pl.INT32), device=r)", "dtype=pl.INT32), w, device=r)")
                     .replace("SIG = pl.InOut", "W = pl.Tensor[[NR - 5, 1], pl.INT32]\n"
                              "SIG = pl.InOut"))
    got = json.loads(run("check", "--format", "json", str(path2)).stdout)
    assert [d["severity"] for d in got] == ["note"] and "NR left unbound" in got[0]["message"]
    assert [d["code"] for d in json.loads(run("check", "--format", "json", "-n", "9",
                                              str(path2)).stdout)] == ["TC705"]


def test_several_files_and_folders_in_one_command(tmp_path):
    folder = tmp_path / "progs"
    (folder / "sub").mkdir(parents=True)
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "junk.py").write_text("raise SystemExit(3)\n")
    a = odd(folder, name="a.py")
    b = odd(folder / "sub", size=9, name="b.py")
    single = tmp_path / "stray.py"
    single.write_text(STRAY)
    out = run("check", str(folder), str(single))
    assert out.exit_code == 0
    summaries = [ln for ln in out.output.splitlines() if " error(s), " in ln]
    assert summaries == [f"{a}: 0 error(s), 1 warning(s) (world sizes 2, 3, 4)",
                         f"{b}: 0 error(s), 0 warning(s) (world sizes 2, 3, 4)",
                         f"{single}: 0 error(s), 1 warning(s) (world sizes 2, 3, 4)"]
    assert run("check", "--strict", str(folder)).exit_code == 1
    assert run("check", "--strict", str(folder / "sub")).exit_code == 0


FACTORY = '''
import tilecomm.language as pl
import tilecomm.language.distributed as pld

SIG = pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]]


def build(expected):
    @pl.jit.incore
    def step(sig: SIG):
        me = pld.rank(pld.get_comm_ctx(sig))
        pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
        pld.system.wait(sig, offsets=[0, 0], expected=expected, cmp=pld.WaitCmp.Ge)

    @pl.jit
    def chip(sig: SIG):
        return step(sig)

    @pl.jit.host
    def main(out: pl.Out[pl.Tensor[[2, 1], pl.INT32]]):
        buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
        for r in pl.range(2):
            chip(pld.window(buf, [2, 1], dtype=pl.INT32), device=r)
        return out
    return main
'''


def test_programs_a_factory_built_at_module_level_are_checked(tmp_path):
    (tmp_path / "factory.py").write_text(FACTORY)
    user = tmp_path / "user.py"
    user.write_text("from factory import build\n\nwrong = build(3)\nright = build(1)\n\n"
                    "def later():\n    return build(5)        # built when it runs: not seen\n")
    got = json.loads(run("check", "--format", "json", str(user)).stdout)
    fac = str(tmp_path / "factory.py")
    assert [(d["code"], d["file"], d["line"], d["program"]) for d in got] == \
        [("TC703", fac, line_of(fac, "pld.system.wait("), "wrong")]
