"""The kernel data path per call site: what the lowering emits instead of the
plain tile ops where an InCore kernel calls them.

Each ``*_at`` method takes the call site's number first and does what the
plain op of the same name does, with less work:

* **checks once per site.**  A site remembers the last (shape, offsets,
  extents) it bounds-checked and the slices that came out; a loop that
  touches the same region again pays one tuple comparison.
* **regions resolved once per dispatch** (the rank's ``held_*`` dicts): a
  view load, a view remote load and a region-to-region copy keep the arrays
  they made, keyed by the identity of the tensor objects plus the offsets
  and extents, so a loop's next call returns the same view (or does one
  copy) without indexing again.  Sound because a tensor object's memory
  and shape never change while something holds it (nothing in the runtime
  reshapes an array in place), and only views are kept: a copying load
  still copies every time.  The rank empties them when the dispatch is
  done: they hold the dispatch's arguments.
* **views where the lowering proved them safe** (``view`` true): a load
  whose only use is an operand of the very next elementwise op or store of
  the same expression, with nothing that writes or synchronises evaluated in
  between, returns the region itself instead of a copy.  A loaded tile is a
  value snapshot; a view shows the same values because no write of this
  rank can happen before its one use, and a peer's write could only be
  ordered after the load through a notify of this rank, which cannot come
  before that use either.
* **no fresh pages**: a tile the site produced before and that nobody holds
  any more (its reference count says only the site's pool holds it) is
  written again instead of allocating a new one.  A fresh large array costs
  a page fault per 4 KiB on first touch -- far more than the arithmetic.
* **one pass for a stored result**: ``pl.store(pl.add(a, b), ...)`` adds
  straight into the stored region.
* **accumulations in place**: ``acc = pl.add(acc, x)`` steps between
  ``acc``'s binding and ``pl.store(acc, ...)`` compute into the stored region
  where the lowering proved that no read can tell (``accum_*``; the proof is
  in ``lower/sites.py``), so the store has nothing left to copy.

Anything these paths do not cover (valid extents, mixed dtypes, scalars,
clamping) goes through the plain op, so semantics stay the plain op's.  The
rank's recorder (``recorder.py``) records each call-site form as its plain
op's event; a run whose sinks need every load to copy (exploration) takes
``PlainPaths``, which sends each ``*_at`` method to its plain op."""
from __future__ import annotations

from operator import is_
from sys import getrefcount

import numpy as np

from .regions import region_index
from ....errors import RuntimeFault
from ...values import Tile, WindowView

# the elementwise ops with a call-site path, by the index the lowering emits
BINARY_NAMES = ("add", "sub", "mul", "maximum", "minimum")
BINARY_UFUNCS = (np.add, np.subtract, np.multiply, np.maximum, np.minimum)

POOL = 2            # buffers a site keeps: the live result and the one being made
# below this a fresh array comes from the allocator's free lists, already
# mapped (glibc serves requests under its 128 KiB mmap threshold from the
# heap): the pool's bookkeeping would cost more than it saves
POOL_MIN = 64 * 1024


class Site:
    """What one call site remembers between its executions (per rank
    thread: each thread's context has its own sites)."""

    __slots__ = ("key", "idx", "pool")

    def __init__(self):
        self.key = None         # (array shape, offsets, extents) last checked
        self.idx = None         # the slices that check produced
        self.pool = []          # tiles this site produced (reused once unreferenced)

    def region(self, a: np.ndarray, offsets, extents, what: str) -> tuple:
        key = (a.shape, offsets, extents)
        if key != self.key:
            self.idx = region_index(a, offsets, extents, what)
            self.key = key
        return self.idx

    def fresh(self, shape: tuple, dtype) -> Tile:
        """A tile of ``shape`` / ``dtype`` nobody else references."""
        pool = self.pool
        for i in range(len(pool)):
            # 2: the pool's reference and getrefcount's argument -- no name,
            # no view (a view's base is the tile) and no container holds it
            if getrefcount(pool[i]) == 2:
                t = pool[i]
                if t.shape == shape and t.dtype == dtype:
                    t.valid = None
                    return t
                del pool[i]
                break
        t = np.empty(shape, dtype).view(Tile)
        if len(pool) < POOL:
            pool.append(t)
        return t


