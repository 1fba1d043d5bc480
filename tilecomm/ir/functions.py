"""Program functions as the decorators leave them: a Python function plus its
kind, and the ``@pl.program`` class that groups them.

These are leaf objects: the front end reads them, the compiler compiles them,
and neither is imported here.  Compiling is reached through ``driver``, the
compiler the decorator that made the object handed in; so ``fn.compile()``
works without this module knowing the compiler exists."""
from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from dataclasses import dataclass

from ..errors import ProgramTypeError, TilecommError, at_entry_point, user_span
from .annotations import annotation_type
from .enums import FunctionType, Level, ParamDirection, Role
from .kinds import HOST, INCORE, KIND_NAMES, ORCH, SUBWORKER
from .types import IN, INOUT, OUT, TupleType

# what upstream's IR reports for a function made by each decorator form
# (@pl.jit.host / @pl.jit / @pl.jit.incore; SubWorkers are class-form only)
_FORM_SPEC = {HOST: (FunctionType.Orchestration, Level.HOST, Role.Orchestrator),
              SUBWORKER: (FunctionType.Opaque, Level.HOST, Role.SubWorker),
              ORCH: (FunctionType.Orchestration, None, None),
              INCORE: (FunctionType.InCore, None, None)}
_DIRECTIONS = {IN: ParamDirection.In, OUT: ParamDirection.Out, INOUT: ParamDirection.InOut}


@dataclass(frozen=True)
class ParamInfo:
    """A parameter as upstream's IR shows one: ``name_hint``, the IR ``type``
    its annotation denotes (None when it cannot be read) and its direction."""

    name_hint: str
    type: object
    direction: ParamDirection

    @property
    def name(self) -> str:
        return self.name_hint


def _annotation(fn, key):
    """The evaluated annotation ``key`` of ``fn`` (postponed ones evaluated in
    its module; None when absent or unreadable)."""
    ann = fn.__annotations__.get(key)
    if isinstance(ann, str):
        try:
            ann = eval(ann, fn.__globals__)      # an annotation is the user's own expression
        except Exception:
            return None
    if getattr(ann, "__origin__", None) is tuple:      # tuple[pl.Tensor[...], ...]
        return TupleType(tuple(annotation_type(a) for a in ann.__args__))
    return ann


class KernelFunction:
    """A program function.  Only HOST entry points are callable from Python."""

    def __init__(self, fn, kind: str, *, is_method: bool = False, driver=None):
        self.fn = fn
        self.kind = kind
        self.is_method = is_method
        self.driver = driver
        self._compiled: dict = {}        # RunConfig -> compiled program, kept by the driver
        functools.update_wrapper(self, fn)

    def __repr__(self):
        return f"<tilecomm {self.kind} function {self.fn.__qualname__}>"

    # ------------------------------------------------ inspection, as upstream's ir.Function
    @property
    def name(self) -> str:
        return self.fn.__name__

    def _spec(self):
        spec = getattr(self.fn, "__tilecomm_kind__", None)    # @pl.function(type=, level=, role=)
        if spec is None:
            return _FORM_SPEC[self.kind]
        type_, level, role = spec
        return type_ if type_ is not None else FunctionType.Opaque, level, role

    @property
    def func_type(self) -> FunctionType:
        return self._spec()[0]

    @property
    def level(self) -> Level | None:
        return self._spec()[1]

    @property
    def role(self) -> Role | None:
        return self._spec()[2]

    @property
    def params(self) -> list:
        """The parameters (``self`` of a method excluded) as ``ParamInfo``."""
        names = list(inspect.signature(self.fn).parameters)[1 if self.is_method else 0:]
        out = []
        for n in names:
            t = annotation_type(_annotation(self.fn, n))
            out.append(ParamInfo(n, t, _DIRECTIONS.get(getattr(t, "direction", IN),
                                                       ParamDirection.In)))
        return out

    @property
    def param_directions(self) -> list:
        return [p.direction for p in self.params]

    @property
    def return_types(self) -> list:
        """The IR types of the return annotation ([] without one)."""
        t = annotation_type(_annotation(self.fn, "return"))
        if t is None:
            return []
        return list(t.items) if isinstance(t, TupleType) else [t]

    @property
    def requires_runtime_binding(self) -> bool:
        """A SubWorker whose body is only ``...`` (after a docstring): an
        abstract callback that ``prepare(callbacks={name: fn})`` must bind."""
        if self.kind != SUBWORKER:
            return False
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(self.fn)))
        except (OSError, TypeError, SyntaxError):
            return False
        body = tree.body[0].body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str) and len(body) > 1:
            body = body[1:]                  # a docstring does not make a body concrete
        return len(body) == 1 and isinstance(body[0], ast.Expr) and \
            isinstance(body[0].value, ast.Constant) and body[0].value.value is Ellipsis

    def _require_host(self, what):
        if self.kind != HOST:
            how = {INCORE: "call it from a @pl.jit chip function, dispatch that from a "
                           "@pl.jit.host function (chip(..., device=r)) and call the "
                           "@pl.jit.host function",
                   ORCH: "dispatch it from a @pl.jit.host function (chip(..., device=r)) "
                         "and call the @pl.jit.host function"}.get(self.kind, "call the HOST orchestrator that "
                                                          "uses it")
            raise ProgramTypeError(f"{self.fn.__qualname__} is {KIND_NAMES[self.kind]}; only "
                                   f"{KIND_NAMES[HOST]} can be {what} from Python",
                                   code="TC301", span=user_span(), hint=how)
        if self.driver is None:
            raise TypeError(f"{self.fn.__qualname__} was not made by a tilecomm decorator "
                            f"that can compile it")

    def compile(self, *args, config=None):
        """Compile for ``config`` (cached); with tensors, also specialise for them."""
        try:
            self._require_host("compiled")
            return self.driver.compile_function(self, args, config)
        except TilecommError as e:
            at_entry_point(e)
            raise

    def __call__(self, *args, config=None):
        try:
            self._require_host("called")
            return self.compile(config=config)(*args)
        except TilecommError as e:
            at_entry_point(e)
            raise


