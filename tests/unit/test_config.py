"""RunConfig / DistributedConfig: defaults, validation, immutability, platform profiles."""
import dataclasses
import math

import numpy as np
import pytest

import bad_programs as B
import tilecomm
import tilecomm.language as pl
from tilecomm.errors import ConfigError, UserError
from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.runtime import config as config_mod
from tilecomm.runtime.config import CPU_CORES


# ------------------------------------------------------------------ DistributedConfig
def test_distributed_config_defaults():
    dc = DistributedConfig()
    assert dc.device_ids == (0,) and dc.world_size == 1
    assert dc.num_sub_workers == 0 and dc.aicpu_thread_num == 0
    assert dc.runtime == "tensormap_and_ringbuffer"


@pytest.mark.parametrize("ids", [[0], [0, 1, 2, 3], [3, 5], [7, 2, 4], range(3), (1, 0)])
def test_device_ids_any_distinct_non_negative_order(ids):
    dc = DistributedConfig(device_ids=ids)
    assert dc.device_ids == tuple(ids)
    assert dc.world_size == len(tuple(ids))


def test_device_ids_are_copied():
    ids = [0, 1]
    dc = DistributedConfig(device_ids=ids)
    ids.append(2)
    assert dc.device_ids == (0, 1) and dc.world_size == 2


@pytest.mark.parametrize("ids,needles", [
    ([], ["must not be empty"]),
    ([0, -1], ["non-negative", "[0, -1]"]),
    ([0, 1, 0], ["distinct", "[0, 1, 0]"]),
    ([0, "1"], ["non-negative device indices"]),
    ([0, 1.0], ["non-negative device indices"]),
    ([True, 2], ["non-negative device indices"]),
    (2, ["list of device indices", "got 2"]),
    (None, ["list of device indices", "got None"]),
])
def test_device_ids_rejected(ids, needles):
    with pytest.raises(ConfigError) as ei:
        DistributedConfig(device_ids=ids)
    e = ei.value
    assert isinstance(e, ValueError) and isinstance(e, UserError)
    assert e.code == "TC401"
    for n in needles:
        assert n in e.message, e.message


@pytest.mark.parametrize("kw,needle", [
    (dict(num_sub_workers=-1), "num_sub_workers must be non-negative, got -1"),
    (dict(aicpu_thread_num=1), "aicpu_thread_num must be 0 (architecture default) or at least 2"),
    (dict(aicpu_thread_num=-2), "got -2"),
])
def test_distributed_config_other_fields_rejected(kw, needle):
    with pytest.raises(ConfigError) as ei:
        DistributedConfig(device_ids=[0], **kw)
    assert ei.value.code == "TC401" and needle in ei.value.message


@pytest.mark.parametrize("kw", [dict(aicpu_thread_num=0), dict(aicpu_thread_num=2),
                                dict(num_sub_workers=3)])
def test_distributed_config_other_fields_accepted(kw):
    dc = DistributedConfig(device_ids=[0], **kw)
    default = DistributedConfig(device_ids=[0])
    for k, v in kw.items():
        assert getattr(dc, k) == v
    # the value is part of the configuration: it distinguishes configs unless it is the default
    assert (dc == default) == all(getattr(default, k) == v for k, v in kw.items())
    assert dc.world_size == 1 and dc.device_ids == (0,)
    assert RunConfig(distributed_config=dc).dist is dc


def test_distributed_config_is_frozen_and_hashable():
    dc = DistributedConfig(device_ids=[0, 1])
    with pytest.raises(dataclasses.FrozenInstanceError):
        dc.device_ids = (0,)
    assert dc == DistributedConfig(device_ids=(0, 1))
    assert hash(dc) == hash(DistributedConfig(device_ids=[0, 1]))
    assert dc != DistributedConfig(device_ids=[1, 0])


# ------------------------------------------------------------------ RunConfig
def test_run_config_defaults():
    rc = RunConfig()
    assert rc.platform == "cpu"
    assert rc.distributed_config is None
    assert rc.dist == DistributedConfig() and rc.dist.world_size == 1
    assert rc.deadlock_timeout_s > 0 and rc.wait_timeout_s == 0 and rc.spin_iters >= 0
    assert rc.platform_profile is config_mod.PLATFORMS["cpu"]


