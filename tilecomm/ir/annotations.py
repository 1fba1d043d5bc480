"""Annotation objects: ``pl.Tensor[[4, 8], pl.FP32]`` evaluates to an IR type."""
from __future__ import annotations

import numpy as np

from ..dtypes import DataType
from .types import (CommCtxType, DynVar, INOUT, OUT, ScalarType, TaskIdType, TensorType,
                    TupleType, Type)


def _tensor_type(item, dist: bool) -> TensorType:
    if not isinstance(item, tuple) or len(item) < 2:
        raise TypeError("tensor annotations take a shape list and a dtype: "
                        "pl.Tensor[[rows, cols], pl.FP32]")
    shape, dtype = item[0], item[1]
    # further elements (layout, memref, "window_buffer=<name>") carry no meaning on the CPU
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"tensor annotation shape must be a list, got {type(shape).__name__}")
    if not isinstance(dtype, DataType):
        raise TypeError(f"tensor annotation dtype must be a pl dtype, got {dtype!r}")
    # numpy integers are integers (np.int64(4) from a computed shape)
    shape = tuple(d.item() if isinstance(d, np.integer) else d for d in shape)
    return TensorType(shape, dtype, dist=dist)


class Tensor:
    """``pl.Tensor[[shape], dtype]``; bare ``pl.Tensor`` takes the argument's shape."""

    def __class_getitem__(cls, item):
        return _tensor_type(item, False)


class DistributedTensor:
    """``pld.DistributedTensor[[shape], dtype]``: a window-bound tensor."""

    def __class_getitem__(cls, item):
        return _tensor_type(item, True)


def _direction(t, direction):
    if t is Tensor:
        return TensorType(None, None, direction=direction)
    if t is DistributedTensor:
        return TensorType(None, None, dist=True, direction=direction)
    if isinstance(t, TensorType):
        return t.with_(direction=direction)
    raise TypeError(f"pl.Out / pl.InOut wrap a tensor annotation, got {t!r}")


class Out:
    """``pl.Out[pl.Tensor[...]]``: a parameter the callee writes."""

    def __class_getitem__(cls, t):
        return _direction(t, OUT)


class InOut:
    """``pl.InOut[...]``: a parameter the callee reads and writes."""

    def __class_getitem__(cls, t):
        return _direction(t, INOUT)


class Scalar:
    """``pl.Scalar[pl.INT32]``: a by-value scalar parameter."""

    def __class_getitem__(cls, dtype):
        if not isinstance(dtype, DataType):
            raise TypeError(f"pl.Scalar takes a dtype, got {dtype!r}")
        return ScalarType(dtype)


class Tuple:
    """``pl.Tuple[T1, T2]`` return annotation."""

    def __class_getitem__(cls, items):
        items = items if isinstance(items, tuple) else (items,)
        return TupleType(tuple(items))


class CommCtx:
    """``ctx: pld.CommCtx`` annotation (value of ``pld.get_comm_ctx``)."""

    type = CommCtxType()


TaskId = TaskIdType()


def dynamic(name: str) -> DynVar:
    """A named dimension bound from argument shapes at call time."""
    return DynVar(name)


def annotation_type(obj) -> Type | None:
    """The IR type an evaluated annotation denotes, or None if it is not one."""
    if isinstance(obj, Type):
        return obj
    if obj is Tensor:
        return TensorType(None, None)
    if obj is DistributedTensor:
        return TensorType(None, None, dist=True)
    if obj is CommCtx:
        return CommCtxType()
    if isinstance(obj, DataType):
        return ScalarType(obj)
    return None
