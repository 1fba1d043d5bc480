"""Kernels for the protocol lint's tests: for each rule one that has the
pattern (``# W:TCnnn`` marks the line the warning points at) and near
misses that do not.  Every kernel takes the same windows, so one HOST
program shape dispatches each of them on every rank (``program(kernel)``)."""
import tilecomm.language as pl
import tilecomm.language.distributed as pld

W = 2                       # the world size the tests compile for
SIZE = 4
SIG = pl.InOut[pld.DistributedTensor[[W, 1], pl.INT32]]
DATA = pl.InOut[pld.DistributedTensor[[W, SIZE], pl.FP32]]
X = pl.Tensor[[1, SIZE], pl.FP32]
Y = pl.Out[pl.Tensor[[W, SIZE], pl.FP32]]
ADD, SET = pld.NotifyOp.AtomicAdd, pld.NotifyOp.Set
EQ, GE = pld.WaitCmp.Eq, pld.WaitCmp.Ge


def program(kernel, coll_sig=False):
    """A HOST program dispatching ``kernel`` on every rank, with a signal, a
    data window and (``coll_sig``) a second signal for a collective."""

    @pl.jit
    def chip(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
        return kernel(sig, data, other, x, y)

    @pl.jit.host
    def main(xs: pl.Tensor[[W, 1, SIZE], pl.FP32], ys: pl.Out[pl.Tensor[[W, W, SIZE], pl.FP32]]):
        sig_buf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
        data_buf = pld.alloc_window_buffer([W, SIZE], dtype=pl.FP32)
        other_buf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(pld.window(sig_buf, [W, 1], dtype=pl.INT32),
                 pld.window(data_buf, [W, SIZE], dtype=pl.FP32),
                 pld.window(other_buf, [W, 1], dtype=pl.INT32), xs[r], ys[r], device=r)
        return ys

    return main


# ---------------------------------------------------------------- TC701
@pl.jit.incore
def set_then_add(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=1, op=SET)  # W:TC701
    pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=1, op=ADD)
    return y


@pl.jit.incore
def set_and_add_on_two_cells(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=1, op=SET)
    pld.system.notify(sig, peer=1 - me, offsets=[1, 0], value=1, op=ADD)
    return y


@pl.jit.incore
def set_and_add_on_a_cell_read_at_run_time(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # the second cell's row comes from data: the lint cannot tell which cell it is
    me = pld.rank(pld.get_comm_ctx(sig))
    row = pl.read(other, [0, 0])
    pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=1, op=SET)
    pld.system.notify(sig, peer=1 - me, offsets=[row, 0], value=1, op=ADD)
    return y


# ---------------------------------------------------------------- TC702
@pl.jit.incore
def eq_wait_below_the_total(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # every rank adds 1 into rank 0's cell; rank 0 waits for exactly 1
    pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=ADD)
    if pld.rank(pld.get_comm_ctx(sig)) == 0:
        pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=EQ)  # W:TC702
    return y


@pl.jit.incore
def eq_wait_for_the_total(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=ADD)
    if pld.rank(pld.get_comm_ctx(sig)) == 0:
        pld.system.wait(sig, offsets=[0, 0], expected=W, cmp=EQ)
    return y


@pl.jit.incore
def ge_wait_below_the_total(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=ADD)
    if pld.rank(pld.get_comm_ctx(sig)) == 0:
        pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=GE)
    return y


# ---------------------------------------------------------------- TC703
@pl.jit.incore
def ge_above_the_set_value(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=1, op=SET)
    pld.system.wait(sig, offsets=[0, 0], expected=3, cmp=GE)  # W:TC703
    return y


@pl.jit.incore
def ge_above_the_sum_of_adds(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # two notifiers of 1 each can bring rank 0's cell to 2, never 3
    pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=ADD)
    if pld.rank(pld.get_comm_ctx(sig)) == 0:
        pld.system.wait(sig, offsets=[0, 0], expected=3, cmp=GE)  # W:TC703
    return y


@pl.jit.incore
def ge_at_the_sum_of_adds(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=ADD)
    if pld.rank(pld.get_comm_ctx(sig)) == 0:
        pld.system.wait(sig, offsets=[0, 0], expected=W, cmp=GE)
    return y


@pl.jit.incore
def ge_at_the_set_value(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=3, op=SET)
    pld.system.wait(sig, offsets=[0, 0], expected=3, cmp=GE)
    return y


@pl.jit.incore
def ge_on_a_cell_also_written_by_the_kernel(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # the owner writes its own cell: notifies are not all that moves it
    me = pld.rank(pld.get_comm_ctx(sig))
    pl.write(sig, [0, 0], 3)
    pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=1, op=SET)
    pld.system.wait(sig, offsets=[0, 0], expected=3, cmp=GE)
    return y


# ---------------------------------------------------------------- TC704
@pl.jit.incore
def notify_before_store(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)  # W:TC704
    pld.remote_store(pl.load(x, [0, 0], [1, SIZE]), data, 1 - me, [me, 0])
    pld.system.wait(sig, offsets=[1 - me, 0], expected=1, cmp=GE)
    y = pl.store(pl.load(data, [0, 0], [W, SIZE]), [0, 0], y)
    return y