class Accumulation:
    """An accumulation that may compute into the region its store writes
    (``SiteOps.accum_begin``): the output, the store's offsets, the tensors
    the steps read, and ``tile``, the region as a plain array for steps of
    ``shape`` / ``dtype`` (False where the path is declined -- the steps
    then make new tiles and the store copies, reporting whatever the plain
    store reports).  The region is a plain array, not a ``Tile``: a ufunc
    writing into a subclass costs a third more at small sizes, and only the
    next step and the final store ever see it (the lowering's proof)."""

    __slots__ = ("output", "offsets", "reads", "shape", "dtype", "tile", "step")

    def __init__(self, output, offsets, reads):
        self.output, self.offsets, self.reads = output, offsets, reads
        self.shape = self.dtype = self.tile = None
        # the last operands a step computed into ``tile`` with, and the same
        # operands as plain arrays: (lhs, rhs, plain lhs, plain rhs, tile)
        self.step = None

    def region(self, shape, dtype):
        """The region's array for steps of ``shape`` / ``dtype``, or False."""
        self.shape, self.dtype, self.tile = shape, dtype, False
        a = self.output.local if type(self.output) is WindowView else self.output
        if not isinstance(a, np.ndarray) or len(shape) > a.ndim or a.dtype != dtype:
            return False
        for t in self.reads:
            # a window's local array stands for every read of this rank's
            # copy (a remote load of this rank's own copy included)
            r = t.local if type(t) is WindowView else t
            if isinstance(r, np.ndarray) and np.may_share_memory(a, r):
                return False
        try:
            dst = a[region_index(a, self.offsets, shape, "pl.store region")]
        except RuntimeFault:
            return False
        if dst.shape == shape:
            self.tile = dst.view(np.ndarray)
        return self.tile


_SCALARS = (int, float)     # a Python scalar operand: numpy's weak promotion keeps the dtype


def _plain_array(x) -> bool:
    return type(x) is Tile and x.valid is None


