"""Static rules of the pld.tensor.* collectives, compiled without running ranks.

* Every signal shape and operand form a path allows compiles, at several world
  sizes (kernel composites and HOST builtins, explicit device subsets, HOST
  loops with explicit signals).
* The chip profiles' limits of the HOST builtins are errors there (TC215)
  and lifted under platform="cpu", which honours them: both directions.
* The rules the one-line programs of the compile-error table cannot reach
  (kernels with other operand shapes, a HOST parameter, all_to_all_v's
  operand list) are checked here the same way: code, line, column, message.
"""
import inspect
import os

import numpy as np
import pytest

import bad_programs as B
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from test_compile_errors import VALUE, TYPE, check_location, check_message, compile_error
from tilecomm.errors import UserError
from tilecomm.runtime import DistributedConfig, RunConfig

C = 8
SUM, MAX = pld.ReduceOp.Sum, pld.ReduceOp.Max
CHIPS = ("a2a3", "a5")
AIV = {"a2a3": 48, "a5": 36}


def cfg(world, platform="cpu"):
    return RunConfig(platform=platform,
                     distributed_config=DistributedConfig(device_ids=list(range(world))))


def xs_for(world):
    return (np.zeros((world, C), np.float32),)


@pytest.fixture(autouse=True)
def no_fork(monkeypatch):
    """Everything here is compiled, never run."""

    def forbidden():
        raise AssertionError("a process was forked although nothing should run")

    monkeypatch.setattr(os, "fork", forbidden)


def compiles(main, world, platform="cpu"):
    main.compile(*getattr(main, "args", xs_for(world)), config=cfg(world, platform))


def rejected(main, world, platform) -> UserError:
    with pytest.raises(UserError) as ei:
        compiles(main, world, platform)
    return ei.value


# ------------------------------------------------------------------ HOST builtins
def host_allreduce(n, sig, *, core_num=1, mode="mesh", dt=pl.FP32, op=SUM, size=C):
    @pl.jit.host
    def main(xs: pl.Tensor[[n, C], pl.FP32]):
        wbuf = pld.alloc_window_buffer([1, size], dtype=dt)
        sbuf = pld.alloc_window_buffer(sig, dtype=pl.INT32)
        pld.tensor.allreduce(pld.window(wbuf, [1, size], dtype=dt),
                             pld.window(sbuf, sig, dtype=pl.INT32), op=op, mode=mode,
                             core_num=core_num)
        return xs

    return main


def host_synthesized(n, *, core_num=1):
    @pl.jit.host
    def main(xs: pl.Tensor[[n, C], pl.FP32]):
        wbuf = pld.alloc_window_buffer([1, C], dtype=pl.FP32)
        w = pld.tensor.allreduce(pld.window(wbuf, [1, C], dtype=pl.FP32), core_num=core_num)
        return xs

    return main


def host_movement(n, sig, *, dt=pl.FP32, root=0, rounds=1):
    """barrier, broadcast, reduce_scatter, allgather and all_to_all on one signal,
    ``rounds`` times in a HOST loop."""

    @pl.jit.host
    def main(xs: pl.Tensor[[n, C], pl.FP32]):
        data = pld.alloc_window_buffer([1, C], dtype=dt)
        rows = pld.alloc_window_buffer([n, C], dtype=dt)
        table = pld.alloc_window_buffer([n, C], dtype=dt)
        sbuf = pld.alloc_window_buffer([n], dtype=pl.INT32)
        wide = pld.alloc_window_buffer(sig, dtype=pl.INT32)
        for i in pl.range(rounds):
            s = pld.tensor.barrier(pld.window(sbuf, [n], dtype=pl.INT32))
            pld.tensor.broadcast(pld.window(data, [1, C], dtype=dt), s, root=root)
            pld.tensor.reduce_scatter(pld.window(rows, [n, C], dtype=dt), s)
            pld.tensor.allgather(pld.window(data, [1, C], dtype=dt),
                                 pld.window(table, [n, C], dtype=dt),
                                 pld.window(wide, sig, dtype=pl.INT32))
            pld.tensor.all_to_all(pld.window(rows, [n, C], dtype=dt),
                                  pld.window(table, [n, C], dtype=dt),
                                  pld.window(wide, sig, dtype=pl.INT32))
        return xs

    return main


