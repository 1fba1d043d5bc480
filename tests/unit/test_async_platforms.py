"""Asynchronous puts and the chip profiles: upstream runs a kernel that
builds a DMA session only on a2a3 hardware (its simulators and a5 refuse it
when the program is registered), so the a2a3sim, a5 and a5sim profiles
refuse it at compile time (TC215) at the session's line; cpu and a2a3 run
it."""
import os

import numpy as np
import pytest

import programs_async_unit as P
from tilecomm.errors import ProgramValueError
from tilecomm.runtime import DistributedConfig, RunConfig


def cfg(platform):
    return RunConfig(platform=platform, distributed_config=DistributedConfig(device_ids=[0, 1]))


def args():
    return np.ones((2, 1, P.S), np.float32), np.zeros((2, 2, P.S), np.float32)


@pytest.mark.parametrize("platform", ["a2a3sim", "a5", "a5sim"])
def test_profiles_without_the_dma_engine_refuse_a_session(platform):
    with pytest.raises(ProgramValueError) as ei:
        P.ring.compile(*args(), config=cfg(platform))
    e = ei.value
    assert e.code == "TC215" and f"'{platform}'" in e.message and "DMA engine" in e.message
    assert os.path.basename(e.span.file) == "programs_async_unit.py"
    assert e.line == P.SESSION_LINE


@pytest.mark.parametrize("platform", ["cpu", "a2a3"])
def test_cpu_and_a2a3_compile_it(platform):
    P.ring.compile(*args(), config=cfg(platform))
