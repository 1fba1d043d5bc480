"""The rank's recorder: one stream of events for every checker.

Tracing, argument dumps, race checking and exploration all need the same
facts of a rank's run: each access of memory an op makes (which operand,
which region, read / write / atomic, the user's line), each notify and wait,
each deferred condition, each collective, the tasks and the dispatches.  A
run that asks for any of them switches the rank's context to
``RecordingRankContext`` (``artefacts.RankArtefacts``: once per run, by
class) and sets ``_rec``, the run's ``Recording``: its sinks, in order.  A
run that records nothing keeps the plain ``RankContext``, which carries no
recording code at all.

The recording context's methods are made here, from the op records: every
record declared with a rank-side implementation (``ops/registry.py``) is
handed to ``declare``, which installs the wrapper its effects call for --

=============  ==============================================================
OP             the record's ``touches`` (``ir.effects.Touch``): the accesses
               are computed from the call's arguments (``touched.py``)
NOTIFY         ``pld.system.notify``: the cell, op, value; the value it left
WAIT           a blocking wait: the cell, condition and where it blocks
DEFER          a deferred condition registered on the running task
COLLECTIVE     a ``pld.tensor.*`` collective: its operands, in order
ISSUE          an asynchronous put (``pld.tensor.put_async``): its touches are
               what the transfer will touch, from the issue until the wait of
               its event -- not in the call itself
COMPLETE       the wait of an asynchronous put's event: the transfer lands
               (if it has not) and is ordered before what follows
=============  ==============================================================

-- and a record with a memory effect that none of them covers is refused
there, so an op no sink sees cannot be declared.  Besides ops: RELEASE (a
watcher's wait for a deferred condition), AWAIT_DISPATCH (a dispatch waiting
for another rank's), DISPATCH_DONE, and the lowering's own forms (element
assignment and indexing, the call-site forms of loads, stores and
elementwise ops) as OP events with their touches.

A sink (``Sink``) defines the hooks it needs, ``before_<kind>`` /
``after_<kind>`` / ``failed_<kind>`` taking ``(ctx, event)``, plus
``begin_dispatch`` / ``end_dispatch`` / ``task_scope`` /
``conditions_held`` / ``finish``; the recording calls only the hooks a sink
defines.  Sinks run in the order of their ``ORDER``, and that order is the
contract, stated here rather than left to a class hierarchy:

1. exploration (``exploring.py``) -- before anything else records an
   operation, the rank takes its turn;
2. argument dumps (``argdumps.py``);
3. tracing (``tracing.py``) -- its slice starts after the turn is taken;
4. race checking (``racing.py``): it is the one sink that wraps an
   operation itself (``sequenced_signal``: a notify's signal runs under the
   sequencer lock of its cell, which numbers it in the cell's modification
   order);
5. reads of unwritten elements (``unwritten.py``, ``poison_windows``) --
   last: it only looks at the memory an op read once the op is done.

So a notify is: explore takes the turn, trace notes the time, the race sink
runs the signal in its sequencer, then (``after``, same order) explore logs
the step and wakes ranks parked on the cell, trace closes its slice, the
race sink logs the notify with its number.  The signal itself goes to the
transport below any sink's endpoint (``Recording.signal``): no sink needs a
side channel to take its turn first.

An operation made inside one the recorder is already recording (a
call-site form falling back to its plain op, a collective's own loads) is
not recorded again: the outer event covers it.
"""
from __future__ import annotations

import inspect
import sys
from typing import NamedTuple

import numpy as np

from ...check.events import ATOMIC, READ, WRITE
from ...errors import InternalError
from ...ir.effects import Effect
from ..values import Tile, WindowView
from .context import RankContext
from ...transport.memops import address
from .tile.kernel_ops import arr
from .tile.site_ops import BINARY_NAMES, PlainPaths
from . import touched

OP, NOTIFY, WAIT, DEFER, COLLECTIVE, RELEASE, AWAIT_DISPATCH, DISPATCH_DONE = (
    "op", "notify", "wait", "defer", "collective", "release", "await_dispatch", "dispatch_done")
ISSUE, COMPLETE = "issue", "complete"
KINDS = (OP, NOTIFY, WAIT, DEFER, COLLECTIVE, RELEASE, AWAIT_DISPATCH, DISPATCH_DONE, ISSUE,
         COMPLETE)
