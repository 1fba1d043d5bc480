"""What the benchmarks print: one markdown table row per figure, and progress
lines on stderr (shared by the scripts of this folder)."""
import sys
from dataclasses import dataclass


@dataclass
class Row:
    figure: str
    measured: str
    anchor: str
    target: str
    result: str


def fmt_us(s: float) -> str:
    us = s * 1e6
    return f"{us:.2f} µs" if us < 10 else f"{us:.1f} µs" if us < 1000 else f"{us / 1000:.2f} ms"


def log(msg: str) -> None:
    print(f"  .. {msg}", file=sys.stderr, flush=True)
