"""The rank's recorder sees every access an op makes.

The ops under test come from the op registry: every record implemented on
the rank (``RankContext``) that touches memory -- it declares a memory
effect, or it has a ``pl.tensor.*`` spelling (its operands may be tensors,
windows among them).  Each runs once on a recording context whose one sink
(``Probe``) collects the stream, with a window as the operand in question:
the probe must see an access of that window's memory, of the right kind.
A new op of that kind without an example here fails
``test_every_op_that_touches_memory_has_an_example``; an op whose record
forgets an operand's touch fails its example.
"""
import numpy as np
import pytest

import tilecomm.language  # noqa: F401  (declares the op records)
from tilecomm.check.events import ATOMIC, READ, WRITE
from tilecomm.ir.effects import Effect
from tilecomm.ops.registry import records
from tilecomm.runtime import RunConfig
from tilecomm.runtime.rank import recorder
from tilecomm.runtime.rank.context import RankContext
from tilecomm.runtime.rank.recorder import (Local, Recording, RecordingRankContext, Remote,
                                            Sink)
from tilecomm.runtime.values import Tile, WindowBuffer, WindowView, make_tile
from tilecomm.dtypes import FP16

MEMORY = {Effect.READ, Effect.WRITE, Effect.REMOTE_READ, Effect.REMOTE_WRITE}
SHAPE = (2, 4)


class Probe(Sink):
    """Collects every event's accesses and every collective's name."""

    def __init__(self):
        self.seen = []

    def after_op(self, ctx, ev):
        self.seen.append((ev.op, ev.accesses()))

    def after_collective(self, ctx, ev):
        self.seen.append((ev.op, ()))

    def after_issue(self, ctx, ev):
        # an asynchronous put: what its transfer will touch until its wait
        self.seen.append((ev.op, ev.accesses()))


class Peers:
    """A transport of two members whose copies are arrays of this process:
    enough for remote loads and stores, put and get."""

    def __init__(self):
        # views of one mapping, as every member's copy of a window is (an
        # array that owns its memory is a fresh tile to the recorder)
        mapped = np.zeros((2,) + SHAPE, np.float32)
        mapped[1] = np.arange(8, dtype=np.float32).reshape(SHAPE)
        self.copies = [mapped[0], mapped[1]]

    def window(self, key, peer):
        return peer

    def get(self, h, idx, dst):
        dst[...] = self.copies[h][idx] if idx else self.copies[h]

    def put(self, h, idx, src, atomic):
        region = self.copies[h][idx] if idx else self.copies[h]
        if atomic:
            region += src
        else:
            region[...] = src

    def signal(self, cell, op, value):
        raise AssertionError("no signal in these examples")

    try_wait = signal


@pytest.fixture
def rig():
    peers = Peers()
    ctx = RankContext(0, 2, None, peers, RunConfig())
    probe = Probe()
    ctx.__class__ = RecordingRankContext
    ctx._rec = Recording([probe], peers.signal)
    buf = WindowBuffer(1, "win", peers.copies[0].nbytes, (0, 1), ("seg0", "seg1"))
    win = WindowView(buf, SHAPE, "float32", peers.copies[0], 0)
    return ctx, win, probe


def tile(rows=1, value=1.0):
    return make_tile(np.full((rows, 4), value, np.float32))


def view_tile(win):
    """A tile that is a view of the window's memory (the call-site load's
    fast path hands these out)."""
    return win.local[0:1].view(Tile)


def put_async(c, w, method="put_async"):
    """An asynchronous put issued on a session of its own (never waited: the
    probe looks at the issue)."""
    c.async_frame()
    return getattr(c, method)(w, 1, np.ones(SHAPE, np.float32), c.async_session())