PHASES = ("before", "after", "failed")
# the hooks that are not per event kind
RUN_HOOKS = ("begin_dispatch", "end_dispatch", "task_scope", "conditions_held")


class Local:
    """An access of local memory: ``array`` is the region touched (an ndarray
    view; whether it lies in a window the sink finds out)."""

    __slots__ = ("kind", "array")

    def __init__(self, kind, array):
        self.kind, self.array = kind, array


class Remote:
    """An access of member ``peer``'s copy of window ``view``: ``index`` into
    it (every member's copy has this rank's layout)."""

    __slots__ = ("kind", "view", "peer", "index")

    def __init__(self, kind, view, peer, index):
        self.kind, self.view, self.peer, self.index = kind, view, peer, index


class Event:
    """One operation as the sinks see it.  ``args`` are the implementation's
    arguments (``params`` names them); sinks keep what they need between
    their before and after hooks in ``notes``."""

    __slots__ = ("kind", "op", "params", "args", "loc", "_plan", "_accesses", "result",
                 "exc", "notes", "cell", "caller")

    def __init__(self, kind, op, params, args, loc=-1, plan=()):
        self.kind, self.op, self.params, self.args, self.loc = kind, op, params, args, loc
        self._plan = plan
        self._accesses = None
        self.result = self.exc = self.cell = None
        self.notes: dict = {}
        # the frame that called the op (the lowered code's, for an op it
        # makes): a sink finds the user's line from it without a stack walk
        self.caller = None

    def arg(self, name):
        return self.args[self.params.index(name)]

    def remote(self) -> bool:
        """Whether the operation touches a peer's copy (a remote load / store,
        a put / get)."""
        return any(step[4] is not None for step in self._plan)

    def accesses(self) -> list:
        """The memory the operation touches (``Local`` / ``Remote``), computed
        once from its arguments."""
        got = self._accesses
        if got is None:
            got = self._accesses = _accesses(self._plan, self.args)
        return got


def _accesses(plan, args) -> list:
    out = []
    for pos, region, using, atomic, peer, effect in plan:
        operand = args[pos]
        if peer is None:
            a = getattr(operand, "local", operand)
            if isinstance(a, np.ndarray) and a.base is None:
                # an array that owns its memory (a fresh tile, a result): no
                # window, tensor argument or other thread can reach it
                continue
        where = touched.whole(operand) if region is None else \
            region(*[args[i] for i in using])
        if where is None:
            continue
        if effect in (Effect.READ, Effect.REMOTE_READ):
            kind = READ
        else:
            kind = ATOMIC if atomic is not None and args[atomic] else WRITE
        if peer is None:
            out.append(Local(kind, where))
        else:
            out.append(Remote(kind, operand, args[peer], where))
    return out


def _private(ctx, plan, args) -> bool:
    """Whether no operand an op touches is memory a sink records: each is an
    array that owns its memory (a fresh tile, a result), a number, or an
    array no sink tracks at the moment (``Sink.tracks``: a view of a plain
    tensor while no task can run beside the op) -- ``_accesses`` would find
    nothing the sinks keep; this is its check without computing a region."""
    tracks = ctx._rec.tracks
    for step in plan:
        if step[4] is not None:                 # a peer's copy
            return False
        a = args[step[0]]
        if type(a) is WindowView:
            return False
        if isinstance(a, np.ndarray):
            if a.base is None:
                continue
            if tracks is None:
                return False
            # an array lies in one allocation: its first byte says which
            addr = address(a)
            for t in tracks:
                if t(ctx, addr):
                    return False
        elif not isinstance(a, (int, float, np.generic)):
            return False
    return True


def _plan(touches, params) -> tuple:
    """A record's touches as positions into its implementation's arguments."""
    pos = params.index
    return tuple((pos(t.param), t.region, tuple(pos(p) for p in t.using),
                  pos(t.atomic) if t.atomic else None, pos(t.peer) if t.peer else None,
                  t.effect) for t in touches)


