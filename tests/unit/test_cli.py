"""The ``tilecomm`` command: --help, ``doctor`` against what the machine
reports, ``ops`` against the registry, and ``python -m tilecomm``."""
import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

import tilecomm.language  # noqa: F401  (declares every op)
from tilecomm.cli import main
from tilecomm.ops.registry import records


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_help_names_every_verb():
    out = run("--help")
    assert out.exit_code == 0
    for verb in ("doctor", "ops"):
        assert verb in out.output


def test_doctor_reports_the_machine():
    out = run("doctor")
    assert out.exit_code == 0, out.output
    lines = dict(line.split(None, 1) for line in out.output.splitlines()
                 if line and not line.startswith(" "))
    usable = len(os.sched_getaffinity(0))
    assert lines["cores"] == f"{usable} usable of {os.cpu_count()}"
    st = os.statvfs("/dev/shm")
    assert lines["/dev/shm"].endswith(f"of {st.f_frsize * st.f_blocks / 2**30:.1f} GiB")
    assert "native core  built (_native_core" in out.output
    assert lines["numpy"] == __import__("numpy").__version__


def test_doctor_says_what_the_environment_selects(monkeypatch):
    monkeypatch.setenv("TILECOMM_TRANSPORT", "copy")
    out = run("doctor")
    assert "TILECOMM_TRANSPORT=copy" in out.output and "runs use transport copy" in out.output


def test_ops_lists_every_record_once_with_where_it_may_be_used():
    out = run("ops")
    assert out.exit_code == 0
    names = [line.split()[0] for line in out.output.splitlines()[:-2] if line.strip()]
    assert sorted(names) == sorted(r.name for r in records())
    assert f"{len(records())} ops" in out.output
    notify = next(line for line in out.output.splitlines() if line.startswith("pld.system.notify"))
    assert notify.split()[1:] == ["InCore"]


@pytest.mark.parametrize("name", ["pld.system.notify", "pl.load"])
def test_ops_describes_one_op_from_its_record(name):
    rec = next(r for r in records() if name in r.spellings)
    out = run("ops", name)
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[0] == f"{rec.name}{rec.signature}"
    for effect in rec.effects:
        assert effect.value in out.output
    assert rec.doc.strip().splitlines()[0] in out.output


def test_an_unknown_op_is_a_usage_error_with_suggestions():
    out = run("ops", "pld.system.notfy")
    assert out.exit_code == 2
    assert "no op named 'pld.system.notfy'; did you mean pld.system.notify" in out.output