class SiteOps:
    """Mixin of ``KernelOps``: the call-site forms of load, store and the
    elementwise ops (see the module docstring)."""

    sites: dict

    def _new_site(self, k: int) -> Site:
        s = self.sites[k] = Site()
        return s

    def load_at(self, site, view, tensor, offsets, shapes, valid_shape=None,
                target_memory=None, clamp=False):
        if view:
            # the view this site made of the same tensor object's region
            h = self.held_loads.get(site)
            if h is not None and h[0] is tensor and h[1] == offsets and h[2] == shapes and \
                    valid_shape is None and not clamp:
                return h[3]
        if valid_shape is not None or clamp:
            return self.load(tensor, offsets, shapes, valid_shape, target_memory, clamp)
        a = tensor.local if type(tensor) is WindowView else tensor
        s = self.sites.get(site) or self._new_site(site)
        key = (a.shape, offsets, shapes)          # Site.region, inline: the hottest path
        if key != s.key:
            s.idx = region_index(a, offsets, shapes, "pl.load region")
            s.key = key
        src = a[s.idx]
        if view:
            # handing out one object again is safe: a view load's only use
            # is the next op, so no earlier result of this site is still read
            t = src.view(Tile)
            self.held_loads[site] = (tensor, offsets, shapes, t)
            return t
        if src.nbytes < POOL_MIN:
            return src.copy().view(Tile)
        t = s.fresh(src.shape, src.dtype)
        np.copyto(t, src)
        return t

    def store_at(self, site, tile, offsets, output_tensor, shapes=None, atomic=0):
        if type(tile) is Tile and tile.valid is None and shapes is None and not atomic:
            a = output_tensor.local if type(output_tensor) is WindowView else output_tensor
            s = self.sites.get(site) or self._new_site(site)
            key = (a.shape, offsets, tile.shape)
            if key != s.key and tile.ndim <= a.ndim:
                s.idx = region_index(a, offsets, tile.shape, "pl.store region")
                s.key = key
            if key == s.key:
                dst = a[s.idx]
                if tile.dtype == dst.dtype:
                    np.copyto(dst, tile)
                else:
                    np.copyto(dst, tile, casting="same_kind")
                return output_tensor
        return self.store(tile, offsets, output_tensor, shapes, atomic)

    def copy_at(self, site, site2, tensor, offsets, shapes, dst_offsets, output_tensor):
        """``pl.store(pl.load(tensor, offsets, shapes), dst_offsets,
        output_tensor)`` where the lowering proved the load a view: one copy
        from region to region, both checked once per site (the load's
        first, as the two ops would).  Sites ``site`` and ``site2`` are the
        load's and the store's."""
        h = self.held_copies.get(site)
        if h is not None and h[0] is tensor and h[1] is output_tensor and h[2] == offsets and \
                h[3] == shapes and h[4] == dst_offsets:
            h[6][...] = h[5]                        # the regions this dispatch resolved
            return output_tensor
        a = tensor.local if type(tensor) is WindowView else tensor
        d = output_tensor.local if type(output_tensor) is WindowView else output_tensor
        s = self.sites.get(site) or self._new_site(site)
        key = (a.shape, offsets, shapes, d.shape, dst_offsets)
        if key != s.key:
            src = a[region_index(a, offsets, shapes, "pl.load region")]
            s.idx = None
            if getattr(a, "valid", None) is None and src.ndim <= d.ndim and \
                    src.dtype == d.dtype:
                di = region_index(d, dst_offsets, src.shape, "pl.store region")
                if d[di].shape == src.shape:
                    s.idx = (region_index(a, offsets, shapes, "pl.load region"), di)
            s.key = key
        if s.idx is None:                           # the two call-site forms, as written
            return self.store_at(site2, self.load_at(site, True, tensor, offsets, shapes),
                                 dst_offsets, output_tensor)
        si, di = s.idx
        src, dst = a[si].view(np.ndarray), d[di].view(np.ndarray)
        self.held_copies[site] = (tensor, output_tensor, offsets, shapes, dst_offsets, src, dst)
        # same dtype, same shape: plain element assignment copies exactly
        # (and copies the source first where the two overlap)
        dst[...] = src
        return output_tensor

    def binary_at(self, site, op, lhs, rhs):
        if type(lhs) is Tile and type(rhs) is Tile and lhs.valid is None and \
                rhs.valid is None and lhs.shape == rhs.shape and lhs.dtype == rhs.dtype:
            if lhs.nbytes < POOL_MIN:
                return BINARY_UFUNCS[op](lhs, rhs)       # a Tile: numpy keeps the subclass
            s = self.sites.get(site) or self._new_site(site)
            out = s.fresh(lhs.shape, lhs.dtype)
            BINARY_UFUNCS[op](lhs, rhs, out=out)
            return out
        if type(rhs) in _SCALARS and type(lhs) is Tile and lhs.valid is None:
            return BINARY_UFUNCS[op](lhs, rhs)           # what the plain op computes
        return getattr(self, BINARY_NAMES[op])(lhs, rhs)

    def store_binary_at(self, site, op, lhs, rhs, offsets, output_tensor):
        """``pl.store(<op>(lhs, rhs), offsets, output_tensor)``: the result
        written once, into the stored region (numpy's ufuncs give the same
        values when an operand overlaps the output)."""
        if _plain_array(lhs) and _plain_array(rhs) and lhs.shape == rhs.shape and \
                lhs.dtype == rhs.dtype:
            a = output_tensor.local if type(output_tensor) is WindowView else output_tensor
            if lhs.ndim <= a.ndim:
                s = self.sites.get(site) or self._new_site(site)
                dst = a[s.region(a, offsets, lhs.shape, "pl.store region")]
                if dst.dtype == lhs.dtype:
                    BINARY_UFUNCS[op](lhs, rhs, out=dst)
                    return output_tensor
        return self.store(getattr(self, BINARY_NAMES[op])(lhs, rhs), offsets, output_tensor,
                          None, 0)


    def accum_begin(self, site, offsets, output_tensor, reads):
        """The handle of an accumulation ending in ``pl.store(acc, offsets,
        output_tensor)``; ``reads``: the tensors its steps read.  The rank's
        own thread keeps it for the dispatch (``accums``, emptied when the
        dispatch is done: it holds the output, which must not outlive the
        dispatch's arguments), so a loop around the accumulation finds its
        region and makes its tile once; a task's thread makes one each time."""
        if self.agent is None:
            a = self.accums.get(site)
            if a is not None and a.output is output_tensor and a.offsets == offsets and \
                    len(a.reads) == len(reads) and all(map(is_, a.reads, reads)):
                return a
            a = self.accums[site] = Accumulation(output_tensor, offsets, reads)
            return a
        return Accumulation(output_tensor, offsets, reads)

    def accum_at(self, site, op, lhs, rhs, acc):
        """A step ``acc = <op>(lhs, rhs)`` of an accumulation: into the stored
        region where ``acc`` (``accum_begin``) has one for these operands."""
        if acc is not None:
            step = acc.step
            # the same operand objects as the last step, into the same
            # region: the checks below passed for them then and still hold
            # (a tile's shape, dtype and valid extent do not change)
            if step is not None and step[0] is lhs and step[1] is rhs and step[4] is acc.tile:
                BINARY_UFUNCS[op](step[2], step[3], step[4])
                return step[4]
            t = acc.tile
            if (lhs is t or type(lhs) is Tile and lhs.valid is None) and \
                    (rhs is t or type(rhs) is Tile and rhs.valid is None) and \
                    lhs.shape == rhs.shape and lhs.dtype == rhs.dtype:
                if lhs.shape != acc.shape or lhs.dtype != acc.dtype:
                    t = acc.region(lhs.shape, lhs.dtype)
                if t is not False:
                    # plain arrays: a ufunc costs less without the subclass;
                    # an operand that is the region itself (the previous
                    # step's result) overlaps the output exactly: numpy gives
                    # the elementwise values as if it did not
                    a = lhs if lhs is t else lhs.view(np.ndarray)
                    b = rhs if rhs is t else rhs.view(np.ndarray)
                    BINARY_UFUNCS[op](a, b, t)
                    acc.step = (lhs, rhs, a, b, t)
                    return t
            # the copying step takes tiles: the region as one
            if lhs is acc.tile:
                lhs = lhs.view(Tile)
            if rhs is acc.tile:
                rhs = rhs.view(Tile)
        return self.binary_at(site, op, lhs, rhs)

    def accum_store_at(self, site, tile, offsets, output_tensor, acc):
        """The store ending an accumulation: nothing to copy where the last
        step computed into the region (the same output, offsets and shape:
        the lowering proved none of them changed in between)."""
        if acc is not None and tile is acc.tile:
            return output_tensor
        return self.store_at(site, tile, offsets, output_tensor, None, 0)