def host_one(n, which, *, dt=pl.FP32):
    """One HOST data-moving builtin on ``dt`` data."""

    if which == "broadcast":
        @pl.jit.host
        def main(xs: pl.Tensor[[n, C], pl.FP32]):
            data = pld.alloc_window_buffer([1, C], dtype=dt)
            sbuf = pld.alloc_window_buffer([n], dtype=pl.INT32)
            pld.tensor.broadcast(pld.window(data, [1, C], dtype=dt),
                                 pld.window(sbuf, [n], dtype=pl.INT32), root=0)
            return xs
    elif which == "reduce_scatter":
        @pl.jit.host
        def main(xs: pl.Tensor[[n, C], pl.FP32]):
            rows = pld.alloc_window_buffer([n, C], dtype=dt)
            sbuf = pld.alloc_window_buffer([n], dtype=pl.INT32)
            pld.tensor.reduce_scatter(pld.window(rows, [n, C], dtype=dt),
                                      pld.window(sbuf, [n], dtype=pl.INT32))
            return xs
    elif which == "allgather":
        @pl.jit.host
        def main(xs: pl.Tensor[[n, C], pl.FP32]):
            data = pld.alloc_window_buffer([1, C], dtype=dt)
            table = pld.alloc_window_buffer([n, C], dtype=dt)
            sbuf = pld.alloc_window_buffer([n], dtype=pl.INT32)
            pld.tensor.allgather(pld.window(data, [1, C], dtype=dt),
                                 pld.window(table, [n, C], dtype=dt),
                                 pld.window(sbuf, [n], dtype=pl.INT32))
            return xs
    else:
        @pl.jit.host
        def main(xs: pl.Tensor[[n, C], pl.FP32]):
            rows = pld.alloc_window_buffer([n, C], dtype=dt)
            table = pld.alloc_window_buffer([n, C], dtype=dt)
            sbuf = pld.alloc_window_buffer([n], dtype=pl.INT32)
            pld.tensor.all_to_all(pld.window(rows, [n, C], dtype=dt),
                                  pld.window(table, [n, C], dtype=dt),
                                  pld.window(sbuf, [n], dtype=pl.INT32))
            return xs
    return main


