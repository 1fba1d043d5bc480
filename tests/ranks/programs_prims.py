"""Helpers shared by the per-primitive multi-rank tests.

Programs themselves live in the test modules (module level or factory
functions), because the front end parses their source with ``inspect``."""
from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

try:
    from conftest import WORLD_SIZES, config_for
except ImportError:                         # conftest not importable: same helpers inline
    from tilecomm.runtime import DistributedConfig, RunConfig

    WORLD_SIZES = [1, 2, 3, 4]

    def config_for(n: int, **kw) -> RunConfig:
        return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))), **kw)

import tilecomm.language as pl

BF16 = ml_dtypes.bfloat16

# pl dtype -> numpy dtype, for building inputs and references in the tests
NP_DTYPES = {pl.FP32: np.float32, pl.FP16: np.float16, pl.BF16: BF16, pl.INT32: np.int32,
             pl.INT16: np.int16, pl.INT8: np.int8}


def need_ranks(n: int, k: int, why: str) -> None:
    """Skip a protocol that is only meaningful with at least ``k`` ranks."""
    if n < k:
        pytest.skip(f"needs >= {k} ranks: {why}")


def line_of(kernel, marker: str) -> int:
    """Absolute source line of the statement tagged with ``# <marker>`` in a
    program function, so fault tests can check the reported span."""
    fn = getattr(kernel, "fn", kernel)
    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, f"marker {marker!r} must tag exactly one line of {fn.__name__}"
    return hits[0]


def int_valued(rng, shape, dtype, lo=-8, hi=9):
    """Integer-valued data of any dtype: sums of a few of these are exact in every
    dtype used here, so the order of atomic accumulation cannot matter."""
    return rng.integers(lo, hi, size=shape).astype(np.float32).astype(dtype)


def as_bits(a: np.ndarray) -> np.ndarray:
    """Raw bytes of an array, for bit-exact comparisons (NaN/-0.0 safe)."""
    return np.ascontiguousarray(a).view(np.uint8)
