"""Helpers the type rules use to inspect a bound call and report misuse."""
from __future__ import annotations

import enum

from ..dtypes import ATOMIC_ADD_DTYPES, BF16
from ..errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError
from ..ir import nodes as N
from ..ir.types import (ANY, AnyType, EnumType, ScalarType, TensorType, TileType,
                        is_static)


INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1


class SkipCheck(Exception):
    """Raised when an operand already failed: the call gets type ANY."""


class CallCheck:
    def __init__(self, record, args: dict, span, kind: str, platform, world: int | None,
                 extra: dict | None = None, explicit=None):
        self.record = record
        self.args = args
        self.span = span
        self.kind = kind
        self.platform = platform
        self.world = world
        self.extra = extra if extra is not None else {}
        self.explicit = set(args) if explicit is None else explicit
        if any(isinstance(getattr(a, "type", None), AnyType) for a in args.values()):
            raise SkipCheck()

    # ------------------------------------------------------------ access
    @property
    def op(self) -> str:
        return self.record.name

    def arg(self, name):
        return self.args.get(name)

    def type(self, name):
        a = self.args.get(name)
        return a.type if a is not None else None

    def given(self, name) -> bool:
        a = self.args.get(name)
        return name in self.explicit and a is not None and \
            not (isinstance(a, N.Const) and a.value is None)

    def const(self, name, default=None):
        """Compile-time value of an argument (ints, enums, lists of ints), or default."""
        return const_value(self.args.get(name), default)

    def span_of(self, name):
        a = self.args.get(name)
        return a.span if a is not None else self.span

    # ------------------------------------------------------------ errors
    def type_error(self, msg, *, code="TC102", hint=None, at=None):
        raise ProgramTypeError(msg, code=code, span=self.span_of(at) if at else self.span, hint=hint)

    def value_error(self, msg, *, code="TC200", hint=None, at=None):
        raise ProgramValueError(msg, code=code, span=self.span_of(at) if at else self.span, hint=hint)

    def syntax_error(self, msg, *, code="TC300", hint=None, at=None):
        raise ProgramSyntaxError(msg, code=code, span=self.span_of(at) if at else self.span, hint=hint)

    # ------------------------------------------------------------ operand kinds
    def dist(self, name, role=None) -> TensorType:
        t = self.type(name)
        if not (isinstance(t, TensorType) and t.dist):
            self.type_error(f"{self.op} expects a DistributedTensor {role or name} (window-bound); "
                            f"got {describe(t)}", code="TC101", at=name,
                            hint="pass a view made with pld.window(...) in the HOST orchestrator")
        return t

    def tensor(self, name, role=None, *, allow_dist=True) -> TensorType:
        t = self.type(name)
        ok = isinstance(t, TensorType) and (allow_dist or not t.dist)
        if not ok:
            what = "a Tensor" if allow_dist else "a plain Tensor (not a DistributedTensor)"
            self.type_error(f"{self.op} expects {what} {role or name}; got {describe(t)}", at=name)
        return t

    def tile(self, name, role=None, hint=None) -> TileType:
        t = self.type(name)
        if not isinstance(t, TileType):
            self.type_error(f"{self.op} expects a Tile {role or name}; got {describe(t)}", at=name,
                            hint=hint)
        return t

    def shaped(self, name, role=None):
        t = self.type(name)
        if not isinstance(t, (TensorType, TileType)):
            self.type_error(f"{self.op} expects a Tensor or Tile {role or name}; got {describe(t)}",
                            at=name)
        return t

    def scalar(self, name, role=None):
        a = self.args.get(name)
        t = a.type if a is not None else None
        if not isinstance(t, ScalarType):
            self.type_error(f"{self.op} expects a scalar {role or name}; got {describe(t)}", at=name)
        return a

    def enum(self, name, enum_cls):
        a = self.args.get(name)
        v = const_value(a)
        if isinstance(v, enum_cls):
            return v
        # a member of another enum is a mistake even where the int values coincide
        # (NotifyOp.Set == WaitCmp.Ge == 1): compare the enum type, not the value
        if isinstance(v, int) and not isinstance(v, (bool, enum.Enum)) and \
                v in {m.value for m in enum_cls}:
            return enum_cls(v)
        self.value_error(f"{self.op} {name} must be a {enum_cls.__qualname__} member "
                         f"({', '.join(m.name for m in enum_cls)}); got {_show(a)}",
                         code="TC214", at=name)

    def integer(self, name, role=None, *, int32=False):
        """An integer scalar operand (a peer, a byte size, a signal value): not a
        float, a bool or an enum member, which would be truncated silently.
        ``int32``: a constant must fit the 32-bit signal cell."""
        a = self.scalar(name, role)
        v = const_value(a)
        dt = a.type.dtype
        if isinstance(v, (bool, enum.Enum)) or dt is None or not dt.is_int:
            self.type_error(f"{self.op} {role or name} must be an integer; got {_show(a)}",
                            at=name, hint="convert explicitly (pl.cast) if a float is meant")
        if int32 and isinstance(v, int) and not INT32_MIN <= v <= INT32_MAX:
            self.value_error(f"{self.op} {role or name} {v} is outside the INT32 range "
                             f"[{INT32_MIN}, {INT32_MAX}] of a signal cell", code="TC218",
                             at=name)
        return a

    def index_list(self, name, rank, what="offsets", target_what="target tensor"):
        """A list of scalar expressions whose length must equal ``rank``."""
        a = self.args.get(name)
        if not isinstance(a, (N.ListExpr, N.TupleExpr)):
            self.type_error(f"{self.op} {name} must be a list of integers; got {_show(a)}", at=name)
        for it in a.items:
            v = const_value(it)
            if not isinstance(it.type, ScalarType) or isinstance(v, (bool, enum.Enum)) or \
                    it.type.dtype is not None and not it.type.dtype.is_int:
                self.type_error(f"{self.op} {name} entries must be integer scalars; got "
                                f"{_show(it)}", at=name)
        if rank is not None and len(a.items) != rank:
            self.value_error(f"{self.op} {what} rank ({len(a.items)}) must match {target_what} "
                             f"rank ({rank})", code="TC201", at=name,
                             hint=f"give one {what[:-1] if what.endswith('s') else what} entry per "
                                  f"dimension of the {target_what}")
        return [const_value(it) for it in a.items]

    def region_in_bounds(self, offsets, extents, dims, *, what, at, code="TC202"):
        """Static bounds check of a region; dims/offsets/extents may be symbolic."""
        for i, (o, e, d) in enumerate(zip(offsets, extents, dims)):
            if is_static(o) and o < 0:
                self.value_error(f"{self.op} {what}: offset {o} in dimension {i} is negative",
                                 code=code, at=at)
            if is_static(o) and is_static(e) and is_static(d) and o + e > d:
                self.value_error(
                    f"{self.op} {what} exceeds its tensor in dimension {i} "
                    f"(offset={o}, extent={e}, dim={d})", code=code, at=at,
                    hint="keep offset + extent within the tensor's shape")

    def static_params(self):
        """Every static parameter is a compile-time constant.  Runs after the
        op's own rule, whose messages are more specific where it has any."""
        for name in self.record.static:
            a = self.args.get(name)
            if a is not None and not is_constant(a):
                self.value_error(f"{self.op} {name} must be a compile-time constant; got a "
                                 f"runtime {describe(a.type)}", code="TC216", at=name,
                                 hint="static parameters are fixed when the program is compiled")

    def atomic_dtype(self, atomic, dtype, at="atomic"):
        if atomic is None or int(atomic) == 0:
            return
        if dtype not in ATOMIC_ADD_DTYPES:
            self.value_error(
                f"{self.op} with atomic=AtomicType.Add requires an fp32/bf16/fp16/int32/int16/int8 "
                f"dtype; got {dtype.name}", code="TC203", at=at)
        if dtype is BF16 and self.platform is not None and not self.platform.bf16_atomic_add:
            self.value_error(
                f"{self.op} with atomic=AtomicType.Add on BF16 is only supported on the a2a3 "
                f"platform; this program is checked for '{self.platform.name}'", code="TC215",
                at=at)


def const_value(a, default=None):
    if a is None:
        return default
    if isinstance(a, N.Const):
        return a.value
    if isinstance(a, N.Call) and "const" in a.extra:
        return a.extra["const"]            # e.g. pld.world_size(): fixed per compiled program
    if isinstance(a, (N.ListExpr, N.TupleExpr)):
        return [const_value(i) for i in a.items]
    return default


def is_constant(a) -> bool:
    """Whether an argument is known when the program is compiled."""
    if isinstance(a, N.Const):
        return True
    if isinstance(a, N.Call):
        return "const" in a.extra
    if isinstance(a, (N.ListExpr, N.TupleExpr)):
        return all(is_constant(i) for i in a.items)
    return False


def describe(t) -> str:
    if t is None:
        return "nothing"
    if isinstance(t, EnumType):
        return t.enum.__name__
    return t.describe() if hasattr(t, "describe") else type(t).__name__


def _show(a) -> str:
    if isinstance(a, N.Const):
        if isinstance(a.value, enum.Enum):
            return f"{type(a.value).__name__}.{a.value.name}"
        return repr(a.value)
    return describe(getattr(a, "type", None))


__all__ = ["CallCheck", "SkipCheck", "const_value", "describe", "is_constant", "ANY"]
