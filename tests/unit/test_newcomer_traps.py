"""Mistakes a new user makes that would otherwise run and answer wrongly: each
is an error at the user's line before any rank starts (the firing cases are
in test_compile_errors' table), and its near miss runs and answers right."""
import numpy as np
import pytest

import bad_programs as B
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

XS, YS, R, C, W = B.XS, B.YS, B.R, B.C, B.W


def config(world=W):
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(world))))


def inputs(world=W):
    xs = np.arange(world * R * C, dtype=np.float32).reshape(world, R, C) + 1
    return xs, np.zeros_like(xs)


# ---------------------------------------------------------------- device= left out
@pl.jit.host
def comm_less_outside_a_rank_loop(xs: XS, ys: YS):
    # round-robin placement is what a comm-less dispatch asks for
    B.plain_chip(xs[0], ys[0])
    B.plain_chip(xs[1], ys[1])
    return ys


@pl.jit.host
def comm_less_in_a_loop_over_chunks(xs: XS, ys: YS):
    # a loop over data chunks (not pl.range(pld.world_size())) may go round-robin
    for i in pl.range(W):
        B.plain_chip(xs[i], ys[i])
    return ys


@pl.jit.host
def rank_loop_with_device(xs: XS, ys: YS):
    for r in pl.range(pld.world_size()):
        B.plain_chip(xs[r], ys[r], device=r)
    return ys


@pytest.mark.parametrize("main", [comm_less_outside_a_rank_loop,
                                  comm_less_in_a_loop_over_chunks, rank_loop_with_device])
def test_dispatches_without_windows_or_with_device_run(main):
    xs, ys = inputs()
    main(xs, ys, config=config())
    np.testing.assert_array_equal(ys, xs)


# ---------------------------------------------------------------- a HOST input where the chip writes
@pl.jit.host
def written_host_param_is_out(xs: XS, ys: YS):
    for r in pl.range(pld.world_size()):
        B.plain_chip(xs[r], ys[r], device=r)
    return ys


@pl.jit.host
def written_host_param_is_inout(xs: XS, acc: pl.InOut[XS]):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        B.inout_chip(xs[r], acc[r], pld.window(wbuf, [R, C], dtype=pl.FP32), device=r)
    return acc


def test_written_host_parameters_get_the_results():
    xs, ys = inputs()
    written_host_param_is_out(xs, ys, config=config())
    np.testing.assert_array_equal(ys, xs)
    acc = np.ones_like(xs)
    written_host_param_is_inout(xs, acc, config=config())
    np.testing.assert_array_equal(acc, xs + 1)