@pl.jit.incore
def notify_before_async_wait(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    sess = pld.system.async_session()
    evt = pld.tensor.put_async(data, 1 - me, x, sess, [me, 0], [0, 0], [1, SIZE])
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)  # W:TC704
    pld.system.wait_async_event(evt, sess)
    pld.system.wait(sig, offsets=[1 - me, 0], expected=1, cmp=GE)
    y = pl.store(pl.load(data, [0, 0], [W, SIZE]), [0, 0], y)
    return y


@pl.jit.incore
def async_wait_before_notify(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    sess = pld.system.async_session()
    evt = pld.tensor.put_async(data, 1 - me, x, sess, [me, 0], [0, 0], [1, SIZE])
    pld.system.wait_async_event(evt, sess)
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)
    pld.system.wait(sig, offsets=[1 - me, 0], expected=1, cmp=GE)
    y = pl.store(pl.load(data, [0, 0], [W, SIZE]), [0, 0], y)
    return y


@pl.jit.incore
def store_before_notify(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.remote_store(pl.load(x, [0, 0], [1, SIZE]), data, 1 - me, [me, 0])
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)
    pld.system.wait(sig, offsets=[1 - me, 0], expected=1, cmp=GE)
    y = pl.store(pl.load(data, [0, 0], [W, SIZE]), [0, 0], y)
    return y


@pl.jit.incore
def rounds_of_store_then_notify(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # round k's notify precedes round k+1's store, and round k+1 has its own notify
    me = pld.rank(pld.get_comm_ctx(sig))
    for k in pl.range(3):
        pld.remote_store(pl.load(x, [0, 0], [1, SIZE]), data, 1 - me, [me, 0])
        pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=ADD)
        pld.system.wait(sig, offsets=[1 - me, 0], expected=k + 1, cmp=GE)
    return y


# ---------------------------------------------------------------- TC705
@pl.jit.incore
def barrier_signal_also_notified(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.tensor.barrier(sig)
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)  # W:TC705
    return y


@pl.jit.incore
def barrier_and_notify_on_separate_windows(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.tensor.barrier(other)
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)
    return y


# ---------------------------------------------------------------- TC706
@pl.jit.incore
def split_aiv_unguarded_notify(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.NONE):
        pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=ADD)  # W:TC706
    return y


@pl.jit.incore
def split_aiv_guarded_notify(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.NONE):
        if aiv_id == 0:
            pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=ADD)
    return y


@pl.jit.incore
def split_aiv_sharded_notify(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.NONE):
        pld.system.notify(sig, peer=1 - me, offsets=[aiv_id, 0], value=1, op=ADD)
    return y


# ---------------------------------------------------------------- TC707
@pl.jit.incore
def read_without_waiting(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.remote_store(pl.load(x, [0, 0], [1, SIZE]), data, 1 - me, [me, 0])
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)
    y = pl.store(pl.load(data, [0, 0], [W, SIZE]), [0, 0], y)  # W:TC707
    return y


@pl.jit.incore
def read_own_row_without_waiting(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # peers store into row `peer`; this rank reads only its own row, nobody else's
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.remote_store(pl.load(x, [0, 0], [1, SIZE]), data, 1 - me, [me, 0])
    y = pl.store(pl.load(data, [me, 0], [1, SIZE]), [0, 0], y)
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)
    return y


# ---------------------------------------------------------------- TC708
@pl.jit.incore
def remote_load_without_waiting(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [me, 0], data)
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)
    t = pld.tile.remote_load(data, peer=1 - me, offsets=[1 - me, 0], shape=[1, SIZE])  # W:TC708
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit.incore
def get_without_waiting(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [me, 0], data)
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)
    pld.tensor.get(y, 1 - me, data)  # W:TC708
    pld.system.wait(sig, offsets=[1 - me, 0], expected=1, cmp=GE)
    return y


@pl.jit.incore
def remote_load_after_the_wait(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [me, 0], data)
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)
    pld.system.wait(sig, offsets=[1 - me, 0], expected=1, cmp=GE)
    t = pld.tile.remote_load(data, peer=1 - me, offsets=[1 - me, 0], shape=[1, SIZE])
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit.incore
def remote_load_of_a_row_nobody_writes(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # the peer writes its own row of its copy; this rank reads the other row
    me = pld.rank(pld.get_comm_ctx(sig))
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [me, 0], data)
    t = pld.tile.remote_load(data, peer=1 - me, offsets=[me, 0], shape=[1, SIZE])
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit.incore
def get_then_permit(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # read the peer's copy first, then tell the peer it may overwrite it
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.tensor.get(y, 1 - me, data)
    pld.system.notify(sig, peer=1 - me, offsets=[me, 0], value=1, op=SET)
    pld.system.wait(sig, offsets=[1 - me, 0], expected=1, cmp=GE)
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [me, 0], data)
    return y