# method -> (the call, with the window; what the probe must see of it:
# ("local", kind) -- an access of this rank's copy -- or ("remote", kind))
EXAMPLES = {
    "load": (lambda c, w: c.load(w, [0, 0], [1, 4]), ("local", READ)),
    "store": (lambda c, w: c.store(tile(), [1, 0], w), ("local", WRITE)),
    "read": (lambda c, w: c.read(w, [1, 2]), ("local", READ)),
    "write": (lambda c, w: c.write(w, [1, 2], 3.0), ("local", WRITE)),
    "assemble": (lambda c, w: c.assemble(w, tile(), [1, 0]), ("local", WRITE)),
    "add": (lambda c, w: c.add(w, 2.0), ("local", READ)),
    "sub": (lambda c, w: c.sub(2.0, w), ("local", READ)),
    "mul": (lambda c, w: c.mul(w, 2.0), ("local", READ)),
    "div": (lambda c, w: c.div(w, 2.0), ("local", READ)),
    "maximum": (lambda c, w: c.maximum(w, w), ("local", READ)),
    "minimum": (lambda c, w: c.minimum(view_tile(w), tile()), ("local", READ)),
    "cast": (lambda c, w: c.cast(w, FP16), ("local", READ)),
    "move": (lambda c, w: c.move(view_tile(w), None), ("local", READ)),
    "matmul": (lambda c, w: c.matmul(w, np.ones((4, 2), np.float32)), ("local", READ)),
    "reshape": (lambda c, w: c.reshape(view_tile(w), [4, 1]), ("local", READ)),
    "row_sum": (lambda c, w: c.row_sum(view_tile(w), None), ("local", READ)),
    "slice_": (lambda c, w: c.slice_(view_tile(w), [1, 2], [0, 0]), ("local", READ)),
    "remote_load": (lambda c, w: c.remote_load(w, 1, [0, 0], [1, 4]), ("remote", READ)),
    "remote_store": (lambda c, w: c.remote_store(tile(), w, 1, [1, 0]), ("remote", WRITE)),
    "put": (lambda c, w: c.put(w, 1, np.ones(SHAPE, np.float32)), ("remote", WRITE)),
    "get": (lambda c, w: c.get(np.zeros(SHAPE, np.float32), 1, w), ("remote", READ)),
    "tile_put": (lambda c, w: c.tile_put(w, 1, np.ones(SHAPE, np.float32), tile()),
                 ("remote", WRITE)),
    "tile_get": (lambda c, w: c.tile_get(np.zeros(SHAPE, np.float32), 1, w, tile()),
                 ("remote", READ)),
    "put_async": (put_async, ("remote", WRITE)),
    "tile_put_async": (lambda c, w: put_async(c, w, "tile_put_async"), ("remote", WRITE)),
}

# the lowering's own forms, recorded like ops
SYNTAX = {
    "index": (lambda c, w: c.index(w, (1, 2)), ("local", READ)),
    "assign": (lambda c, w: c.assign(w, (slice(0, 1), slice(0, 4)), tile()), ("local", WRITE)),
}


def touching_methods() -> dict:
    """RankContext method -> op names, for every record that touches memory
    on the rank (collectives, notifies and waits are events of their own)."""
    out = {}
    for rec in records():
        if rec.collective or Effect.SIGNAL in rec.effects or Effect.WAIT in rec.effects:
            continue
        tensor_form = any(n.startswith("pl.tensor.") for n in (rec.name,) + rec.aliases)
        # (a tensor-form op that allocates makes its tensor: it touches none)
        if not (rec.effects & MEMORY or tensor_form and Effect.ALLOC not in rec.effects):
            continue
        for kind, impl in rec.impls.items():
            if kind != "host":
                out.setdefault(impl.__name__, set()).add(rec.name)
    return out


def test_every_op_that_touches_memory_has_an_example():
    methods = touching_methods()
    assert "assemble" in methods and "mul" in methods          # the registry says so
    missing = sorted(set(methods) - set(EXAMPLES))
    assert not missing, f"ops that touch memory without an example here: {missing}"


def _seen_on(win, accesses, where, kind):
    for a in accesses:
        if where == "local" and type(a) is Local and a.kind == kind and \
                np.shares_memory(a.array, win.local):
            return True
        if where == "remote" and type(a) is Remote and a.kind == kind and a.view is win and \
                a.peer == 1:
            return True
    return False


@pytest.mark.parametrize("method", sorted(EXAMPLES) + sorted(SYNTAX))
def test_the_recorder_sees_the_window_access(rig, method):
    ctx, win, probe = rig
    call, (where, kind) = {**EXAMPLES, **SYNTAX}[method]
    call(ctx, win)
    assert len(probe.seen) == 1, f"{method}: one event expected, got {probe.seen}"
    op, accesses = probe.seen[0]
    assert _seen_on(win, accesses, where, kind), \
        f"{op}: no {where} access of kind {kind} of the window among {accesses}"


def test_an_atomic_store_is_an_atomic_access(rig):
    ctx, win, probe = rig
    ctx.store(tile(), [0, 0], win, None, 1)
    ctx.remote_store(tile(), win, 1, [0, 0], 1)
    assert _seen_on(win, probe.seen[0][1], "local", ATOMIC)
    assert _seen_on(win, probe.seen[1][1], "remote", ATOMIC)


def test_an_op_inside_a_recorded_op_is_not_recorded_again(rig):
    ctx, win, probe = rig
    ctx.assign(win, (slice(0, 1), slice(0, 4)), tile())      # assign indexes internally
    assert [op for op, _ in probe.seen] == ["element assignment"]


def test_every_collective_and_signal_has_its_recording_form():
    for rec in records():
        impl = rec.impls.get("incore")
        if impl is None or not (rec.collective or Effect.SIGNAL in rec.effects or
                                Effect.WAIT in rec.effects):
            continue
        mine = vars(RecordingRankContext).get(impl.__name__)
        assert mine is not None and mine is not impl, f"{rec.name} is not recorded"


def test_an_op_with_a_memory_effect_and_no_touches_cannot_be_declared():
    class Fake:
        name = "pl.fake"
        collective = False
        notifies = None
        defers = False
        asynchronous = None
        touches = ()
        effects = frozenset({Effect.WRITE})
    with pytest.raises(AssertionError, match="no recording sink would see"):
        recorder._kind_of(Fake)
