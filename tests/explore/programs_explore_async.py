"""Asynchronous puts under exploration (test_explore_async.py), in the host
program shape of programs_explore.py: where a transfer lands -- at once, or
at the wait of its event -- is a choice of the schedule.

* ``published``: each rank puts its first row into the next rank's window
  with pld.tensor.put_async and announces it; ``early=True`` notifies before
  waiting the event (the bug), the twin after.
* ``peek``: each rank puts its first row into its own window and reads the
  destination before the event's wait (into ``y`` row 0) and after it (row
  1): what the first read sees is the schedule's landing choice.
"""
import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_explore import GE, R, S, SET, SIG, WIN, X, Y, main_of


def published_kernel(early: bool):
    @pl.jit.incore
    def published(x: X, y: Y, win: WIN, sig: SIG) -> pl.Tensor[[R, S], pl.FP32]:
        ctx = pld.get_comm_ctx(sig)
        nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
        sess = pld.system.async_session()
        evt = pld.tensor.put_async(win, nxt, x, sess, [0, 0], [0, 0], [1, S])
        if early:
            pld.system.notify(sig, peer=nxt, offsets=[0, 0], value=1, op=SET)
            pld.system.wait_async_event(evt, sess)
        else:
            pld.system.wait_async_event(evt, sess)
            pld.system.notify(sig, peer=nxt, offsets=[0, 0], value=1, op=SET)
        pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=GE)
        y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
        return y
    return published


def published_reference(xs):
    ys = np.zeros_like(xs)
    ys[:, 0] = np.roll(xs[:, 0], 1, axis=0)
    return ys


def peek_kernel(look_early: bool):
    @pl.jit.incore
    def peek(x: X, y: Y, win: WIN, sig: SIG) -> pl.Tensor[[R, S], pl.FP32]:
        me = pld.rank(pld.get_comm_ctx(sig))
        sess = pld.system.async_session()
        evt = pld.tensor.put_async(win, me, x, sess, [0, 0], [0, 0], [1, S])
        if look_early:
            y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)     # before the wait
        pld.system.wait_async_event(evt, sess)
        y = pl.store(pl.load(win, [0, 0], [1, S]), [1, 0], y)
        return y
    return peek


def peek_reference(xs):
    """The twin: row 1 holds the own first row, nothing else is written."""
    ys = np.zeros_like(xs)
    ys[:, 1] = xs[:, 0]
    return ys


published = main_of(published_kernel(True))
published_twin = main_of(published_kernel(False))
peek = main_of(peek_kernel(True))
peek_twin = main_of(peek_kernel(False))
