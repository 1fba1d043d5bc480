"""The op registry: one record per primitive.

A record is declared once, next to its type rule, and drives everything else:
the stub users call (its signature binds call arguments), where the op may be
used, the type/shape rule run by the front end, the static parameters, the
typed effects, the runtime implementation per function kind (function objects;
the lowering calls them by their method name on the runtime object ``_rt``),
the public spellings, and the doc.  The front end and the lowering never test
an op by identity or by name: they read these attributes.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

from ..errors import CODES
from ..ir.effects import TOUCH_EFFECTS, Effect, Touch
from ..ir.kinds import ALL_KINDS, HOST, INCORE, ORCH
from ..runtime.rank import recorder

# codes any op call may raise, whatever the op: its arguments do not bind to
# the signature (TC103), it is called in a kind of function it may not be used
# in (TC301)
EVERY_CALL_RAISES = ("TC103", "TC301")

# hint for calling an op in a kind of function it is not allowed in
DEFAULT_CONTEXT_HINTS = {
    HOST: "move this into a @pl.jit.incore kernel dispatched through a @pl.jit function",
    ORCH: "chip orchestration only sequences kernel calls; move tile work into a kernel",
    INCORE: None,
}


@dataclass(eq=False)
class OpRecord:
    name: str                      # canonical dotted name, e.g. "pld.system.notify"
    stub: "OpStub"
    contexts: frozenset            # function kinds that may call it
    signature: inspect.Signature
    doc: str
    effects: frozenset = frozenset()   # Effect members
    impls: dict = field(default_factory=dict)   # function kind -> implementation function
    static: tuple = ()             # parameters that must be compile-time constants
    rule: Callable | None = None   # type rule: rule(call) -> Type
    aliases: tuple = ()            # further public spellings ("pld.window", "pl.tile.load")
    context_hint: dict = field(default_factory=dict)   # kind -> hint when used there wrongly
    # parameters only the compiler reads; the implementation does not receive them
    compile_only: tuple = ()
    # stub parameter -> implementation parameter, where one implementation serves
    # several stubs whose public names differ (lowered calls pass positionally)
    impl_renames: dict = field(default_factory=dict)
    # a compile-time value of every call: value(world) (pld.world_size)
    value: Callable | None = None
    # the call declares a window buffer named after its assignment target; the
    # implementation receives the buffer's id first
    declares_buffer: bool = False
    # the parameter whose signal cell the op writes (notify): the deadlock report
    # names the functions that could release a wait on that cell
    notifies: str | None = None
    # a pld.tensor.* collective: its window operands form one comm domain, and
    # in a HOST orchestrator it runs as one builtin dispatch per member rank
    collective: bool = False
    # task dependency tracking: tensor parameters whose local copy the op
    # writes (the others it takes are read), and parameters it reaches only as
    # a signal cell or a peer's copy (no access to this rank's data).  An op
    # with a write effect that names no parameter writes all of them.
    writes: tuple = ()
    untracked: tuple = ()
    # the call registers a deferred-completion condition on its task
    defers: bool = False
    # an asynchronous transfer: "issue" -- the call starts one and returns
    # its event, the transfer lands by the event's wait and not in the call;
    # "complete" -- the call waits for an event (its transfer lands there).
    # The recorder makes ISSUE / COMPLETE events of them, not OP events:
    # what the transfer touches is unordered from the issue to the wait.
    asynchronous: str | None = None
    # the error codes (tilecomm.errors.CODES) the op's type rule and its
    # implementations raise: at compile time (TC1xx-TC3xx) and while ranks run
    # (TC5xx).  Shown by ``tilecomm ops NAME`` and on the op's reference page;
    # tests compare it with the codes reachable from the rule and the
    # implementations.  Mistakes any call can make (arguments that do not
    # bind, a call where the op may not be used) are EVERY_CALL_RAISES.
    raises: tuple = ()
    # the memory the op reads and writes when it runs, operand by operand
    # (``ir.effects.Touch``): the rank's recorder makes the op's recording
    # wrapper from them, so every checker sees each access with its region.
    # Signals, waits and collectives are events of their own kind (their
    # effects say which), not touches.
    touches: tuple = ()
    # a form of another record (an ergonomic collective): the front end checks
    # the form's own contract with this record's rule, then writes the call as
    # one of ``expands`` -- the record that runs, is checked and recorded
    expands: "OpRecord | None" = None

    def __repr__(self):
        return f"<op {self.name}>"

    @property
    def spellings(self) -> tuple:
        return (self.name,) + tuple(self.aliases)

    def impl_for(self, kind: str):
        return self.impls.get(kind)

    def hint_outside(self, kind: str):
        return self.context_hint.get(kind, DEFAULT_CONTEXT_HINTS.get(kind))

    def runtime_params(self) -> list:
        """Stub parameters passed to the implementation, in order."""
        return [p for p in self.signature.parameters if p not in self.compile_only]

    def impl_param_names(self) -> list:
        """The parameter list (without self) every implementation must have: the
        lowering passes exactly these, positionally."""
        names = [self.impl_renames.get(p, p) for p in self.runtime_params()]
        if self.declares_buffer:
            names.insert(0, "buf_id")
        if Effect.WAIT in self.effects:
            names.append("_loc")       # span id of the call: where a rank blocks
        return names


class OpStub:
    """What ``pl.load`` / ``pld.system.notify`` are at Python level.

    Calling one outside a program is a mistake: tilecomm programs are parsed,
    not executed, so the call raises with a hint."""

    def __init__(self, record_name: str, fn: Callable):
        self.__name__ = fn.__name__
        self.__qualname__ = record_name
        self.__doc__ = fn.__doc__
        self.__signature__ = inspect.signature(fn)
        self.__wrapped__ = fn
        self.record: OpRecord | None = None

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"{self.__qualname__}() can only be used inside a tilecomm program "
            f"(a function decorated with @pl.jit.host / @pl.jit / @pl.jit.incore); "
            f"such bodies are compiled, not run as plain Python")

    def rule(self, fn):
        self.record.rule = fn
        return fn

    def __repr__(self):
        return f"<tilecomm op {self.__qualname__}>"


_RECORDS: dict[str, OpRecord] = {}


def op(name: str, *, where, kernel=None, host=None, effects=(), static=(), aliases=(),
       context_hint=None, compile_only=(), impl_renames=None, value=None,
       declares_buffer=False, notifies=None, collective=False, writes=(), untracked=(),
       defers=False, raises=(), touches=(), expands=None, asynchronous=None):
    """Declare a primitive from its stub function (signature + docstring).

    ``kernel`` implements it where ranks run it (orchestration and InCore
    functions, on a ``RankContext``), ``host`` in the HOST orchestrator (on a
    ``HostRuntime``).  A form of another op (``expands``, its record) has no
    implementation of its own: its calls become calls of that op."""

    def deco(fn):
        where_ = frozenset(where)
        if not where_ <= set(ALL_KINDS):
            raise AssertionError(f"op {name}: unknown function kinds {set(where_)}")
        impls = {}
        for kind in where_:
            impl = host if kind == HOST else kernel
            if expands is not None:
                if impl is not None:
                    raise AssertionError(f"op {name} is a form of {expands.name}; it has no "
                                         f"implementation of its own")
                continue
            if impl is None:
                raise AssertionError(f"op {name} may be used in {kind} functions but has no "
                                     f"implementation there")
            impls[kind] = impl
        if asynchronous not in (None, "issue", "complete"):
            raise AssertionError(f"op {name}: asynchronous must be 'issue' or 'complete'")
        unknown = [c for c in raises if c not in CODES]
        if unknown or list(raises) != sorted(set(raises)):
            raise AssertionError(f"op {name}: raises must list known codes in order, once "
                                 f"each; unknown: {unknown}")
        stub = OpStub(name, fn)
        rec = OpRecord(name=name, stub=stub, contexts=where_, signature=inspect.signature(fn),
                       doc=inspect.cleandoc(fn.__doc__ or ""),
                       effects=frozenset(Effect(e) for e in effects), impls=impls,
                       static=tuple(static), aliases=tuple(aliases),
                       context_hint=dict(context_hint or {}), compile_only=tuple(compile_only),
                       impl_renames=dict(impl_renames or {}), value=value,
                       declares_buffer=declares_buffer, notifies=notifies,
                       collective=collective, writes=tuple(writes), untracked=tuple(untracked),
                       defers=defers, raises=tuple(raises), touches=tuple(touches),
                       expands=expands, asynchronous=asynchronous)
        _check_touches(rec)
        recorder.declare(rec)
        if name in _RECORDS:
            raise AssertionError(f"op {name} declared twice")
        _RECORDS[name] = rec
        stub.record = rec
        return stub

    return deco


def _check_touches(rec: OpRecord) -> None:
    """A record's touches name its implementation's parameters, with the
    effects the record declares."""
    params = set(rec.impl_param_names())
    for t in rec.touches:
        if not isinstance(t, Touch) or t.effect not in TOUCH_EFFECTS:
            raise AssertionError(f"op {rec.name}: touches must be ir.effects.Touch values; got {t!r}")
        unknown = [p for p in t.params() if p not in params]
        if unknown:
            raise AssertionError(f"op {rec.name}: a touch names {unknown}, not parameters of its "
                                 f"implementation ({sorted(params)})")
        if t.remote and t.effect not in rec.effects:
            raise AssertionError(f"op {rec.name}: a {t.effect.value} touch without that effect")
        if t.remote != (t.peer is not None):
            raise AssertionError(f"op {rec.name}: a remote touch names its peer, a local one none")


def records() -> list[OpRecord]:
    """Every record.  Importing ``tilecomm.ops`` declares them all."""
    return list(_RECORDS.values())


def lookup(stub) -> OpRecord | None:
    rec = getattr(stub, "record", None)
    return rec if isinstance(rec, OpRecord) else None


def signature_mismatch(rec: OpRecord, impl) -> str | None:
    """Why ``impl`` cannot serve ``rec`` as the lowering calls it, or None.

    The lowering passes ``rec.impl_param_names()`` positionally, so the
    implementation must take exactly those parameters, in that order, all
    positional-or-keyword; a default it declares must be the stub's default
    (otherwise its signature documents a behaviour the op does not have)."""
    params = list(inspect.signature(impl).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    want = rec.impl_param_names()
    got = [p.name for p in params]
    if got != want:
        return f"parameters {got} != expected {want}"
    stub_params = {rec.impl_renames.get(n, n): p for n, p in rec.signature.parameters.items()}
    for p in params:
        if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            return f"parameter {p.name!r} is {p.kind.description}; lowered calls pass it by position"
        sp = stub_params.get(p.name)
        if p.default is not inspect.Parameter.empty and sp is not None and \
                (sp.default is inspect.Parameter.empty or sp.default != p.default
                 or type(sp.default) is bool and type(p.default) is not bool):
            return f"parameter {p.name!r} defaults to {p.default!r}; the stub's default is " \
                   f"{'none' if sp.default is inspect.Parameter.empty else repr(sp.default)}"
    for n, sp in rec.signature.parameters.items():
        if sp.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            return f"stub parameter {n!r} is {sp.kind.description}"
    return None


__all__ = ["DEFAULT_CONTEXT_HINTS", "EVERY_CALL_RAISES", "Effect", "OpRecord", "OpStub",
           "lookup", "op", "records", "signature_mismatch"]