class Sink:
    """What a recording sink may define (every hook optional; see the module
    doc for the events and their order).

    ``ORDER`` places the sink on the stream; ``PLAIN_SITES`` true makes the
    run's loads copy rather than view window memory (exploration: a view
    would read the memory at its use, a later step than the load's);
    ``sequenced_signal(ctx, event, signal)`` -- defined by at most one sink
    of a run -- runs a notify's ``signal()`` and returns its result."""

    ORDER = 0
    PLAIN_SITES = False
    # true: the sink's op hooks have nothing to do for an op that touches
    # only memory of its own (fresh tiles, scalars: ``_private``); when every
    # sink with op hooks says so, such ops run unrecorded -- most of a
    # kernel's ops are arithmetic on its own tiles, or reads of its inputs
    SHARED_OPS_ONLY = False
    # ``tracks(ctx, addr)`` (with SHARED_OPS_ONLY): whether the sink would
    # record an access of the array whose first byte is at ``addr`` now; a
    # sink without it is taken to record every array that is not its own
    tracks = None

    def finish(self, failed: bool) -> None:
        """The run ended on this rank (its files, its last events); ``failed``:
        it failed or was aborted here, and the other ranks are being stopped."""


def _defines(sink, name: str) -> bool:
    return getattr(type(sink), name, None) is not None and \
        getattr(type(sink), name) is not getattr(Sink, name, None)


class Dispatch(NamedTuple):
    """One dispatch as ``begin_dispatch(ctx, d)`` / ``end_dispatch(ctx, d,
    finished)`` see it: the rank's ``k``-th of the run (its dispatch number
    ``seq`` across runs), function ``fname`` of ``image`` called at span
    ``loc`` with argument values ``vals``; ``dir`` its artefact directory
    (None: the run writes no files)."""

    k: int
    fname: str
    image: object
    vals: tuple
    loc: int
    seq: int
    dir: str | None


class Recording:
    """A run's sinks on one rank, in stream order, with each hook's list of
    the sinks' bound methods (a sink is called only for what it defines)."""

    def __init__(self, sinks, signal, read_cell=None):
        if not _DECLARED:
            # the wrappers come from the op records: a process that never
            # loaded them would record nothing, silently
            raise InternalError("a recording run in a process where no op record is declared "
                                "(tilecomm.ops is not loaded)")
        self.sinks = tuple(sorted(sinks, key=lambda s: s.ORDER))
        for kind in KINDS:
            for phase in PHASES:
                name = f"{phase}_{kind}"
                setattr(self, name, tuple(getattr(s, name) for s in self.sinks
                                          if _defines(s, name)))
        for name in RUN_HOOKS:
            setattr(self, name, tuple(getattr(s, name) for s in self.sinks
                                      if _defines(s, name)))
        sequencers = [s.sequenced_signal for s in self.sinks if _defines(s, "sequenced_signal")]
        if len(sequencers) > 1:
            raise InternalError("two recording sinks sequence the signals of one run")
        self.sequencer = sequencers[0] if sequencers else None
        self.plain_sites = any(s.PLAIN_SITES for s in self.sinks)
        op_sinks = [s for s in self.sinks if any(_defines(s, f"{p}_{OP}") for p in PHASES)]
        self.skip_private = all(s.SHARED_OPS_ONLY for s in op_sinks)
        self.tracks = tuple(s.tracks for s in op_sinks) \
            if all(s.tracks is not None for s in op_sinks) else None
        # the transport's own signal and cell read, below any sink's endpoint
        self.signal, self.read_cell = signal, read_cell

    def context_class(self) -> type:
        return PlainSitesRecordingRankContext if self.plain_sites else RecordingRankContext

    def begin(self, ctx, d: "Dispatch") -> None:
        for h in self.begin_dispatch:
            h(ctx, d)

    def end(self, ctx, d: "Dispatch", finished: bool) -> None:
        for h in self.end_dispatch:
            h(ctx, d, finished)

    def held(self, task, conds, read) -> None:
        for h in self.conditions_held:
            h(task, conds, read)

    def finish(self, failed: bool) -> None:
        for s in self.sinks:
            s.finish(failed)


# ------------------------------------------------------------------ running
def _run(ctx, ev, plain, before, after, failed):
    """``plain(ctx, *ev.args)`` between the sinks' hooks."""
    ctx._inside = True
    try:
        for h in before:
            h(ctx, ev)
        out = plain(ctx, *ev.args)
    except BaseException as e:
        ev.exc = e
        for h in failed:
            h(ctx, ev)
        raise
    finally:
        ctx._inside = False
    ev.result = out
    for h in after:
        h(ctx, ev)
    return out


