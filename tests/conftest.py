"""Shared fixtures: world sizes, run configs, and a leak check around every test."""
import os

import pytest

from tilecomm.runtime import DistributedConfig, RunConfig

WORLD_SIZES = [1, 2, 3, 4]


def config_for(n: int, **kw) -> RunConfig:
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))), **kw)


def _shm_names():
    try:
        return {f for f in os.listdir("/dev/shm") if f.startswith(f"tilecomm-{os.getpid()}-")}
    except FileNotFoundError:
        return set()


def _children():
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            return set(f.read().split())
    except OSError:
        return set()


@pytest.fixture(autouse=True)
def no_leaks():
    """Every test must leave no worker process and no shared segment behind."""
    before_shm, before_kids = _shm_names(), _children()
    yield
    assert _shm_names() - before_shm == set(), "shared-memory segments leaked"
    assert _children() - before_kids == set(), "worker processes leaked"
