"""RunConfig ring sizing fields: accepted forms and the typed error."""
import pytest

from tilecomm.errors import ConfigError
from tilecomm.runtime import RunConfig


@pytest.mark.parametrize("field", ["ring_task_window", "ring_heap", "ring_dep_pool"])
@pytest.mark.parametrize("value, kept", [(None, None), (1, 1), (4096, 4096),
                                         ([8, 4, 2, 1], (8, 4, 2, 1)),
                                         ((1, 1, 1, 1), (1, 1, 1, 1))])
def test_ring_fields_accept_a_positive_int_or_four(field, value, kept):
    assert getattr(RunConfig(**{field: value}), field) == kept


@pytest.mark.parametrize("field", ["ring_task_window", "ring_heap", "ring_dep_pool"])
@pytest.mark.parametrize("value", [0, -1, True, 2.0, [1, 2, 3], [1, 2, 3, 0], "8", [1, 2, 3, 4, 5]])
def test_ring_fields_refuse_anything_else(field, value):
    with pytest.raises(ConfigError, match=rf"RunConfig\.{field} must be a positive int or a list "
                                          rf"of 4 positive ints") as ei:
        RunConfig(**{field: value})
    assert ei.value.code == "TC402"


def test_the_task_window_is_the_first_level_of_a_list():
    assert RunConfig(ring_task_window=[16, 1, 1, 1]).resolved_task_window() == 16
    assert RunConfig(ring_task_window=3).resolved_task_window() == 3
    assert RunConfig().resolved_task_window() is None


def test_ring_configs_stay_hashable():
    # compiled programs are cached per RunConfig
    assert hash(RunConfig(ring_heap=[1, 2, 3, 4])) == hash(RunConfig(ring_heap=(1, 2, 3, 4)))
