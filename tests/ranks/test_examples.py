"""Every example -- examples/*.py and the tutorials, examples/tutorials/*.py,
which the documentation site includes -- runs as a real program at several
world sizes and prints OK, and is race-free at 2, 3 and 4 ranks: run with the
race check on, none raises DataRaceError (but the example that demonstrates
the report, which asserts its own)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TUTORIALS = "tutorials"


def _scripts(folder) -> list:
    return sorted(f for f in os.listdir(os.path.join(ROOT, "examples", folder))
                  if f.endswith(".py"))


# paths under examples/, tutorials after the examples
EXAMPLES = _scripts("") + [f"{TUTORIALS}/{f}" for f in _scripts(TUTORIALS)]
FIXED = {"set_handshake.py": [2]}        # the seed's handshake is a 2-rank protocol
RACY = "race_report.py"                 # demonstrates a race report (and asserts it)


def sizes(example) -> list:
    return FIXED.get(example, [1, 2, 3, 4] if "dynamic" in example else [2, 3])


def run_example(example, n, env=None):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", example),
                           "--ranks", str(n)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "OK", proc.stdout


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_prints_ok(example):
    for n in sizes(example):
        run_example(example, n)


def race_sizes(example) -> list:
    """2, 3 and 4 ranks (an example fixed to some sizes: those)."""
    return FIXED.get(example, [2, 3, 4])


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e != RACY])
def test_example_is_race_free(example):
    for n in race_sizes(example):
        run_example(example, n, {"TILECOMM_DETECT_RACES": "1"})