def _full(args, kw, params, defaults, method):
    """``args`` / ``kw`` as the full positional list of ``params``."""
    if not kw and len(args) == len(params):
        return args
    bound = list(args) + [None] * (len(params) - len(args))
    given = [True] * len(args) + [False] * (len(params) - len(args))
    for k, v in kw.items():
        i = params.index(k)
        bound[i], given[i] = v, True
    for i, ok in enumerate(given):
        if not ok:
            d = defaults[i]
            if d is inspect.Parameter.empty:
                raise TypeError(f"{method}() missing argument {params[i]!r}")
            bound[i] = d
    return tuple(bound)


def _signature(plain):
    ps = list(inspect.signature(plain).parameters.values())[1:]      # without self
    return [p.name for p in ps], [p.default for p in ps]


def _op_wrapper(method: str, name_of, plan, kind=OP):
    """The recording form of ``RankContext.<method>``: an event of ``kind``
    whose accesses come from ``plan``."""
    plain = getattr(RankContext, method)
    params, defaults = _signature(plain)
    before, after, failed = (f"{p}_{kind}" for p in PHASES)
    loc_at = params.index("_loc") if "_loc" in params else None
    private = kind == OP                # a collective is recorded whatever its operands

    def recorded(self, *args, **kw):
        if self._inside:
            return plain(self, *args, **kw)
        a = _full(args, kw, params, defaults, method)
        r = self._rec
        if private and r.skip_private and _private(self, plan, a):
            return plain(self, *a)
        ev = Event(kind, name_of(a), params, a, -1 if loc_at is None else int(a[loc_at]), plan)
        ev.caller = sys._getframe(1)
        return _run(self, ev, plain, getattr(r, before), getattr(r, after), getattr(r, failed))

    recorded.__name__ = recorded.__qualname__ = method
    recorded.__wrapped__ = plain
    return recorded


# method name -> (op names, plan) of what has been declared
_DECLARED: dict = {}


def _named(names):
    if len(names) == 1:
        only = names[0]
        return lambda a: only
    # one implementation serving several spellings (pld.tile.remote_store and
    # the tensor forms): the tile form when its source is a tile
    tile = next((n for n in names if ".tile." in n), names[0])
    tensor = next((n for n in names if ".tensor." in n), names[-1])
    return lambda a: tile if isinstance(a[0], Tile) else tensor


def declare(rec) -> None:
    """Install the recording wrapper of op record ``rec`` (called by the
    registry for every record with a rank-side implementation)."""
    impls = {impl for kind, impl in rec.impls.items() if kind != "host"}
    for impl in impls:
        method = impl.__name__
        if getattr(RankContext, method, None) is not impl:
            raise AssertionError(f"op {rec.name}: its implementation is not "
                                 f"RankContext.{method}")
        kind = _kind_of(rec)
        if kind is None:
            continue
        params, _ = _signature(impl)
        plan = _plan(rec.touches, params)
        names, old_plan = _DECLARED.get(method, ((), None))
        if names and old_plan != plan:
            raise AssertionError(f"op {rec.name} shares RankContext.{method} with {names} but "
                                 f"declares other touches")
        names = names + (rec.name,)
        _DECLARED[method] = (names, plan)
        if kind in (OP, COLLECTIVE, ISSUE, COMPLETE):
            setattr(RecordingRankContext, method, _op_wrapper(method, _named(names), plan, kind))


def _kind_of(rec):
    """The event an op's effects call for (None: it touches no memory)."""
    fx = rec.effects
    if rec.asynchronous is not None:
        return ISSUE if rec.asynchronous == "issue" else COMPLETE
    if rec.collective:
        return COLLECTIVE
    if Effect.SIGNAL in fx and rec.notifies:
        return NOTIFY
    if Effect.WAIT in fx:
        return DEFER if rec.defers else WAIT
    if rec.touches:
        return OP
    memory = fx & {Effect.READ, Effect.WRITE, Effect.REMOTE_READ, Effect.REMOTE_WRITE,
                   Effect.SIGNAL}
    if memory:
        raise AssertionError(f"op {rec.name} has effects {sorted(e.value for e in memory)} but "
                             f"declares no touches: no recording sink would see them")
    return None


def declared() -> dict:
    """RankContext method -> the op names whose recording it is."""
    return {m: names for m, (names, _) in _DECLARED.items()}


# the lowering's own forms: element assignment ``a[i:j] = v`` and indexing
# ``a[i, j]`` of an array
_ASSIGN = (("base", Effect.WRITE, touched.assigned, ("base", "items")), ("value", Effect.READ,
                                                                          None, ()))
_INDEX = (("base", Effect.READ, touched.indexed, ("base", "items")),)