def kind_of(type_, level, role, name) -> str:
    """The function kind ``@pl.function(type=, level=, role=)`` denotes."""
    if level == Level.HOST:
        return SUBWORKER if role == Role.SubWorker else HOST
    if type_ == FunctionType.Orchestration:
        return ORCH
    if type_ in (FunctionType.InCore, FunctionType.AIV, FunctionType.AIC, None):
        return INCORE
    raise TypeError(f"{name}: function type {type_!r} is not supported")


class ProgramClass:
    """A ``@pl.program`` class: its marked methods form one program."""

    def __init__(self, cls, *, driver=None):
        self.cls = cls
        self.__name__ = cls.__name__
        self.driver = driver
        self.functions: dict = {}
        for name, member in vars(cls).items():
            spec = getattr(member, "__tilecomm_kind__", None)
            if spec is None:
                continue
            kind = kind_of(*spec, name=f"{cls.__name__}.{name}")
            # SubWorker methods are declared without ``self``
            self.functions[name] = KernelFunction(member, kind, is_method=kind != SUBWORKER,
                                                  driver=driver)
        # HOST orchestrators: each is an entry a call can name (compiled["name"]).
        # Without one the program is a single-chip (L2) one: its chip
        # orchestration functions are the entries, run on one device
        self.entries = {n: f for n, f in self.functions.items() if f.kind == HOST}
        self.single_chip = not self.entries
        if self.single_chip:
            self.entries = {n: f for n, f in self.functions.items() if f.kind == ORCH}
        if not self.entries:
            raise TypeError(f"@pl.program {cls.__name__} needs an entry: a "
                            f"@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator) or, "
                            f"for a single-chip program, a "
                            f"@pl.function(type=pl.FunctionType.Orchestration); found neither")
        self.entry = next(iter(self.entries.values())) if len(self.entries) == 1 else None
        self.sub_workers = {n: f for n, f in self.functions.items() if f.kind == SUBWORKER}

    def __repr__(self):
        return f"<tilecomm program {self.cls.__name__}>"

    # ------------------------------------------------ inspection, as upstream's ir.Program
    @property
    def name(self) -> str:
        return self.cls.__name__

    def get_function(self, name: str) -> KernelFunction | None:
        """The program function ``name`` (None if the program has none)."""
        return self.functions.get(name)

    def __getitem__(self, name: str) -> KernelFunction | None:
        return self.functions.get(name)


__all__ = ["KernelFunction", "ParamInfo", "ProgramClass", "kind_of"]
