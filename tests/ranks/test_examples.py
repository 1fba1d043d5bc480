"""Every example runs as a real program at several world sizes and prints OK."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(f for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".py"))
FIXED = {"set_handshake.py": [2]}        # the seed's handshake is a 2-rank protocol


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_prints_ok(example):
    for n in FIXED.get(example, [1, 2, 3, 4] if "dynamic" in example else [2, 3]):
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", example),
                               "--ranks", str(n)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.strip().splitlines()[-1] == "OK", proc.stdout
