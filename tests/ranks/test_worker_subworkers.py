"""HOST SubWorkers: a real Python body or a bound callback, run in the
controller between dispatches, after the dispatches that produce its inputs."""
import numpy as np
import pytest

import tilecomm
from tilecomm.errors import ConfigError
from tilecomm.runtime import runs_host_code
from conftest import WORLD_SIZES, config_for
from worker_programs import TwoEntries, WithSubWorkers


def _compile(n):
    return tilecomm.ir.compile(WithSubWorkers, distributed_config=config_for(n).distributed_config)


def _tensors(n, seed=0):
    xs = np.random.default_rng(seed).integers(-9, 9, size=(n, 1, 8)).astype(np.float32)
    return xs, np.zeros_like(xs), np.zeros_like(xs), np.zeros_like(xs)


def test_declared_sub_workers_and_which_need_a_callback():
    c = _compile(2)
    assert sorted(c.sub_workers) == ["inspect", "total"]
    assert not c.sub_workers["total"].requires_runtime_binding
    assert c.sub_workers["inspect"].requires_runtime_binding
    assert c.num_sub_workers == 2


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_body_and_callback_run_after_their_producers(n):
    c = _compile(n)
    seen = []
    with c.prepare(callbacks={"inspect": lambda args: seen.append(np.array(args[0]))}) as rt:
        for seed in range(2):
            xs, mid, summed, ys = _tensors(n, seed)
            rt(xs, mid, summed, ys)
            total = np.broadcast_to((2 * xs).sum(axis=0), xs.shape)
            np.testing.assert_array_equal(mid, 2 * xs)          # the ranks' first dispatch
            np.testing.assert_array_equal(summed, total)         # the SubWorker's body
            if runs_host_code():                                 # the callback saw it
                np.testing.assert_array_equal(seen[-1], total)
            np.testing.assert_array_equal(ys, 2 * total)         # dispatches after it read it
    assert len(seen) == (2 if runs_host_code() else 0)           # once per call in the job


def test_a_callback_replaces_a_concrete_body():
    n = 2
    c = _compile(n)

    def total(args):
        doubled, out = args
        out[:] = -1.0                    # the replacement's own result
    with c.prepare(callbacks={"total": total, "inspect": lambda args: None}) as rt:
        xs, mid, summed, ys = _tensors(n)
        rt(xs, mid, summed, ys)
        np.testing.assert_array_equal(ys, np.full_like(ys, -2.0))


def test_an_unbound_abstract_sub_worker_is_refused_at_prepare_and_one_shot():
    c = _compile(2)
    with pytest.raises(ValueError, match=r"\['inspect'\] are runtime-bound callbacks .* "
                                         r"callbacks=") as ei:
        c.prepare()
    assert ei.value.code == "TC425"
    with pytest.raises(ConfigError, match="runtime-bound") as ei:
        c(*_tensors(2))
    assert ei.value.code == "TC425"


def test_callback_names_and_signatures_are_checked():
    c = _compile(2)
    with pytest.raises(ValueError, match=r"\['nope'\] are not sub-workers of this program\. "
                                         r"Available sub-workers: \['inspect', 'total'\]") as ei:
        c.prepare(callbacks={"inspect": print, "nope": print})
    assert ei.value.code == "TC423"
    with pytest.raises(TypeError, match="must accept a single positional argument"):
        c.prepare(callbacks={"inspect": lambda a, b: None})
    with pytest.warns(DeprecationWarning):
        c.prepare(sub_worker_overrides={"inspect": lambda args: None}).close()
    other = tilecomm.ir.compile(TwoEntries, distributed_config=config_for(2).distributed_config)
    with pytest.raises(ValueError, match="not sub-workers of any prepared program"):
        other.prepare(callbacks={"inspect": print})


def test_an_exception_in_a_callback_fails_the_call_and_the_worker_recovers():
    n = 2
    c = _compile(n)
    calls = []

    def inspect(args):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("callback refused")
    with c.prepare(callbacks={"inspect": inspect}) as rt:
        with pytest.raises(RuntimeError, match="callback refused"):
            rt(*_tensors(n))
        xs, mid, summed, ys = _tensors(n)
        rt(xs, mid, summed, ys)
        np.testing.assert_array_equal(ys, 2 * np.broadcast_to((2 * xs).sum(axis=0), xs.shape))
