"""``tilecomm check FILE`` with no options reports every lint finding that
``python FILE`` reports, on every example and tutorial: the two are run
side by side and compared."""
import os
import re
import subprocess
import sys

import pytest

from tilecomm.cli.check import run_check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
FILES = sorted(os.path.relpath(os.path.join(d, f), EXAMPLES)
               for d, _, fs in os.walk(EXAMPLES) if "__pycache__" not in d
               for f in fs if f.endswith(".py") and not f.startswith("test_"))
DEBUGGING = os.path.join("tutorials", "07_debugging.py")
FINDING = re.compile(r"(/\S+?\.py):(\d+):\d+: warning\[(TC\d+)\]")


def findings(text) -> set:
    return {(os.path.realpath(f), int(line), code) for f, line, code in FINDING.findall(text)}


@pytest.mark.slow            # runs every example once (about a minute on two cores)
@pytest.mark.parametrize("name", FILES)
def test_check_reports_what_python_reports(name):
    path = os.path.join(EXAMPLES, name)
    proc = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(path), env=dict(os.environ, PYTHONWARNINGS="default"))
    assert proc.returncode == 0, proc.stderr
    by_python = findings(proc.stderr)
    if name == DEBUGGING:           # its broken protocols are linted when it runs
        assert {code for _, _, code in by_python} == {"TC702", "TC704"}, proc.stderr
    diags, _ = run_check(path, [], {}, "cpu")
    by_check = {(os.path.realpath(d.file), d.line, d.code) for d in diags
                if d.severity == "warning"}
    assert by_python <= by_check, f"check misses {sorted(by_python - by_check)}"
    assert not [d for d in diags if d.severity == "error"]


def test_the_comparison_sees_a_finding_python_reports():
    """The tutorial on debugging reports lint findings when run: the
    comparison above is not comparing two empty sets everywhere."""
    path = os.path.join(EXAMPLES, "tutorials", "07_debugging.py")
    diags, sizes = run_check(path, [], {}, "cpu")
    with open(path) as f:
        src = f.read().splitlines()
    line_of = {code: next(i for i, t in enumerate(src, 1) if needle in t) for code, needle in
               (("TC704", "pld.system.notify(sig, peer=1"),
                ("TC702", "pld.system.wait(sig, offsets=[0, 0], expected=k"))}
    assert {(d.code, d.line) for d in diags if d.severity == "warning"} == \
        set(line_of.items())
    assert sizes == [2, 3, 4]
