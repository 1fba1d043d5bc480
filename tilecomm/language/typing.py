"""Annotation objects of the ``pl`` / ``pld`` surface (defined with the IR:
``pl.Tensor[[4, 8], pl.FP32]`` evaluates to an IR type)."""
from ..dtypes import DataType
from ..ir.annotations import (CommCtx, DistributedTensor, InOut, Out, Scalar, TaskId, Tensor,
                              Tuple, annotation_type, dynamic)
from ..ir.types import ArrayType


class Array:
    """``pl.Array[n, pl.INT32]``: the type of ``pl.array.create(n, pl.INT32)``
    (an annotation for readers: ``h: pl.Array[16, pl.INT32] = pl.array.create(16,
    pl.INT32)``)."""

    def __class_getitem__(cls, item):
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], int)
                and isinstance(item[1], DataType)):
            raise TypeError("pl.Array takes an extent and a dtype: pl.Array[16, pl.INT32]")
        return ArrayType(item[0], item[1])


__all__ = ["Array", "CommCtx", "DistributedTensor", "InOut", "Out", "Scalar", "TaskId", "Tensor", "Tuple",
           "annotation_type", "dynamic"]
