"""The ``tilecomm`` command: --help, ``doctor`` against what the machine
reports, ``ops`` against the registry, and ``python -m tilecomm``."""
import os
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
