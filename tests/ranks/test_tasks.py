"""Tasks of chip orchestration functions: dependency inference from buffer
overlap, explicit deps, manual scopes, pl.spmd, TaskId arrays.

Ordering tests use a *gate*: task A blocks on a cell of the rank's own
signal window until the last task (the opener) sets it, then does its access
and sets a "done" cell; task B does its access and records whether A was
done when it started.  With two cores, B runs before the opener unless
something orders it after A, so a missing dependency shows up as a wrong
flag (and wrong data) on every run, not by chance; a wrongly added one
deadlocks (the opener never gets a core)."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import config_for

NR = pl.dynamic("NR")
N = 8
SET, GE = pld.NotifyOp.Set, pld.WaitCmp.Ge
X = pl.Tensor[[2, N], pl.INT32]
Y = pl.Out[pl.Tensor[[2, N], pl.INT32]]
SIG = pl.InOut[pld.DistributedTensor[[1, 4], pl.INT32]]
GATE, DONE = 0, 1


def host(chip):
    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 2, N], pl.INT32], ys: pl.Out[pl.Tensor[[NR, 2, N], pl.INT32]]):
        sbuf = pld.alloc_window_buffer([1, 4], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(sbuf, [1, 4], dtype=pl.INT32), device=r)
        return ys
    return main


def run(main, n, cores=2, xs=None):
    xs = np.arange(n * 2 * N, dtype=np.int32).reshape(n, 2, N) + 3 if xs is None else xs
    ys = np.zeros_like(xs)
    main(xs, ys, config=config_for(n, cores=cores))
    return xs, ys


# ------------------------------------------------------------------ inference
@pl.jit
def chip_raw(x: X, y: Y, sig: SIG):
    t = pl.create_tensor([1, N], pl.INT32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="writer"):
        pld.system.wait(sig, [0, GATE], 1, cmp=GE)
        t = pl.store(pl.add(pl.load(x, [0, 0], [1, N]), 1), [0, 0], t)
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, DONE], 1, op=SET)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="reader"):
        pl.write(y, [1, 0], pl.read(sig, [0, DONE]))
        y = pl.store(pl.mul(pl.load(t, [0, 0], [1, N]), 2), [0, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="opener"):
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)
    return y


@pl.jit
def chip_war(x: X, y: Y, sig: SIG):
    t = pl.create_tensor([1, N], pl.INT32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="first_writer"):
        t = pl.store(pl.load(x, [0, 0], [1, N]), [0, 0], t)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="reader"):
        pld.system.wait(sig, [0, GATE], 1, cmp=GE)
        y = pl.store(pl.load(t, [0, 0], [1, N]), [0, 0], y)
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, DONE], 1, op=SET)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="overwriter"):
        y = pl.store(pl.tile.full([1, N], pl.INT32, pl.read(sig, [0, DONE])), [1, 0], y)
        t = pl.store(pl.load(x, [1, 0], [1, N]), [0, 0], t)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="opener"):
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)
    return y


@pl.jit
def chip_waw(x: X, y: Y, sig: SIG):
    t = pl.create_tensor([1, N], pl.INT32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="first_writer"):
        pld.system.wait(sig, [0, GATE], 1, cmp=GE)
        t = pl.store(pl.load(x, [0, 0], [1, N]), [0, 0], t)
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, DONE], 1, op=SET)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="second_writer"):
        y = pl.store(pl.tile.full([1, N], pl.INT32, pl.read(sig, [0, DONE])), [1, 0], y)
        t = pl.store(pl.load(x, [1, 0], [1, N]), [0, 0], t)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="opener"):
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="final_reader"):
        y = pl.store(pl.load(t, [0, 0], [1, N]), [0, 0], y)
    return y


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_reader_waits_for_the_last_writer(n):
    xs, ys = run(host(chip_raw), n)
    np.testing.assert_array_equal(ys[:, 0], (xs[:, 0] + 1) * 2)
    np.testing.assert_array_equal(ys[:, 1, 0], np.ones(n))        # writer was done


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_writer_waits_for_prior_readers(n):
    xs, ys = run(host(chip_war), n)
    np.testing.assert_array_equal(ys[:, 0], xs[:, 0])            # read before overwrite
    np.testing.assert_array_equal(ys[:, 1], np.ones((n, N)))


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_writer_waits_for_the_prior_writer(n):
    xs, ys = run(host(chip_waw), n)
    np.testing.assert_array_equal(ys[:, 0], xs[:, 1])            # the later write wins
    np.testing.assert_array_equal(ys[:, 1], np.ones((n, N)))


@pl.jit
def chip_disjoint(x: X, y: Y, sig: SIG):
    # both write y, different rows: if they were serialised, the first would
    # wait forever for the gate the second opens
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="row0"):
        pld.system.wait(sig, [0, GATE], 1, cmp=GE)
        y = pl.store(pl.load(x, [1, 0], [1, N]), [0, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="row1"):
        y = pl.store(pl.load(x, [0, 0], [1, N]), [1, 0], y)
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)
    return y


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_disjoint_regions_run_concurrently(n):
    xs, ys = run(host(chip_disjoint), n)
    np.testing.assert_array_equal(ys, xs[:, ::-1])


# ------------------------------------------------------------------ explicit edges
@pl.jit
def chip_manual(x: X, y: Y, sig: SIG):
    # same region written twice: automatic inference would serialise them
    # and deadlock; a manual scope orders by explicit edges only
    with pl.manual_scope():
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="waits"):
            pld.system.wait(sig, [0, GATE], 1, cmp=GE)
            y = pl.store(pl.load(x, [1, 0], [1, N]), [1, 0], y)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="opens") as opener:
            y = pl.store(pl.load(x, [0, 0], [1, N]), [1, 0], y)
            pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="after", deps=[opener]):
            y = pl.store(pl.load(x, [0, 0], [1, N]), [0, 0], y)
    return y


@pl.jit
def chip_no_dep_args(x: X, y: Y, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="waits"):
        pld.system.wait(sig, [0, GATE], 1, cmp=GE)
        y = pl.store(pl.load(x, [1, 0], [1, N]), [1, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="opens", no_dep_args=[y],
               allow_early_resolve=True):
        y = pl.store(pl.load(x, [0, 0], [1, N]), [1, 0], y)
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)
    return y


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_manual_scope_orders_by_explicit_deps_only(n):
    xs, ys = run(host(chip_manual), n)
    np.testing.assert_array_equal(ys[:, 0], xs[:, 0])
    np.testing.assert_array_equal(ys[:, 1], xs[:, 1])      # the waiting task wrote last


@pytest.mark.parametrize("n", [1, 3])
def test_no_dep_args_opts_a_tensor_out_of_tracking(n):
    xs, ys = run(host(chip_no_dep_args), n)
    np.testing.assert_array_equal(ys[:, 0], np.zeros((n, N)))
    np.testing.assert_array_equal(ys[:, 1], xs[:, 1])      # the waiting task wrote last


@pl.jit
def chip_tid_array(x: X, y: Y, sig: SIG):
    tids = pl.array.create(2, pl.TASK_ID)
    with pl.manual_scope():
        for i in pl.range(2):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="producer") as tid:
                pld.system.wait(sig, [0, GATE], 1, cmp=GE)
                y = pl.store(pl.load(x, [i, 0], [1, N]), [i, 0], y)
            tids[i] = tid
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="consumer", deps=[tids]):
            a = pl.load(y, [0, 0], [1, N])
            b = pl.load(y, [1, 0], [1, N])
            y = pl.store(pl.add(a, b), [0, 0], y)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="opener"):
            pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)
    return y


@pytest.mark.parametrize("n", [1, 2, 4])
def test_deps_on_a_task_id_array(n):
    xs, ys = run(host(chip_tid_array), n, cores=4)
    np.testing.assert_array_equal(ys[:, 0], xs[:, 0] + xs[:, 1])
    np.testing.assert_array_equal(ys[:, 1], xs[:, 1])


# ------------------------------------------------------------------ pl.spmd
@pl.jit
def chip_spmd_for(x: X, y: Y, sig: SIG):
    for i in pl.spmd(2, name_hint="rows"):
        y = pl.store(pl.mul(pl.load(x, [i, 0], [1, N]), 3), [i, 0], y)
    return y


@pl.jit
def chip_spmd_with(x: X, y: Y, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="gated") as first:
        pld.system.wait(sig, [0, GATE], 1, cmp=GE)
        y = pl.store(pl.load(x, [0, 0], [1, N]), [0, 0], y)
    with pl.manual_scope():
        with pl.spmd(2, name_hint="blocks", deps=[first]) as blocks:
            b = pl.get_block_idx()
            pl.write(y, [1, b], pl.read(y, [0, b]) + pl.read(sig, [0, GATE]))
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="opener"):
            pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)
    return y


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_spmd_loop_runs_every_block(n):
    xs, ys = run(host(chip_spmd_for), n)
    np.testing.assert_array_equal(ys, xs * 3)


@pytest.mark.parametrize("n", [1, 2])
def test_spmd_with_deps_and_block_index(n):
    xs, ys = run(host(chip_spmd_with), n, cores=3)
    np.testing.assert_array_equal(ys[:, 0], xs[:, 0])
    np.testing.assert_array_equal(ys[:, 1, :2], xs[:, 0, :2] + 1)


# ------------------------------------------------------------------ kernel calls as tasks
@pl.jit.incore
def gated_copy(x: X, y: Y, sig: SIG) -> pl.Tensor[[2, N], pl.INT32]:
    pld.system.wait(sig, [0, GATE], 1, cmp=GE)
    y = pl.store(pl.load(x, [0, 0], [2, N]), [0, 0], y)
    pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, DONE], 1, op=SET)
    return y


@pl.jit
def chip_kernel_task(x: X, y: Y, sig: SIG):
    y = gated_copy(x, y, sig)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="reads_y"):
        f = pl.read(sig, [0, DONE])
        pl.write(y, [1, 1], pl.read(y, [1, 1]) * 10 + f)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="opener"):
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)
    return y


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_kernel_calls_are_tasks_ordered_by_their_parameters(n):
    xs, ys = run(host(chip_kernel_task), n)
    want = xs.copy()
    want[:, 1, 1] = xs[:, 1, 1] * 10 + 1
    np.testing.assert_array_equal(ys, want)


@pytest.mark.parametrize("cores", [1, 2, 5])
def test_independent_tasks_any_core_count(cores):
    xs, ys = run(host(chip_spmd_for), 2, cores=cores)
    np.testing.assert_array_equal(ys, xs * 3)


# ------------------------------------------------------------------ class form
@pl.program
class Submitted:
    """pl.submit / pl.spmd_submit: kernel calls as tasks with TaskIds."""

    @pl.function(type=pl.FunctionType.InCore)
    def gated(self, x: X, y: Y, sig: SIG) -> pl.Tensor[[2, N], pl.INT32]:
        pld.system.wait(sig, [0, GATE], 1, cmp=GE)
        y = pl.store(pl.load(x, [0, 0], [2, N]), [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.InCore)
    def double_block(self, y: Y, sig: SIG) -> pl.Tensor[[2, N], pl.INT32]:
        b = pl.get_block_idx()
        y = pl.store(pl.mul(pl.load(y, [b, 0], [1, N]), 2), [b, 0], y)
        return y

    @pl.function(type=pl.FunctionType.InCore)
    def opener(self, sig: SIG):
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: X, y: Y, sig: SIG):
        with pl.manual_scope():
            y, first = pl.submit(self.gated, x, y, sig)
            y, second = pl.spmd_submit(self.double_block, y, sig, core_num=2, deps=[first])
            last = pl.submit(self.opener, sig)
        return y

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def main(self, xs: pl.Tensor[[NR, 2, N], pl.INT32],
             ys: pl.Out[pl.Tensor[[NR, 2, N], pl.INT32]]):
        sbuf = pld.alloc_window_buffer([1, 4], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            self.chip(xs[r], ys[r], pld.window(sbuf, [1, 4], dtype=pl.INT32), device=r)
        return ys


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_class_form_submit_and_spmd_submit(n):
    import tilecomm
    compiled = tilecomm.ir.compile(Submitted, distributed_config=config_for(n).dist)
    xs = np.arange(n * 2 * N, dtype=np.int32).reshape(n, 2, N) + 1
    ys = np.zeros_like(xs)
    compiled(xs, ys, config=config_for(n, cores=3))
    np.testing.assert_array_equal(ys, xs * 2)


# ------------------------------------------------------------------ inline chip scopes
@pl.jit.incore
def add_one(x: X, y: Y) -> pl.Tensor[[2, N], pl.INT32]:
    y = pl.store(pl.add(pl.load(x, [0, 0], [2, N]), 1), [0, 0], y)
    return y


@pl.jit.host
def inline_chips(xs: pl.Tensor[[NR, 2, N], pl.INT32], ys: pl.Out[pl.Tensor[[NR, 2, N], pl.INT32]]):
    for r in pl.range(pld.world_size()):
        with pl.at(level=pl.Level.CHIP, role=pl.Role.Orchestrator):
            add_one(xs[r], ys[r])
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="second_row"):
                y2 = ys[r]
                y2 = pl.store(pl.mul(pl.load(y2, [1, 0], [1, N]), 2), [1, 0], y2)
    return ys


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_inline_chip_scopes_in_a_host_orchestrator(n):
    xs = np.arange(n * 2 * N, dtype=np.int32).reshape(n, 2, N)
    ys = np.zeros_like(xs)
    inline_chips(xs, ys, config=config_for(n))
    want = xs + 1
    want[:, 1] *= 2
    np.testing.assert_array_equal(ys, want)


# ------------------------------------------------------------------ collectives in tasks
S = 37


@pl.jit
def chip_collective(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[2, S], pl.FP32]],
                    data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                    sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="reduce"):
        data = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)
        data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
        y = pl.store(pl.load(data, [0, 0], [1, S]), [0, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="local"):
        y = pl.store(pl.mul(pl.load(x, [0, 0], [1, S]), 2.0), [1, 0], y)
    return y


@pl.jit.host
def collective_main(xs: pl.Tensor[[NR, 1, S], pl.FP32],
                    ys: pl.Out[pl.Tensor[[NR, 2, S], pl.FP32]]):
    dbuf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip_collective(xs[r], ys[r], pld.window(dbuf, [1, S], dtype=pl.FP32),
                        pld.window(sbuf, [NR, 1], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_a_collective_inside_a_task(n):
    xs = np.random.default_rng(n).integers(-9, 9, (n, 1, S)).astype(np.float32)
    ys = np.zeros((n, 2, S), np.float32)
    collective_main(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys[:, 0], np.broadcast_to(xs[:, 0].sum(axis=0), (n, S)))
    np.testing.assert_array_equal(ys[:, 1], xs[:, 0] * 2)


@pl.jit
def chip_other_forms(x: X, y: Y, sig: SIG):
    # pl.scope(mode=MANUAL) is pl.manual_scope(); pl.at takes its level by position;
    # a plain `with pl.spmd(n):` reads the block index itself
    with pl.scope(mode=pl.ScopeMode.MANUAL):
        with pl.at(pl.Level.CORE_GROUP, name_hint="waits"):
            pld.system.wait(sig, [0, GATE], 1, cmp=GE)
            y = pl.store(pl.load(x, [0, 0], [2, N]), [0, 0], y)
        with pl.spmd(2):
            b = pl.get_block_idx()
            y = pl.store(pl.load(x, [b, 0], [1, N]), [b, 0], y)
            pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, GATE], 1, op=SET)
    with pl.scope(mode=pl.ScopeMode.AUTO):
        with pl.at(pl.Level.CORE_GROUP, name_hint="after"):
            y = pl.store(pl.mul(pl.load(y, [0, 0], [2, N]), 2), [0, 0], y)
    return y


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_scope_modes_positional_level_and_plain_spmd(n):
    xs, ys = run(host(chip_other_forms), n, cores=3)
    np.testing.assert_array_equal(ys, xs * 2)
