"""What a call site resolves once per dispatch (``tile/site_ops.py``, the
rank's ``held_*`` dicts): a view load's tile, a view remote load's tile per
peer, a copy's two regions, an accumulation step's plain operands.  Each is
used again only for the same tensor objects, offsets and extents: every
call here gives what the plain op gives on the same arrays (numpy), also
when the tensor's contents, the tensor object, the offsets or the peer
change between calls, and nothing is held once the dispatch is done."""
import gc
import sys
import weakref

import numpy as np
import pytest

from tilecomm.errors import RuntimeFault
from tilecomm.runtime import RunConfig
from tilecomm.runtime.rank.context import RankContext
from tilecomm.runtime.values import Tile, WindowBuffer, WindowView

SHAPE = (4, 6)
ADD, SUB, MUL = 0, 1, 2


class Peers:
    """A transport of three members whose copies of a window are views of
    one array of this process (``mapped`` and ``other`` by the window's
    name), each mapped (``peer_view``), as shm maps them."""

    def __init__(self, n=3):
        self.mapped = np.zeros((n,) + SHAPE, np.float32)
        self.other = np.zeros((n,) + SHAPE, np.float32)

    def copies(self, key):
        return self.other if key.segments[0] == "other" else self.mapped

    def window(self, key, peer):
        return self.copies(key)[peer]

    def peer_view(self, key, peer):
        return self.copies(key)[peer]

    def get(self, h, idx, dst):
        dst[...] = h[idx]

    def signal(self, cell, op, value):
        raise AssertionError("no signal in these examples")

    try_wait = signal


class Control:
    def publish_done(self, device, seq):
        pass


def window(peers, name="win"):
    buf = WindowBuffer(1, name, peers.mapped[0].nbytes, (0, 1, 2), (name, "s1", "s2"))
    return WindowView(buf, SHAPE, "float32", peers.copies(buf)[0], 0)


@pytest.fixture
def rig():
    peers = Peers()
    ctx = RankContext(0, 3, Control(), peers, RunConfig())
    return ctx, peers, np.random.default_rng(3)


def fill(a, rng):
    a[...] = rng.integers(-9, 9, a.shape)


def test_view_load_follows_contents_tensor_and_offsets(rig):
    ctx, _, rng = rig
    x, z = np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float32)
    # one thing changes from each call to the next
    for src, off in [(x, (0, 0)), (x, (0, 0)), (x, (1, 2)), (z, (1, 2)), (z, (2, 1)),
                     (z, (2, 1)), (x, (2, 1))]:
        fill(x, rng)
        fill(z, rng)
        got = ctx.load_at(1, True, src, off, (2, 3))
        assert type(got) is Tile and got.valid is None
        np.testing.assert_array_equal(got, src[off[0]:off[0] + 2, off[1]:off[1] + 3])
    # a copying load at the same site still copies: later writes stay out
    got = ctx.load_at(1, False, z, (2, 1), (2, 3))
    want = z[2:4, 1:4].copy()
    fill(z, rng)
    np.testing.assert_array_equal(got, want)


def test_view_load_with_valid_shape_or_clamp_takes_the_plain_op(rig):
    ctx, _, rng = rig
    x = np.zeros(SHAPE, np.float32)
    fill(x, rng)
    ctx.load_at(1, True, x, (0, 0), (2, 3))
    got = ctx.load_at(1, True, x, (0, 0), (2, 3), (1, 2))
    want = ctx.load(x, (0, 0), (2, 3), (1, 2))
    assert got.valid == want.valid == (1, 2)
    np.testing.assert_array_equal(got, want)


def test_view_remote_load_per_peer_window_and_offsets(rig):
    ctx, peers, rng = rig
    win, other = window(peers), window(peers, "other")
    # one thing changes from each call to the next; a peer is any integer
    for w, peer, off in [(win, 1, (0, 0)), (win, 1, (0, 0)), (win, 2, (0, 0)),
                         (win, 1, (0, 0)), (win, np.int64(2), (0, 0)), (win, np.array(1), (0, 0)),
                         (other, 1, (0, 0)), (other, 1, (2, 3)), (win, 1, (2, 3)),
                         (win, 0, (2, 3))]:
        fill(peers.mapped, rng)
        fill(peers.other, rng)
        got = ctx.remote_load_at(6, True, w, peer, off, (2, 3))
        assert type(got) is Tile
        copies = peers.other if w is other else peers.mapped
        np.testing.assert_array_equal(got, copies[int(peer), off[0]:off[0] + 2,
                                                  off[1]:off[1] + 3])


def test_remote_load_peer_out_of_range_still_fails_once_held(rig):
    ctx, peers, _ = rig
    win = window(peers)
    ctx.remote_load_at(6, True, win, 2, (0, 0), (2, 3))
    for bad in (-1, 3):
        with pytest.raises(RuntimeFault, match="peer"):
            ctx.remote_load_at(6, True, win, bad, (0, 0), (2, 3))