def host_a2av(n, *, dt=pl.FP32, cap=2, subset=None):
    """all_to_all_v on every device, or on the devices ``subset`` (a range)."""
    nr = n if subset is None else len(subset)

    @pl.jit.incore
    def k_stage(t: pl.InOut[pld.DistributedTensor[[nr * cap, C], dt]],
                s: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        return t

    @pl.jit
    def stage(t: pl.InOut[pld.DistributedTensor[[nr * cap, C], dt]],
              s: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        return k_stage(t, s)

    lo, hi = (0, n) if subset is None else (subset.start, subset.stop)

    @pl.jit.host
    def main(xs: pl.Tensor[[n, C], pl.FP32]):
        ibuf = pld.alloc_window_buffer([nr * cap, C], dtype=dt)
        tbuf = pld.alloc_window_buffer([nr * cap, C], dtype=dt)
        sbuf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        cbuf = pld.alloc_window_buffer([nr], dtype=pl.INT32)
        rbuf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        for r in pl.range(lo, hi):
            stage(pld.window(tbuf, [nr * cap, C], dtype=dt),
                  pld.window(sbuf, [nr, 1], dtype=pl.INT32), device=r)
        pld.tensor.all_to_all_v(pld.window(ibuf, [nr * cap, C], dtype=dt),
                                pld.window(tbuf, [nr * cap, C], dtype=dt),
                                pld.window(sbuf, [nr, 1], dtype=pl.INT32),
                                pld.window(cbuf, [nr], dtype=pl.INT32),
                                pld.window(rbuf, [nr, 1], dtype=pl.INT32))
        return xs

    return main


def host_subset_broadcast(n, subset, root):
    nr = len(subset)

    @pl.jit.incore
    def k_stage(t: pl.InOut[pld.DistributedTensor[[1, C], pl.FP32]],
                s: pl.InOut[pld.DistributedTensor[[nr], pl.INT32]]):
        return t

    @pl.jit
    def stage(t: pl.InOut[pld.DistributedTensor[[1, C], pl.FP32]],
              s: pl.InOut[pld.DistributedTensor[[nr], pl.INT32]]):
        return k_stage(t, s)

    lo, hi = subset.start, subset.stop

    @pl.jit.host
    def main(xs: pl.Tensor[[n, C], pl.FP32]):
        data = pld.alloc_window_buffer([1, C], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([nr], dtype=pl.INT32)
        for r in pl.range(lo, hi):
            stage(pld.window(data, [1, C], dtype=pl.FP32), pld.window(sbuf, [nr], dtype=pl.INT32),
                  device=r)
        pld.tensor.broadcast(pld.window(data, [1, C], dtype=pl.FP32),
                             pld.window(sbuf, [nr], dtype=pl.INT32), root=root)
        return xs

    return main


WORLDS = (1, 2, 3, 4)


@pytest.mark.parametrize("n", WORLDS)
@pytest.mark.parametrize("sig,core_num", [("ws", 1), ("ws,1", 1), ("ws,4", 4), ("ws,8", 4),
                                          ("ws,3", 1)])
def test_host_allreduce_mesh_signals_compile(n, sig, core_num):
    shape = {"ws": [n], "ws,1": [n, 1], "ws,4": [n, 4], "ws,8": [n, 8], "ws,3": [n, 3]}[sig]
    compiles(host_allreduce(n, shape, core_num=core_num), n)


@pytest.mark.parametrize("n", WORLDS)
@pytest.mark.parametrize("dt", [pl.FP16, pl.FP32])
@pytest.mark.parametrize("op", list(pld.ReduceOp))
def test_host_allreduce_every_op_and_dtype_compiles_on_cpu(n, dt, op):
    compiles(host_allreduce(n, [n], dt=dt, op=op), n)
    compiles(host_allreduce(n, [2 * (n - 1) + 1, n], mode="ring", dt=dt, op=op), n)


@pytest.mark.parametrize("n", WORLDS)
@pytest.mark.parametrize("core_num", [1, 3])
def test_host_allreduce_synthesized_signal_compiles(n, core_num):
    compiles(host_synthesized(n, core_num=core_num), n)


@pytest.mark.parametrize("n", WORLDS)
@pytest.mark.parametrize("sig", ["ws", "ws,1"])
@pytest.mark.parametrize("rounds", [1, 3])
def test_host_movement_signals_compile(n, sig, rounds):
    """barrier / broadcast / reduce_scatter on [ws]; allgather / all_to_all on
    [ws] or [ws, 1]; explicit signals inside a HOST loop."""
    compiles(host_movement(n, [n] if sig == "ws" else [n, 1], rounds=rounds), n)


@pytest.mark.parametrize("n", WORLDS)
def test_host_all_to_all_v_compiles(n):
    compiles(host_a2av(n), n)


@pytest.mark.parametrize("n,subset,root", [(3, range(1, 3), 1), (4, range(0, 2), 0),
                                           (4, range(3, 4), 0)])
def test_host_collectives_on_a_device_subset_compile(n, subset, root):
    compiles(host_subset_broadcast(n, subset, root), n)
    compiles(host_a2av(n, subset=subset), n)


@pytest.mark.parametrize("n,subset,root", [(3, range(1, 3), 2), (4, range(3, 4), 1)])
def test_broadcast_root_must_be_a_rank_of_the_subset(n, subset, root):
    e = rejected(host_subset_broadcast(n, subset, root), n, "cpu")
    assert e.code == "TC224"
    check_message(e, [f"root ({root}) must be a valid rank in [0, {len(subset)})",
                      "explicit device subset"])


def test_all_to_all_v_on_a_subset_needs_one_signal_row_per_member():
    @pl.jit.incore
    def k_stage(t: pl.InOut[pld.DistributedTensor[[4, C], pl.FP32]],
                s: pl.InOut[pld.DistributedTensor[[4, 1], pl.INT32]]):
        return t

    @pl.jit
    def stage(t: pl.InOut[pld.DistributedTensor[[4, C], pl.FP32]],
              s: pl.InOut[pld.DistributedTensor[[4, 1], pl.INT32]]):
        return k_stage(t, s)

    @pl.jit.host
    def main(xs: pl.Tensor[[4, C], pl.FP32]):
        ibuf = pld.alloc_window_buffer([4, C], dtype=pl.FP32)
        tbuf = pld.alloc_window_buffer([4, C], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([4, 1], dtype=pl.INT32)
        cbuf = pld.alloc_window_buffer([4], dtype=pl.INT32)
        rbuf = pld.alloc_window_buffer([4, 1], dtype=pl.INT32)
        for r in pl.range(2):
            stage(pld.window(tbuf, [4, C], dtype=pl.FP32),
                  pld.window(sbuf, [4, 1], dtype=pl.INT32), device=r)
        pld.tensor.all_to_all_v(pld.window(ibuf, [4, C], dtype=pl.FP32),
                                pld.window(tbuf, [4, C], dtype=pl.FP32),
                                pld.window(sbuf, [4, 1], dtype=pl.INT32),
                                pld.window(cbuf, [4], dtype=pl.INT32),
                                pld.window(rbuf, [4, 1], dtype=pl.INT32))
        return xs

    e = rejected(main, 4, "cpu")
    assert e.code == "TC226" and e.diagnostics == [e]
    check_message(e, ["explicit device subset of 2 device(s)", "subset size (2)", "got 4"])


# ------------------------------------------------------------------ kernel composites
def kernel_collectives(n, *, ring_rows=None, dt=pl.FP32):
    """Every collective in a kernel on a mesh signal [NR, 1]; with ``ring_rows``
    also a ring allreduce on its own [ring_rows, NR] signal."""
    ring = [ring_rows, n] if ring_rows else [n, 1]      # a second mesh signal otherwise
    mode = "ring" if ring_rows else "mesh"

    @pl.jit.incore
    def k(x: pl.Tensor[[1, C], dt], rows: pl.Tensor[[n, C], dt],
          data: pl.InOut[pld.DistributedTensor[[1, C], dt]],
          table: pl.InOut[pld.DistributedTensor[[n, C], dt]],
          sig: pl.InOut[pld.DistributedTensor[[n, 1], pl.INT32]],
          rsig: pl.InOut[pld.DistributedTensor[ring, pl.INT32]]):
        data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Max)
        data = pld.tensor.allreduce(data, rsig, mode=mode)
        data = pld.tensor.broadcast(data, sig, root=n - 1)
        table = pld.tensor.allgather(x, table, sig)
        sig = pld.tensor.barrier(sig)
        table = pld.tensor.all_to_all(rows, table, sig)
        table = pld.tensor.reduce_scatter(table, sig)
        return data

    @pl.jit
    def chip(x: pl.Tensor[[1, C], dt], rows: pl.Tensor[[n, C], dt],
             data: pl.InOut[pld.DistributedTensor[[1, C], dt]],
             table: pl.InOut[pld.DistributedTensor[[n, C], dt]],
             sig: pl.InOut[pld.DistributedTensor[[n, 1], pl.INT32]],
             rsig: pl.InOut[pld.DistributedTensor[ring, pl.INT32]]):
        return k(x, rows, data, table, sig, rsig)

    @pl.jit.host
    def main(xs: pl.Tensor[[n, 1, C], dt], rows: pl.Tensor[[n, n, C], dt]):
        data = pld.alloc_window_buffer([1, C], dtype=dt)
        table = pld.alloc_window_buffer([n, C], dtype=dt)
        sig = pld.alloc_window_buffer([n, 1], dtype=pl.INT32)
        rsig = pld.alloc_window_buffer(ring, dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], rows[r], pld.window(data, [1, C], dtype=dt),
                 pld.window(table, [n, C], dtype=dt), pld.window(sig, [n, 1], dtype=pl.INT32),
                 pld.window(rsig, ring, dtype=pl.INT32), device=r)
        return xs

    np_dt = np.float16 if dt is pl.FP16 else np.float32
    main.args = (np.zeros((n, 1, C), np_dt), np.zeros((n, n, C), np_dt))
    return main


@pytest.mark.parametrize("n", WORLDS)
def test_kernel_collectives_on_mesh_signals_compile(n):
    compiles(kernel_collectives(n), n)


@pytest.mark.parametrize("n", WORLDS)
@pytest.mark.parametrize("platform", ("cpu",) + CHIPS)
def test_kernel_ring_signal_compiles_and_chip_limits_do_not_apply(n, platform):
    """The composite runs inside the kernel: FP16 data and a ring over any
    NR are fine on every profile.  One rank has no ring rounds; its signal
    is [1, 1] (a window has no zero-size dimension)."""
    compiles(kernel_collectives(n, ring_rows=max(1, 2 * (n - 1)), dt=pl.FP16), n, platform)


@pytest.mark.parametrize("n", (2, 3))
def test_kernel_ring_signal_with_the_host_extra_row_is_rejected(n):
    e = rejected(kernel_collectives(n, ring_rows=2 * (n - 1) + 1), n, "cpu")
    assert e.code == "TC220"
    check_message(e, [f"shape[0] must equal {2 * (n - 1)}", "[2*(NR-1), NR]",
                      f"got DistributedTensor[{2 * (n - 1) + 1}, {n}]"])


# ------------------------------------------------------------------ chip limits
def _chip_then_cpu(main, world, platform, needles):
    """Rejected with TC215 under the chip profile; compiles under "cpu"."""
    e = rejected(main, world, platform)
    assert e.code == "TC215", str(e)
    assert isinstance(e, ValueError)
    check_message(e, [platform] + needles)
    assert e.hint and 'platform="cpu"' in e.hint
    compiles(main, world, "cpu")


@pytest.mark.parametrize("platform", CHIPS)
@pytest.mark.parametrize("name", ["broadcast", "reduce_scatter", "allgather", "all_to_all"])
def test_chip_host_builtins_move_fp32_only(platform, name):
    _chip_then_cpu(host_one(2, name, dt=pl.FP16), 2, platform,
                   [f"HOST pld.tensor.{name} supports only FP32", "got FP16"])
    compiles(host_one(2, name), 2, platform)


@pytest.mark.parametrize("platform", CHIPS)
@pytest.mark.parametrize("op", ["Max", "Min", "Prod"])
def test_chip_host_reduce_scatter_reduces_by_sum_only(platform, op):
    rop = getattr(pld.ReduceOp, op)

    @pl.jit.host
    def main(xs: pl.Tensor[[2, C], pl.FP32]):
        rows = pld.alloc_window_buffer([2, C], dtype=pl.FP32)
        pld.reduce_scatter(pld.window(rows, [2, C], dtype=pl.FP32), op=rop)
        return xs

    main.args = (np.zeros((2, C), np.float32),)
    _chip_then_cpu(main, 2, platform, ["HOST pld.tensor.reduce_scatter supports only "
                                       "ReduceOp.Sum", f"got ReduceOp.{op}"])


@pytest.mark.parametrize("platform", CHIPS)
def test_chip_all_to_all_v_lanes_are_bounded_by_the_aiv_cores(platform):
    from tilecomm.runtime.config import PLATFORMS
    cores = PLATFORMS[platform].aiv_cores + 1

    @pl.jit.host
    def main(xs: pl.Tensor[[2, C], pl.FP32]):
        i = pld.alloc_window_buffer([2, C], dtype=pl.FP32)
        t = pld.alloc_window_buffer([2, C], dtype=pl.FP32)
        s = pld.alloc_window_buffer([2, cores], dtype=pl.INT32)
        sc = pld.alloc_window_buffer([2], dtype=pl.INT32)
        rc = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
        pld.tensor.all_to_all_v(pld.window(i, [2, C], dtype=pl.FP32),
                                pld.window(t, [2, C], dtype=pl.FP32),
                                pld.window(s, [2, cores], dtype=pl.INT32),
                                pld.window(sc, [2], dtype=pl.INT32),
                                pld.window(rc, [2, 1], dtype=pl.INT32), core_num=cores)
        return xs

    main.args = (np.zeros((2, C), np.float32),)
    _chip_then_cpu(main, 2, platform, [f"core_num ({cores}) exceeds the backend AIV core count"])


@pytest.mark.parametrize("platform", CHIPS)
def test_chip_all_to_all_v_moves_fp32_only(platform):
    _chip_then_cpu(host_a2av(2, dt=pl.FP16), 2, platform,
                   ["HOST pld.tensor.all_to_all_v supports only FP32", "got FP16"])
    compiles(host_a2av(2), 2, platform)


@pytest.mark.parametrize("platform", CHIPS)
@pytest.mark.parametrize("dt,op", [(pl.FP16, SUM), (pl.FP32, MAX)])
def test_chip_host_ring_is_fp32_sum_only(platform, dt, op):
    _chip_then_cpu(host_allreduce(2, [3, 2], mode="ring", dt=dt, op=op), 2, platform,
                   ["builtin.tensor.allreduce_ring currently supports only "
                    "(op=ReduceOp.Sum, dtype=FP32)", f"op=ReduceOp.{op.name}",
                    f"dtype={dt.name}"])
    compiles(host_allreduce(2, [3, 2], mode="ring"), 2, platform)


@pytest.mark.parametrize("platform", CHIPS)
def test_chip_host_ring_needs_numel_divisible_by_nr(platform):
    _chip_then_cpu(host_allreduce(2, [3, 2], mode="ring", size=7), 2, platform,
                   ["divisible by NR=2", "got DistributedTensor[1, 7]"])


@pytest.mark.parametrize("platform", CHIPS)
def test_chip_host_mesh_allreduce_takes_fp16_and_every_op(platform):
    for op in pld.ReduceOp:
        compiles(host_allreduce(2, [2], dt=pl.FP16, op=op), 2, platform)


@pytest.mark.parametrize("platform", CHIPS)
def test_chip_core_num_at_most_the_aiv_count(platform):
    aiv = AIV[platform]
    compiles(host_allreduce(2, [2, aiv], core_num=aiv), 2, platform)
    _chip_then_cpu(host_allreduce(2, [2, aiv + 1], core_num=aiv + 1), 2, platform,
                   [f"core_num ({aiv + 1}) exceeds the backend AIV core count ({aiv})"])


@pytest.mark.parametrize("platform", CHIPS)
def test_chip_host_builtins_at_most_16_ranks(platform):
    compiles(host_movement(16, [16, 1]), 16, platform)
    _chip_then_cpu(host_movement(17, [17, 1]), 17, platform,
                   ["at most 16 ranks", "comm domain has 17 devices"])


@pytest.mark.parametrize("platform", CHIPS)
def test_chip_host_ring_at_most_16_ranks(platform):
    _chip_then_cpu(host_allreduce(17, [33, 17], mode="ring", size=17), 17, platform,
                   ["HOST pld.tensor.allreduce supports at most 16 ranks"])


@pytest.mark.parametrize("platform", CHIPS)
def test_chip_limits_leave_kernel_composites_alone(platform):
    compiles(kernel_collectives(17, ring_rows=32), 17, platform)


# ------------------------------------------------------------------ located negatives
@pl.jit.incore
def k_rank1_signal(win: pl.InOut[pld.DistributedTensor[[1, C], pl.FP32]],
                   sig: pl.InOut[pld.DistributedTensor[[2], pl.INT32]]):
    win = pld.tensor.allreduce(win, sig)  # E:rank1
    return win


@pl.jit
def chip_rank1_signal(win: pl.InOut[pld.DistributedTensor[[1, C], pl.FP32]],
                      sig: pl.InOut[pld.DistributedTensor[[2], pl.INT32]]):
    return k_rank1_signal(win, sig)


@pl.jit.host
def main_rank1_signal(xs: pl.Tensor[[2, C], pl.FP32]):
    wbuf = pld.alloc_window_buffer([1, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([2], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip_rank1_signal(pld.window(wbuf, [1, C], dtype=pl.FP32),
                          pld.window(sbuf, [2], dtype=pl.INT32), device=r)
    return xs


def _check_here(e, func, tag, token, code, classes, needles):
    """check_location for programs of this file."""
    fn = getattr(func, "fn", func)
    lines, first = inspect.getsourcelines(fn)
    (line, text), = [(first + i, t) for i, t in enumerate(lines) if f"# E:{tag}" in t]
    assert e.code == code, str(e)
    assert isinstance(e, classes[0]) and isinstance(e, classes[1])
    assert e.line == line and e.col == text.index(token) + 1, str(e)
    check_message(e, needles)
    assert e.diagnostics == [e], str(e)


def test_kernel_signal_must_be_rank2():
    e = compile_error(main_rank1_signal, args=xs_for(2), cfg=cfg(2))
    _check_here(e, k_rank1_signal, "rank1", "sig)", "TC220", VALUE,
                ["rank-2 [NR, 1] inside a kernel", "got DistributedTensor[2]<INT32>"])


def test_host_parameter_is_not_a_window_view():
    xs = (np.zeros((B.W, B.R, B.C), np.float32), np.zeros((B.W, B.R, B.C), np.float32),
          np.zeros((B.R, B.C), np.float32))
    e = compile_error(B.host_collective_param_window, args=xs, cfg=cfg(B.W))
    assert isinstance(e, TypeError)
    check_location(e, B.host_collective_param_window, "TC101", "d, pld")
    check_message(e, ["window-bound DistributedTensor (a view of an alloc_window_buffer) when "
                      "called from a HOST orchestrator", "got DistributedTensor[2, 8]<FP32>",
                      "not a pld.window view made here"])
    assert e.diagnostics == [e]


W = B.W
# all_to_all_v's deducer list, one operand wrong at a time:
# (keyword arguments of bad_programs.host_a2av, marked operand, code, classes, needles)
A2AV = [
    (dict(tdt=pl.FP16), "target", "TC204", TYPE, ["input dtype FP32 differs from target dtype "
                                                  "FP16"]),
    (dict(tsize=C + 1), "target", "TC208", VALUE, ["same SIZE (shape[1])", "got 8 and 9"]),
    (dict(sig=[W]), "signal", "TC220", VALUE, ["rank-2 [NR, 1]", "got DistributedTensor[2]"]),
    (dict(sig=[W, 2], counts=[W], recv=[W, 1]), "signal", "TC220", VALUE,
     ["shape[1] must be 1 (one cell per rank), got 2", "cannot be shared with this collective"]),
    (dict(trows=3), "target", "TC208", VALUE, ["signal.shape[0] (2) must divide "
                                               "target.shape[0] (3)"]),
    (dict(cdt=pl.FP32), "send_counts", "TC204", TYPE, ["send_counts must be INT32",
                                                       "got FP32"]),
    (dict(counts=[W, 2]), "send_counts", "TC208", VALUE, ["send_counts must be [NR] or [NR, 1]",
                                                          "got DistributedTensor[2, 2]"]),
    (dict(recv=[W]), "recv_counts", "TC208", VALUE, ["recv_counts must be [NR, 1]",
                                                     "got DistributedTensor[2]"]),
    (dict(counts=[W + 1]), "send_counts", "TC208", VALUE,
     ["send_counts.shape[0] (3) must equal signal.shape[0] (2)"]),
]


@pytest.mark.parametrize("kw,tag,code,classes,needles", A2AV,
                         ids=[f"{c[2]}-{c[1]}-{i}" for i, c in enumerate(A2AV)])
def test_all_to_all_v_operand_rules(kw, tag, code, classes, needles):
    main = B.host_a2av(**kw)
    e = compile_error(main, args=(np.zeros((W, B.R, B.C), np.float32),
                                  np.zeros((W, B.R, B.C), np.float32)), cfg=cfg(W))
    assert e.code == code, str(e)
    assert isinstance(e, classes[0]) and isinstance(e, classes[1])
    check_location(e, main, tag, "pld.window(")
    check_message(e, needles)
    assert e.diagnostics == [e], str(e)


def test_all_to_all_v_correct_operands_compile():
    B.host_a2av().compile(np.zeros((W, B.R, B.C), np.float32),
                          np.zeros((W, B.R, B.C), np.float32), config=cfg(W))


NRD = pl.dynamic("NRD")


@pl.jit.host
def a2av_dynamic_nr(xs: pl.Tensor[[NRD, C], pl.FP32]):
    ibuf = pld.alloc_window_buffer([NRD, C], dtype=pl.FP32)
    tbuf = pld.alloc_window_buffer([NRD, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([NRD, 1], dtype=pl.INT32)
    cbuf = pld.alloc_window_buffer([NRD], dtype=pl.INT32)
    rbuf = pld.alloc_window_buffer([NRD, 1], dtype=pl.INT32)
    pld.tensor.all_to_all_v(pld.window(ibuf, [NRD, C], dtype=pl.FP32),
                            pld.window(tbuf, [NRD, C], dtype=pl.FP32),
                            pld.window(sbuf, [NRD, 1], dtype=pl.INT32),  # E:nr
                            pld.window(cbuf, [NRD], dtype=pl.INT32),
                            pld.window(rbuf, [NRD, 1], dtype=pl.INT32))
    return xs


def test_all_to_all_v_needs_a_constant_rank_count():
    """Checked with annotation shapes only, NR is a pl.dynamic dim: rejected;
    specialised for its arguments, NR is bound and the program compiles."""
    with pytest.raises(UserError) as ei:
        a2av_dynamic_nr.compile(config=cfg(2))
    _check_here(ei.value, a2av_dynamic_nr, "nr", "pld.window(", "TC216", VALUE,
                ["compile-time constant target.shape[0] and signal.shape[0]",
                 "got DistributedTensor[NRD, 8]<FP32> and DistributedTensor[NRD, 1]<INT32>"])
    a2av_dynamic_nr.compile(*xs_for(2), config=cfg(2))