class PlainPaths:
    """The call-site methods of a recording context that must not take the
    fast paths: each runs the plain op, which the recorder records, so its
    sinks see every access with its exact region (and no buffer is reused
    behind them)."""

    def load_at(self, site, view, *args):
        return self.load(*args)

    def remote_load_at(self, site, view, *args):
        return self.remote_load(*args)

    def store_at(self, site, *args):
        return self.store(*args)

    def binary_at(self, site, op, lhs, rhs):
        return getattr(self, BINARY_NAMES[op])(lhs, rhs)

    def store_binary_at(self, site, op, lhs, rhs, offsets, output_tensor):
        return self.store(getattr(self, BINARY_NAMES[op])(lhs, rhs), offsets, output_tensor,
                          None, 0)

    def copy_at(self, site, site2, tensor, offsets, shapes, dst_offsets, output_tensor):
        return self.store(self.load(tensor, offsets, shapes), dst_offsets, output_tensor)

    def accum_begin(self, site, offsets, output_tensor, reads):
        return None

    def accum_at(self, site, op, lhs, rhs, acc):
        return getattr(self, BINARY_NAMES[op])(lhs, rhs)

    def accum_store_at(self, site, tile, offsets, output_tensor, acc):
        return self.store(tile, offsets, output_tensor, None, 0)
