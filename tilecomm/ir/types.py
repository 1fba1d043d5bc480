"""IR types.  Annotation objects written by users *are* these types:
``pl.Tensor[[4, 8], pl.FP32]`` evaluates to a ``TensorType``.

Shapes are tuples whose entries are ints or ``Dim`` expressions over
``pl.dynamic`` variables.  A program is specialised per binding of those
variables, after which every dim is an int; checks that need a static value
simply skip dims that are still symbolic.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from typing import Any

from ..dtypes import DataType
from .enums import MemorySpace


# --------------------------------------------------------------------------- dims
class Dim:
    """A symbolic dimension expression (``NR``, ``NR * SIZE`` ...)."""

    def _bin(self, other, op, sym, swap=False):
        if not isinstance(other, (int, Dim)):
            return NotImplemented
        return DimOp(op, sym, (other, self) if swap else (self, other))

    def __add__(self, o): return self._bin(o, operator.add, "+")
    def __radd__(self, o): return self._bin(o, operator.add, "+", True)
    def __sub__(self, o): return self._bin(o, operator.sub, "-")
    def __rsub__(self, o): return self._bin(o, operator.sub, "-", True)
    def __mul__(self, o): return self._bin(o, operator.mul, "*")
    def __rmul__(self, o): return self._bin(o, operator.mul, "*", True)
    def __floordiv__(self, o): return self._bin(o, operator.floordiv, "//")
    def __rfloordiv__(self, o): return self._bin(o, operator.floordiv, "//", True)
    def __mod__(self, o): return self._bin(o, operator.mod, "%")

    def free_vars(self) -> set["DynVar"]:
        raise NotImplementedError

    def evaluate(self, bindings: dict) -> "int | Dim":
        raise NotImplementedError


class DynVar(Dim):
    """``pl.dynamic("NR")``: a dimension bound from argument shapes at call time.

    Identity matters: two ``pl.dynamic("X")`` calls are two independent dims."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise TypeError("pl.dynamic() expects a non-empty name string")
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def free_vars(self):
        return {self}

    def evaluate(self, bindings):
        return bindings.get(self, self)

    def __reduce__(self):  # pickled only inside one program; rebuilt by name
        return (DynVar, (self.name,))


class DimOp(Dim):
    def __init__(self, fn, sym: str, args):
        self.fn, self.sym, self.args = fn, sym, args

    def __repr__(self) -> str:
        return f"({self.args[0]!r} {self.sym} {self.args[1]!r})"

    def free_vars(self):
        out = set()
        for a in self.args:
            if isinstance(a, Dim):
                out |= a.free_vars()
        return out

    def evaluate(self, bindings):
        vals = [a.evaluate(bindings) if isinstance(a, Dim) else a for a in self.args]
        if all(isinstance(v, int) for v in vals):
            return int(self.fn(*vals))
        return DimOp(self.fn, self.sym, tuple(vals))


def is_static(d) -> bool:
    return isinstance(d, int)


def bind_dim(d, bindings):
    return d.evaluate(bindings) if isinstance(d, Dim) else d


def bind_shape(shape, bindings):
    if shape is None:
        return None
    return tuple(bind_dim(d, bindings) for d in shape)


def shape_str(shape) -> str:
    if shape is None:
        return "[?]"
    return "[" + ", ".join(str(d) if isinstance(d, int) else repr(d) if isinstance(d, Dim) else "?"
                           for d in shape) + "]"


def numel(shape):
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


# -------------------------------------------------------------------------- types
class Type:
    kind = "value"

    def describe(self) -> str:
        return self.kind


IN, OUT, INOUT = "In", "Out", "InOut"


@dataclass(frozen=True)
class TensorType(Type):
    """A tensor in global memory.  ``dist`` marks a window-bound
    ``pld.DistributedTensor``.  ``shape=None``: bare annotation, shape taken
    from the call's argument."""

    shape: tuple | None
    dtype: DataType | None
    dist: bool = False
    direction: str = IN
    # parameter this value aliases (None for fresh tensors); lets a chip
    # function's return be mapped back onto the caller's argument
    origin: Any = field(default=None, compare=False)

    @property
    def kind(self):
        return "DistributedTensor" if self.dist else "Tensor"

    def describe(self) -> str:
        dt = self.dtype.name if self.dtype else "?"
        return f"{self.kind}{shape_str(self.shape)}<{dt}>"

    @property
    def rank(self):
        return None if self.shape is None else len(self.shape)

    def with_(self, **kw):
        return replace(self, **kw)


@dataclass(frozen=True)
class TileType(Type):
    """An on-chip tile.  ``memory`` is the buffer it lives in (``Vec`` unless
    loaded / created / moved elsewhere): the CPU keeps the values in one
    place, but the type carries the space so that an op the chip can only run
    on a given space (``pl.matmul``: Left x Right) is checked as on the chip."""

    shape: tuple
    dtype: DataType
    valid_shape: tuple | None = None
    memory: MemorySpace = MemorySpace.Vec
    kind = "Tile"

    def describe(self) -> str:
        where = "" if self.memory is MemorySpace.Vec else f" in {self.memory.name}"
        return f"Tile{shape_str(self.shape)}<{self.dtype.name}>{where}"

    @property
    def rank(self):
        return len(self.shape)


@dataclass(frozen=True)
class ArrayType(Type):
    """``pl.Array``: a small on-core array of scalars (``pl.array.create``).
    A value, not memory: ``arr[i] = v`` rebinds ``arr`` to an updated copy."""

    extent: int
    dtype: DataType
    kind = "Array"

    def describe(self) -> str:
        return f"Array[{self.extent}]<{self.dtype.name}>"

    @property
    def shape(self):
        return (self.extent,)

    @property
    def rank(self):
        return 1


@dataclass(frozen=True)
class ScalarType(Type):
    dtype: DataType | None
    kind = "Scalar"

    def describe(self) -> str:
        return f"Scalar<{self.dtype.name if self.dtype else '?'}>"


@dataclass(frozen=True)
class PtrType(Type):
    """Handle returned by ``pld.alloc_window_buffer``."""

    kind = "Ptr"
    buffer: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class CommCtxType(Type):
    kind = "CommCtx"


@dataclass(frozen=True)
class AsyncSessionType(Type):
    """Handle returned by ``pld.system.async_session``: the DMA session an
    asynchronous put is issued on and its event is waited on."""

    kind = "AsyncSession"


@dataclass(frozen=True)
class AsyncEventType(Type):
    """Handle returned by ``pld.tensor.put_async``: the transfer's completion
    event, drained by ``pld.system.wait_async_event``."""

    kind = "AsyncEvent"


@dataclass(frozen=True)
class TupleType(Type):
    items: tuple
    kind = "tuple"

    def describe(self) -> str:
        return "(" + ", ".join(t.describe() for t in self.items) + ")"


@dataclass(frozen=True)
class NoneType(Type):
    kind = "None"


@dataclass(frozen=True)
class EnumType(Type):
    enum: Any
    kind = "enum"


@dataclass(frozen=True)
class DTypeType(Type):
    kind = "dtype"


@dataclass(frozen=True)
class TaskIdType(Type):
    kind = "TaskId"


NONE = NoneType()


@dataclass(frozen=True)
class AnyType(Type):
    """Type of a value whose statement already failed to check: accepted
    everywhere so one mistake yields one diagnostic, not a cascade."""

    kind = "?"


ANY = AnyType()