def test_python_dash_m_runs_the_command():
    proc = subprocess.run([sys.executable, "-m", "tilecomm", "ops", "pld.system.wait"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("pld.system.wait(")


# ------------------------------------------------------------------ check
HEADER = '''
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIG = pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]]


@pl.jit
def chip(sig: SIG, tag: pl.Scalar[pl.INT32]):
    return step(sig, tag)


@pl.jit.host
def main(out: pl.Out[pl.Tensor[[2, 1], pl.INT32]]):
    buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(pld.window(buf, [2, 1], dtype=pl.INT32), r + 1, device=r)
    return out


if __name__ == "__main__":
    raise SystemExit("the check must not run the file's main block")
'''
CLEAN_STEP = '''
@pl.jit.incore
def step(sig: SIG, tag: pl.Scalar[pl.INT32]):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=tag, op=pld.NotifyOp.Set)
    pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
'''
# TC703: the peer's tag (1 or 2) never reaches 3
WARN_STEP = CLEAN_STEP.replace("expected=1", "expected=3")
# TC204: a signal cell of a FP32 window
ERROR_STEP = CLEAN_STEP.replace("def step(sig: SIG", "def step(sig: pl.InOut[pld.DistributedTensor"
                                "[[2, 1], pl.FP32]]")


def program_file(tmp_path, step, name="prog.py"):
    path = tmp_path / name
    path.write_text(HEADER.replace("\n\n@pl.jit\n", step + "\n\n@pl.jit\n", 1))
    return str(path)


def line_of(path, text):
    return next(i for i, line in enumerate(open(path).read().splitlines(), 1) if text in line)


def test_check_a_clean_file(tmp_path):
    out = run("check", program_file(tmp_path, CLEAN_STEP))
    assert out.exit_code == 0, out.output
    assert "0 error(s), 0 warning(s) (world sizes 2, 3, 4)" in out.output


def test_check_a_file_with_an_error(tmp_path):
    path = program_file(tmp_path, ERROR_STEP)
    out = run("check", path)
    assert out.exit_code == 1
    line = line_of(path, "pld.system.notify(")
    assert re.search(rf"^{re.escape(path)}:{line}:\d+: error\[TC204\]: pld.system.notify target "
                     r"must be an INT32 window", out.output, re.M), out.output


def test_check_a_file_with_a_warning_and_strict(tmp_path):
    path = program_file(tmp_path, WARN_STEP)
    out = run("check", path)
    assert out.exit_code == 0, out.output
    line = line_of(path, "pld.system.wait(")
    assert f"{path}:{line}:5: warning[TC703]: wait for signal cell 'buf'[0, 0] >= 3" in out.output
    assert "  hint: " in out.output
    assert run("check", "--strict", path).exit_code == 1
    assert run("check", "--strict", program_file(tmp_path, CLEAN_STEP, "ok.py")).exit_code == 0


def test_check_json_for_editors(tmp_path):
    path = program_file(tmp_path, WARN_STEP)
    out = run("check", "--format", "json", path)
    assert out.exit_code == 0
    diags = json.loads(out.stdout)
    assert [(d["severity"], d["code"], d["file"], d["line"]) for d in diags] == \
        [("warning", "TC703", path, line_of(path, "pld.system.wait("))]
    assert set(diags[0]) == {"file", "line", "col", "severity", "code", "message", "hint",
                             "program"}
    errs = json.loads(run("check", "--format", "json", program_file(tmp_path, ERROR_STEP,
                                                                    "bad.py")).stdout)
    # the notify, the wait, and the dispatch passing an INT32 window to the FP32 parameter
    assert [d["code"] for d in errs] == ["TC204"] * 3
    assert {d["severity"] for d in errs} == {"error"}


def test_check_world_size_from_the_file_or_the_option(tmp_path):
    """--ranks wins; without it, the world size the file's own
    DistributedConfig spells is the default."""
    path = program_file(tmp_path, CLEAN_STEP)
    out = run("check", "--ranks", "3", path)
    assert "world size 3" in out.output
    with open(path, "a") as f:
        f.write("CFG = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1, 2]))\n")
    assert "world size 3" in run("check", path).output
    assert "world size 2" in run("check", "-n", "2", path).output


def test_check_reports_an_import_failure_at_its_line(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import numpy\n\nx = 1 / 0\n")
    out = run("check", "--format", "json", str(path))
    assert out.exit_code == 1
    (d,) = json.loads(out.stdout)
    assert (d["line"], d["severity"]) == (3, "error") and "ZeroDivisionError" in d["message"]


def test_check_help_says_what_it_runs():
    text = " ".join(run("check", "--help").output.split())
    assert '`if __name__ == "__main__":` block does not run' in text
    assert "one a factory built" in text and "else 2, 3 and 4" in text


def test_doctor_shows_the_build_cache_and_how_to_clear_it(tmp_path, monkeypatch):
    import bad_programs as B
    from tilecomm.runtime import DistributedConfig, RunConfig
    cache = tmp_path / "cache"
    monkeypatch.setenv("TILECOMM_CACHE_DIR", str(cache))
    out = run("doctor")
    assert f"build cache  {cache}: 0 B, 0 program build(s)\n" in out.output   # nothing to clear
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    compiled = B.ok_main.compile(config=cfg)
    # the folder says whose build it is: file, function (a factory's too), ranks, platform
    assert compiled.output_dir.parent == cache / "programs"
    assert re.fullmatch(r"bad_programs\.host_for\.main-2r-cpu-[0-9a-f]{12}",
                        compiled.output_dir.name)
    size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
    assert size > 0
    out = run("doctor").output
    line = next(ln for ln in out.splitlines() if ln.startswith("build cache"))
    assert line.endswith(", 1 program build(s)") and f"{cache}: " in line
    assert f"clear it with rm -rf {cache}" in out