@pl.jit.incore
def barrier_signal_notified_at_a_computed_cell(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # the cell is computed from rank and nranks: evaluated per rank, it is the barrier's
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pld.tensor.barrier(sig)
    right = (me + 1) % n
    pld.system.notify(sig, peer=right, offsets=[(right + n - 1) % n, 0], value=1, op=SET)  # W:TC705
    return y


# ---------------------------------------------------------------- TC709
@pl.jit.incore
def wait_for_zero(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=1, op=SET)
    pld.system.wait(sig, offsets=[0, 0], expected=0, cmp=GE)  # W:TC709
    return y


@pl.jit.incore
def wait_for_each_round_from_zero(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # round k waits for the k adds before it: round 0's wait is trivially true, by design
    me = pld.rank(pld.get_comm_ctx(sig))
    for k in pl.range(2):
        pld.system.wait(sig, offsets=[0, 0], expected=k, cmp=GE)
        pld.system.notify(sig, peer=1 - me, offsets=[0, 0], value=1, op=ADD)
    return y


# ---------------------------------------------------------------- TC710
@pl.jit.incore
def two_ranks_set_one_cell(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=SET)  # W:TC710
    if me == 0:
        pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=GE)
    return y


@pl.jit.incore
def two_ranks_set_their_own_cells(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.system.notify(sig, peer=0, offsets=[me, 0], value=1, op=SET)
    if me == 0:
        pld.system.wait(sig, offsets=[1, 0], expected=1, cmp=GE)
    return y


@pl.jit.incore
def second_setter_waits_for_the_first(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # rank 1 Sets rank 0's cell only after rank 0 set it and said so: the Sets are ordered
    me = pld.rank(pld.get_comm_ctx(sig))
    if me == 0:
        pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=SET)
        pld.system.notify(other, peer=1, offsets=[0, 0], value=1, op=SET)
        pld.system.wait(sig, offsets=[0, 0], expected=2, cmp=GE)
    if me == 1:
        pld.system.wait(other, offsets=[0, 0], expected=1, cmp=GE)
        pld.system.notify(sig, peer=0, offsets=[0, 0], value=2, op=SET)
    return y


# ---------------------------------------------------------------- TC711
@pl.jit.incore
def ge_one_of_two_producers_then_read_both(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # both ranks store a row into rank 0's copy and add 1; rank 0 waits for 1 and reads both
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.remote_store(pl.load(x, [0, 0], [1, SIZE]), data, 0, [me, 0])
    pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=ADD)
    if me == 0:
        pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=GE)  # W:TC711
        y = pl.store(pl.load(data, [0, 0], [W, SIZE]), [0, 0], y)
    return y


@pl.jit.incore
def ge_every_producer_then_read_both(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.remote_store(pl.load(x, [0, 0], [1, SIZE]), data, 0, [me, 0])
    pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=ADD)
    if me == 0:
        pld.system.wait(sig, offsets=[0, 0], expected=W, cmp=GE)
        y = pl.store(pl.load(data, [0, 0], [W, SIZE]), [0, 0], y)
    return y


@pl.jit.incore
def ge_one_then_read_own_row(sig: SIG, data: DATA, other: SIG, x: X, y: Y):
    # the row rank 0 reads is its own store, ordered by its own program order
    me = pld.rank(pld.get_comm_ctx(sig))
    pld.remote_store(pl.load(x, [0, 0], [1, SIZE]), data, 0, [me, 0])
    pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=ADD)
    if me == 0:
        pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=GE)
        y = pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)
    return y


FIRES = {
    "TC701": [set_then_add],
    "TC702": [eq_wait_below_the_total],
    "TC703": [ge_above_the_set_value, ge_above_the_sum_of_adds],
    "TC704": [notify_before_store, notify_before_async_wait],
    "TC705": [barrier_signal_also_notified, barrier_signal_notified_at_a_computed_cell],
    "TC706": [split_aiv_unguarded_notify],
    "TC707": [read_without_waiting],
    "TC708": [remote_load_without_waiting, get_without_waiting],
    "TC709": [wait_for_zero],
    "TC710": [two_ranks_set_one_cell],
    "TC711": [ge_one_of_two_producers_then_read_both],
}
NEAR_MISSES = {
    "TC701": [set_and_add_on_two_cells, set_and_add_on_a_cell_read_at_run_time],
    "TC702": [eq_wait_for_the_total, ge_wait_below_the_total],
    "TC703": [ge_at_the_sum_of_adds, ge_at_the_set_value, ge_on_a_cell_also_written_by_the_kernel],
    "TC704": [store_before_notify, rounds_of_store_then_notify, async_wait_before_notify],
    "TC705": [barrier_and_notify_on_separate_windows],
    "TC706": [split_aiv_guarded_notify, split_aiv_sharded_notify],
    "TC707": [store_before_notify, read_own_row_without_waiting],
    "TC708": [remote_load_after_the_wait, remote_load_of_a_row_nobody_writes, get_then_permit],
    "TC709": [wait_for_each_round_from_zero, ge_at_the_set_value],
    "TC710": [two_ranks_set_their_own_cells, second_setter_waits_for_the_first],
    "TC711": [ge_every_producer_then_read_both, ge_one_then_read_own_row],
}
