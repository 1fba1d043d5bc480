"""The run-artefact (DFX) fields of RunConfig: defaults, normalisation,
the deprecated name, and every rejection with its code and the user's line."""
import inspect
import warnings

import pytest

from tilecomm.errors import ConfigError
from tilecomm.runtime import RunConfig


def test_defaults_write_nothing():
    rc = RunConfig()
    assert (rc.enable_chip_swimlane, rc.enable_dump_args, rc.enable_pmu) == (0, 0, 0)
    assert rc.enable_dep_gen is False and rc.enable_scope_stats is False
    assert rc.dfx_enabled is False


@pytest.mark.parametrize("given,level", [(True, 4), (False, 0), (0, 0), (1, 1), (3, 3), (4, 4)])
def test_swimlane_levels_and_bools(given, level):
    rc = RunConfig(enable_chip_swimlane=given)
    assert rc.enable_chip_swimlane == level and type(rc.enable_chip_swimlane) is int
    assert rc.dfx_enabled is (level > 0)


@pytest.mark.parametrize("kw", [dict(enable_dep_gen=True), dict(enable_scope_stats=True),
                                dict(enable_dump_args=2), dict(enable_dump_args=1),
                                dict(enable_chip_swimlane=2)])
def test_each_flag_enables_artefacts(kw):
    assert RunConfig(**kw).dfx_enabled


def test_deprecated_swimlane_name_warns_and_maps():
    with pytest.warns(DeprecationWarning, match="enable_l2_swimlane is deprecated"):
        rc = RunConfig(enable_l2_swimlane=2)
    assert rc.enable_chip_swimlane == 2 and rc.enable_l2_swimlane is None
    with pytest.warns(DeprecationWarning):
        assert RunConfig(enable_l2_swimlane=True).enable_chip_swimlane == 4


def test_deprecated_name_contradicting_the_new_one_is_rejected():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ConfigError) as ei:
            RunConfig(enable_chip_swimlane=1, enable_l2_swimlane=3)
    assert ei.value.code == "TC440" and "contradicts" in ei.value.message


BAD = [
    (dict(enable_chip_swimlane=5), "TC440", "enable_chip_swimlane must be an int in [0, 4]"),
    (dict(enable_chip_swimlane=-1), "TC440", "got -1"),
    (dict(enable_chip_swimlane="4"), "TC440", "got '4'"),
    (dict(enable_chip_swimlane=2.0), "TC440", "got 2.0"),
    (dict(enable_dump_args=3), "TC440", "enable_dump_args must be 0, 1 or 2, got 3"),
    (dict(enable_dump_args=True), "TC440", "got True"),
    (dict(enable_pmu=2), "TC441", "no AICore PMU counters"),
    (dict(enable_pmu=-1), "TC440", "enable_pmu must be a non-negative int"),
    (dict(enable_pmu=None), "TC440", "got None"),
    (dict(enable_dep_gen="yes"), "TC440", "enable_dep_gen must be a bool"),
    (dict(enable_scope_stats=2), "TC440", "enable_scope_stats must be a bool"),
]


@pytest.mark.parametrize("kw,code,needle", BAD, ids=[f"{k}" for k, _, _ in BAD])
def test_bad_dfx_fields_are_located_typed_errors(kw, code, needle):
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(ConfigError) as ei:
        RunConfig(**kw)
    e = ei.value
    assert isinstance(e, ValueError) and e.code == code
    assert needle in e.message, e.message
    # the error points at the RunConfig(...) call in the user's file
    assert e.span is not None and e.span.file == __file__ and e.span.line == line
    assert str(e).startswith(f"{__file__}:{line}:")


def test_config_validation_passes_a_good_combination_through():
    rc = RunConfig(enable_chip_swimlane=True, enable_dump_args=2, enable_dep_gen=1,
                   enable_scope_stats=True, enable_pmu=0)
    assert (rc.enable_chip_swimlane, rc.enable_dump_args, rc.enable_dep_gen) == (4, 2, True)
