"""Lowering produces readable Python kept on disk, mapped back to user lines."""
import linecache
import os

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig


@pl.jit.incore
def ping(out: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
         sig: pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]],
         peer: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 4], pl.FP32]:
    pld.system.notify(sig, peer, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)  # L:notify
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Ge)
    t = pl.tile.full([1, 4], pl.FP32, 2.0)
    out = pl.store(t, [0, 0], out)
    return out


@pl.jit
def chip(out: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
         sig: pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]], peer: pl.Scalar[pl.INT32]):
    return ping(out, sig, peer)


@pl.jit.host
def main(outs: pl.Out[pl.Tensor[[2, 1, 4], pl.FP32]]):
    sig_buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(outs[r], pld.window(sig_buf, [2, 1], dtype=pl.INT32), 1 - r, device=r)
    return outs


def _config(tmp_path):
    return RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]),
                     cache_dir=str(tmp_path))


def test_lowered_source_is_on_disk_and_readable(tmp_path):
    outs = np.zeros((2, 1, 4), np.float32)
    low = main.compile(outs, config=_config(tmp_path)).lowered(outs)
    assert low.filename.startswith(str(tmp_path))
    with open(low.filename) as f:
        text = f.read()
    assert text == low.source
    for fn in ("def f_main(_rt, outs)", "def f_chip(_rt", "def f_ping(_rt"):
        assert fn in text
    assert "_rt.notify(" in text and "_rt.wait(" in text and "_rt.dispatch('chip'" in text


def test_every_generated_statement_maps_to_a_user_line(tmp_path):
    outs = np.zeros((2, 1, 4), np.float32)
    low = main.compile(outs, config=_config(tmp_path)).lowered(outs)
    here = os.path.abspath(__file__)
    notify_line = next(i for i, l in enumerate(open(here), 1) if "# L:notify" in l)
    gen_lines = low.source.splitlines()
    mapped = {no: sp for no, sp in low.linemap.items() if "_rt.notify(" in gen_lines[no - 1]}
    assert len(mapped) == 1
    (span,) = mapped.values()
    assert (span.file, span.line, span.func) == (here, notify_line, "ping")
    assert "pld.system.notify" in linecache.getline(span.file, span.line)


def test_compiled_program_runs_and_is_cached(tmp_path):
    outs = np.zeros((2, 1, 4), np.float32)
    cp = main.compile(outs, config=_config(tmp_path))
    assert cp.specialise((outs,)) is cp.specialise((np.ones((2, 1, 4), np.float32),))
    cp(outs)
    np.testing.assert_array_equal(outs, np.full((2, 1, 4), 2.0, np.float32))