def _syntax_plan(touches, params):
    pos = params.index
    return tuple((pos(p), region, tuple(pos(u) for u in using), None, None, effect)
                 for p, effect, region, using in touches)


# ------------------------------------------------------------------ the context
class RecordingRankContext(RankContext):
    """``RankContext`` of a run that records (see the module doc).  Never
    built: a run switches the rank's context to it and sets ``_rec``."""

    _rec: Recording
    _inside = False                  # an operation of this thread is being recorded

    # ------------------------------------------------------------ signals
    def notify(self, target, peer, offsets, value, op):
        if self._inside:
            return RankContext.notify(self, target, peer, offsets, value, op)
        cell = target.cells.get((peer, offsets))
        if cell is None:
            cell = self._cell(target, peer, offsets, "pld.system.notify")
        r = self._rec
        ev = Event(NOTIFY, "pld.system.notify", _NOTIFY_PARAMS, (target, peer, offsets, value, op))
        ev.cell = cell
        signal = r.signal
        self._inside = True
        try:
            for h in r.before_notify:
                h(self, ev)
            if r.sequencer is not None:
                new = r.sequencer(self, ev, lambda: signal(cell, op, value))
            else:
                new = signal(cell, op, value)
        except BaseException as e:
            ev.exc = e
            for h in r.failed_notify:
                h(self, ev)
            raise
        finally:
            self._inside = False
        ev.result = new
        for h in r.after_notify:
            h(self, ev)
        return new

    def wait(self, signal, offsets, expected, cmp, _loc=-1):
        if self._inside:
            return RankContext.wait(self, signal, offsets, expected, cmp, _loc)
        r = self._rec
        ev = Event(WAIT, "pld.system.wait", _WAIT_PARAMS, (signal, offsets, expected, cmp, _loc),
                   int(_loc))
        return _run(self, ev, RankContext.wait, r.before_wait, r.after_wait, r.failed_wait)

    def defer_wait(self, signal, offsets, expected, cmp, _loc=-1):
        r = self._rec
        ev = Event(DEFER, "pld.system.defer_wait", _WAIT_PARAMS,
                   (signal, offsets, expected, cmp, _loc), int(_loc))
        return _run(self, ev, RankContext.defer_wait, r.before_defer, r.after_defer,
                    r.failed_defer)

    def wait_cell(self, cell, cmp, expected, record):
        r = self._rec
        ev = Event(RELEASE, "pld.system.defer_wait release", _RELEASE_PARAMS,
                   (cell, cmp, expected, record), record.loc)
        ev.cell = cell
        return _run(self, ev, RankContext.wait_cell, r.before_release, r.after_release,
                    r.failed_release)

    # ------------------------------------------------------------ dispatches
    def wait_dispatch(self, rank: int, seq: int):
        r = self._rec
        ev = Event(AWAIT_DISPATCH, "wait for a dispatch", ("rank", "seq"), (int(rank), int(seq)))
        return _run(self, ev, RankContext.wait_dispatch, r.before_await_dispatch,
                    r.after_await_dispatch, r.failed_await_dispatch)

    def dispatch_done(self, seq: int) -> None:
        r = self._rec
        ev = Event(DISPATCH_DONE, "dispatch done", ("seq",), (int(seq),))
        return _run(self, ev, RankContext.dispatch_done, r.before_dispatch_done,
                    r.after_dispatch_done, r.failed_dispatch_done)

    def task_scope(self):
        scope = RankContext.task_scope(self)
        for h in reversed(self._rec.task_scope):       # the first sink's wrapper outermost
            scope = h(self, scope)
        return scope

    # ------------------------------------------------------------ the lowering's forms
    def assign(self, base, items, value):
        if self._inside:
            return RankContext.assign(self, base, items, value)
        r = self._rec
        if r.skip_private and _private(self, _ASSIGN_PLAN, (base, items, value)):
            return RankContext.assign(self, base, items, value)
        ev = Event(OP, "element assignment", _ASSIGN_PARAMS, (base, items, value), -1,
                   _ASSIGN_PLAN)
        ev.caller = sys._getframe(1)
        return _run(self, ev, RankContext.assign, r.before_op, r.after_op, r.failed_op)

    def index(self, base, items):
        if self._inside:
            return RankContext.index(self, base, items)
        r = self._rec
        if r.skip_private and _private(self, _INDEX_PLAN, (base, items)):
            return RankContext.index(self, base, items)
        ev = Event(OP, "indexing", _INDEX_PARAMS, (base, items), -1, _INDEX_PLAN)
        ev.caller = sys._getframe(1)
        return _run(self, ev, RankContext.index, r.before_op, r.after_op, r.failed_op)

    # The call-site forms (tile/site_ops.py) keep their fast paths -- a view
    # of the loaded region, a reused tile -- and record the plain op's event:
    # recording costs what recording costs, not the copies too.
    def load_at(self, site, view, *args):
        return _site(self, "load", RankContext.load_at, (site, view), args)

    def store_at(self, site, *args):
        return _site(self, "store", RankContext.store_at, (site,), args)

    def remote_load_at(self, site, view, *args):
        return _site(self, "remote_load", RankContext.remote_load_at, (site, view), args)

    def binary_at(self, site, op, lhs, rhs):
        return _site(self, BINARY_NAMES[op], RankContext.binary_at, (site, op), (lhs, rhs))

    def store_binary_at(self, site, op, lhs, rhs, offsets, output_tensor):
        # the elementwise op, then the store: two events, as written
        return self.store(getattr(self, BINARY_NAMES[op])(lhs, rhs), offsets, output_tensor,
                          None, 0)

    def copy_at(self, site, site2, tensor, offsets, shapes, dst_offsets, output_tensor):
        # the load, then the store: two events, as written
        return self.store_at(site2, self.load_at(site, True, tensor, offsets, shapes),
                             dst_offsets, output_tensor)

    # an accumulation computed in place records its steps and its store as
    # written: the same events, with the same regions, as when they copy
    def accum_at(self, site, op, lhs, rhs, acc):
        return _site(self, BINARY_NAMES[op], RankContext.accum_at, (site, op), (lhs, rhs),
                     (acc,))

    def accum_store_at(self, site, tile, offsets, output_tensor, acc):
        return _site(self, "store", RankContext.accum_store_at, (site,),
                     (tile, offsets, output_tensor), (acc,), 3)