def test_run_config_is_frozen_and_hashable():
    rc = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    for field, value in (("platform", "a5"), ("deadlock_timeout_s", 9.0),
                         ("distributed_config", None)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(rc, field, value)
    same = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    assert rc == same and hash(rc) == hash(same)
    assert {rc: 1}[same] == 1
    assert rc != RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1, 2]))
    assert rc != dataclasses.replace(rc, platform="a5")


def test_replace_revalidates():
    rc = RunConfig()
    with pytest.raises(ConfigError):
        dataclasses.replace(rc, platform="gpu")
    with pytest.raises(ConfigError):
        dataclasses.replace(rc, deadlock_timeout_s=0)


@pytest.mark.parametrize("kw,field", [
    (dict(platform="gpu"), "platform"),
    (dict(platform=None), "platform"),
    (dict(platform="A5"), "platform"),
    (dict(distributed_config=[0, 1]), "distributed_config"),
    (dict(deadlock_timeout_s=0), "deadlock_timeout_s"),
    (dict(deadlock_timeout_s=-1.0), "deadlock_timeout_s"),
    (dict(deadlock_timeout_s=math.nan), "deadlock_timeout_s"),
    (dict(deadlock_timeout_s="1"), "deadlock_timeout_s"),
    (dict(wait_timeout_s=-0.5), "wait_timeout_s"),
    (dict(wait_timeout_s=math.nan), "wait_timeout_s"),
    (dict(wait_timeout_s=None), "wait_timeout_s"),
    (dict(spin_iters=-1), "spin_iters"),
    (dict(spin_iters=1.5), "spin_iters"),
    (dict(spin_iters=True), "spin_iters"),
    (dict(cores=0), "cores"),
    (dict(cores=2.0), "cores"),
    (dict(cores=True), "cores"),
    (dict(cores=100000), "cores"),
    (dict(platform="a2a3", cores=4), "cores"),
])
def test_run_config_rejected(kw, field):
    with pytest.raises(ConfigError) as ei:
        RunConfig(**kw)
    e = ei.value
    assert isinstance(e, ValueError) and e.code == "TC402"
    assert f"RunConfig.{field}" in e.message, e.message
    value = next(iter(kw.values()))
    if field != "distributed_config":
        assert repr(value) in e.message, e.message          # says what it got


@pytest.mark.parametrize("kw", [dict(deadlock_timeout_s=0.05), dict(deadlock_timeout_s=60),
                                dict(wait_timeout_s=0), dict(wait_timeout_s=2.5),
                                dict(spin_iters=0), dict(spin_iters=10 ** 6)])
def test_run_config_accepted(kw):
    rc = RunConfig(**kw)
    for k, v in kw.items():
        assert getattr(rc, k) == v


@pytest.mark.parametrize("kw,cores", [
    (dict(), CPU_CORES), (dict(cores=1), 1), (dict(cores=7), 7),
    (dict(platform="a2a3"), 48), (dict(platform="a5sim"), 36),
    (dict(platform="a5", cores=36), 36)])
def test_scheduler_cores(kw, cores):
    """Cores of each rank's scheduler: the chip profile's AIV count, or the
    RunConfig value (cpu only; default CPU_CORES)."""
    assert RunConfig(**kw).resolved_cores() == cores


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("TILECOMM_CACHE_DIR", raising=False)
    assert RunConfig(cache_dir=str(tmp_path)).resolved_cache_dir() == str(tmp_path)
    monkeypatch.setenv("TILECOMM_CACHE_DIR", str(tmp_path / "env"))
    assert RunConfig().resolved_cache_dir() == str(tmp_path / "env")
    # an explicit field wins over the environment
    assert RunConfig(cache_dir=str(tmp_path)).resolved_cache_dir() == str(tmp_path)