def test_copy_follows_contents_tensors_and_offsets(rig):
    ctx, _, rng = rig
    x, z = np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float32)
    y, w = np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float32)
    # one thing changes from each call to the next
    for src, off, dst, doff in [(x, (0, 0), y, (0, 0)), (x, (0, 0), y, (0, 0)),
                                (z, (0, 0), y, (0, 0)), (z, (0, 0), w, (0, 0)),
                                (z, (1, 1), w, (0, 0)), (z, (1, 1), w, (2, 3)),
                                (z, (1, 1), w, (2, 3))]:
        fill(x, rng)
        fill(z, rng)
        y_before, w_before = y.copy(), w.copy()
        assert ctx.copy_at(1, 2, src, off, (2, 3), doff, dst) is dst
        want = {id(y): y_before, id(w): w_before}
        want[id(dst)][doff[0]:doff[0] + 2, doff[1]:doff[1] + 3] = \
            src[off[0]:off[0] + 2, off[1]:off[1] + 3]
        np.testing.assert_array_equal(y, want[id(y)])
        np.testing.assert_array_equal(w, want[id(w)])


def test_copy_within_one_array_overlapping_equals_numpy(rig):
    ctx, _, rng = rig
    x = np.zeros(SHAPE, np.float32)
    for _ in range(2):
        fill(x, rng)
        want = x.copy()
        want[1:3, 1:4] = want[0:2, 0:3].copy()
        ctx.copy_at(1, 2, x, (0, 0), (2, 3), (1, 1), x)
        np.testing.assert_array_equal(x, want)


def test_copy_into_a_window_view(rig):
    ctx, peers, rng = rig
    win = window(peers)
    x = np.zeros(SHAPE, np.float32)
    for _ in range(2):
        fill(x, rng)
        ctx.copy_at(1, 2, x, (1, 0), (2, 6), (0, 0), win)
        np.testing.assert_array_equal(peers.mapped[0, 0:2], x[1:3])


def accumulate(ctx, peers, win, y, x, ops, offsets=(1, 1)):
    """acc = load of the own copy; acc = <op>(acc, peer's copy) per peer;
    store into y -- as the lowering emits it for the mesh sum."""
    acc = ctx.load_at(3, True, win, (0, 0), (2, 3))
    h = ctx.accum_begin(4, offsets, y, (win, x))
    for p, op in zip((1, 2), ops):
        acc = ctx.accum_at(5, op, acc, ctx.remote_load_at(6, True, win, p, (0, 0), (2, 3)), h)
    return ctx.accum_store_at(7, acc, offsets, y, h)


@pytest.mark.parametrize("ops", [(ADD, ADD), (SUB, MUL)])
def test_accumulation_steps_follow_contents_operands_and_output(rig, ops):
    ctx, peers, rng = rig
    win = window(peers)
    x = np.zeros(SHAPE, np.float32)
    y, w = np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float32)
    ufuncs = {ADD: np.add, SUB: np.subtract, MUL: np.multiply}
    for out, off in [(y, (1, 1)), (y, (1, 1)), (w, (1, 1)), (y, (2, 0)), (y, (2, 0))]:
        fill(peers.mapped, rng)
        y_before, w_before = y.copy(), w.copy()
        assert accumulate(ctx, peers, win, out, x, ops, off) is out
        r = peers.mapped[0, 0:2, 0:3]
        for p, op in zip((1, 2), ops):
            r = ufuncs[op](r, peers.mapped[p, 0:2, 0:3])
        want = {id(y): y_before, id(w): w_before}
        want[id(out)][off[0]:off[0] + 2, off[1]:off[1] + 3] = r
        np.testing.assert_array_equal(y, want[id(y)])
        np.testing.assert_array_equal(w, want[id(w)])


def test_accumulation_step_with_new_operand_objects(rig):
    ctx, _, rng = rig
    y = np.zeros(SHAPE, np.float32)
    h = ctx.accum_begin(4, (0, 0), y, ())
    a, b = np.zeros((2, 3), np.float32).view(Tile), np.zeros((2, 3), np.float32).view(Tile)
    for i in range(4):
        fill(a, rng)
        fill(b, rng)
        if i == 2:
            a = a.copy()            # the same values in another object
        c = rng.integers(-9, 9, (2, 3)).astype(np.float32).view(Tile)
        # the last step has the same left operand as the one before
        acc = ctx.accum_at(5, SUB, a, b, h)
        acc = ctx.accum_at(5, MUL, acc, b, h)
        acc = ctx.accum_at(5, ADD, acc, c, h)
        ctx.accum_store_at(7, acc, (0, 0), y, h)
        np.testing.assert_array_equal(y[0:2, 0:3], (a - b) * b + c)


def test_nothing_is_held_once_the_dispatch_is_done(rig):
    ctx, peers, rng = rig
    win = window(peers)
    x, y = np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float32)
    fill(peers.mapped, rng)
    # every view of a peer's copy keeps the mapping alive (its base); the
    # window keeps each peer's mapped copy from its first use on
    for p in (1, 2):
        ctx.remote_load_at(8, True, win, p, (0, 0), (2, 3))
    ctx.dispatch_done(0)
    refs = [sys.getrefcount(o) for o in (win, peers.mapped)]
    ctx.copy_at(1, 2, x, (0, 0), (2, 3), (0, 0), win)
    accumulate(ctx, peers, win, y, x, (ADD, ADD))
    gone = [weakref.ref(t) for t in (x, y)]
    assert ctx.held_loads and ctx.held_remote and ctx.held_copies and ctx.accums
    ctx.dispatch_done(1)
    assert not (ctx.held_loads or ctx.held_remote or ctx.held_copies or ctx.accums)
    del x, y
    gc.collect()
    assert [r() for r in gone] == [None, None]
    assert [sys.getrefcount(o) for o in (win, peers.mapped)] == refs