def _site(ctx, method, at, lead, args, tail=(), width=None):
    """A call-site form of ``RankContext.<method>`` recorded as that op:
    ``at(ctx, *lead, *<the op's first width arguments>, *tail)``."""
    if ctx._inside:
        return at(ctx, *lead, *args, *tail)
    plain = getattr(RankContext, method)
    params, defaults = _SITE_SIGS.get(method) or _SITE_SIGS.setdefault(method,
                                                                      _signature(plain))
    names, plan = _DECLARED[method]
    a = _full(args, {}, params, defaults, method)
    r = ctx._rec
    if r.skip_private and _private(ctx, plan, a):
        return at(ctx, *lead, *args, *tail)
    ev = Event(OP, _named(names)(a), params, a, -1, plan)
    ev.caller = sys._getframe(2)            # past the call-site method

    def run(c, *a):                     # a: the plain op's full argument list
        return at(c, *lead, *a[:width], *tail)

    return _run(ctx, ev, run, r.before_op, r.after_op, r.failed_op)


_SITE_SIGS: dict = {}
_NOTIFY_PARAMS = ["target", "peer", "offsets", "value", "op"]
_WAIT_PARAMS = ["signal", "offsets", "expected", "cmp", "_loc"]
_RELEASE_PARAMS = ["cell", "cmp", "expected", "record"]
_ASSIGN_PARAMS = ["base", "items", "value"]
_INDEX_PARAMS = ["base", "items"]
_ASSIGN_PLAN = _syntax_plan(_ASSIGN, _ASSIGN_PARAMS)
_INDEX_PLAN = _syntax_plan(_INDEX, _INDEX_PARAMS)


class PlainSitesRecordingRankContext(RecordingRankContext):
    """The recording context of a run whose sinks need every load to copy
    (``Sink.PLAIN_SITES``): each call-site form runs its plain op."""


for _name, _fn in vars(PlainPaths).items():
    if _name.endswith("_at") or _name == "accum_begin":
        setattr(PlainSitesRecordingRankContext, _name, _fn)


__all__ = ["AWAIT_DISPATCH", "COLLECTIVE", "COMPLETE", "DEFER", "DISPATCH_DONE", "Dispatch",
           "Event", "ISSUE", "KINDS", "Local", "NOTIFY", "OP", "PlainSitesRecordingRankContext",
           "RELEASE", "Recording", "RecordingRankContext", "Remote", "Sink", "WAIT", "declare",
           "declared"]