# ------------------------------------------------------------------ platform profiles
def test_platform_profiles():
    P = config_mod.PLATFORMS
    assert set(P) == {"cpu", "a2a3", "a2a3sim", "a5", "a5sim"}
    for name, prof in P.items():
        assert prof.name == name
        with pytest.raises(dataclasses.FrozenInstanceError):
            prof.bf16_atomic_add = not prof.bf16_atomic_add
    # bf16 atomic add exists only on the A2/A3 (910B) chips; the simulators match their chip
    assert P["a2a3"].bf16_atomic_add and P["a2a3sim"].bf16_atomic_add
    assert not P["a5"].bf16_atomic_add and not P["a5sim"].bf16_atomic_add
    assert P["cpu"].bf16_atomic_add
    # AIV core counts of the backends: 48 on 910B, 36 on 950
    assert P["a2a3"].aiv_cores == P["a2a3sim"].aiv_cores == 48
    assert P["a5"].aiv_cores == P["a5sim"].aiv_cores == 36


@pytest.mark.parametrize("name", ["cpu", "a2a3", "a2a3sim", "a5", "a5sim"])
def test_platform_profile_property(name):
    assert RunConfig(platform=name).platform_profile is config_mod.PLATFORMS[name]


def _args():
    return (np.ones((B.W, B.R, B.C), np.float32), np.zeros((B.W, B.R, B.C), np.float32))


def test_two_configs_live_in_one_process():
    """Compiling for one platform leaves no state behind that affects another."""
    main = B.host_for(B.k_atomic_bf16, pl.BF16)
    dc = DistributedConfig(device_ids=list(range(B.W)))
    a2a3, a5 = RunConfig(platform="a2a3", distributed_config=dc), \
        RunConfig(platform="a5", distributed_config=dc)
    assert main.compile(*_args(), config=a2a3) is main.compile(config=a2a3)   # cached per config
    with pytest.raises(UserError) as ei:
        main.compile(*_args(), config=a5)
    assert ei.value.code == "TC215"
    main.compile(*_args(), config=a2a3)                      # still fine afterwards
    with pytest.raises(UserError):
        main.compile(*_args(), config=a5)                    # and still rejected


def test_compile_entry_point_validates_its_options():
    with pytest.raises(ConfigError) as ei:
        tilecomm.ir.compile(B.ok_main, platform="gpu")
    assert ei.value.code == "TC402"
    with pytest.raises(ConfigError) as ei:
        tilecomm.ir.compile(B.ok_main, distributed_config=DistributedConfig(device_ids=[]))
    assert ei.value.code == "TC401"


def test_compile_entry_point_applies_its_options():
    cp = tilecomm.ir.compile(B.ok_main, platform="a5",
                             distributed_config=DistributedConfig(device_ids=[4, 9]))
    assert cp.config.platform == "a5" and cp.config.dist.device_ids == (4, 9)
    assert cp.world == 2


def test_config_must_be_a_run_config():
    with pytest.raises(TypeError):
        B.ok_main.compile(config={"platform": "cpu"})


def test_a_call_reads_the_checker_variables_as_the_environment_holds_them_now(monkeypatch):
    """``RunConfig.checks`` follows every change of ``os.environ`` (set,
    changed, removed), and reads a stand-in ``os.environ`` without CPython's
    byte-keyed store through its ``get``."""
    import os
    from tilecomm.runtime.config import RunConfig
    for name in ("TILECOMM_DETECT_RACES", "TILECOMM_POISON_WINDOWS", "TILECOMM_TRACE"):
        monkeypatch.delenv(name, raising=False)
    cfg = RunConfig()
    assert cfg.checks() == (False, False, None)
    monkeypatch.setenv("TILECOMM_DETECT_RACES", "1")
    monkeypatch.setenv("TILECOMM_TRACE", "/tmp/traces-\u00e9")
    assert cfg.checks() == (True, False, "/tmp/traces-\u00e9")
    monkeypatch.setenv("TILECOMM_DETECT_RACES", "0")
    monkeypatch.setenv("TILECOMM_POISON_WINDOWS", "1")
    assert cfg.checks() == (False, True, "/tmp/traces-\u00e9")
    monkeypatch.delenv("TILECOMM_TRACE")
    assert cfg.checks() == (False, True, None)
    monkeypatch.setenv("TILECOMM_POISON_WINDOWS", "yes")
    with pytest.raises(ConfigError) as e:
        cfg.checks()
    assert e.value.code == "TC402" and "TILECOMM_POISON_WINDOWS" in str(e.value)
    monkeypatch.setattr(os, "environ", {"TILECOMM_DETECT_RACES": "1"})
    assert cfg.checks() == (True, False, None)
