"""Annotation objects of the ``pl`` / ``pld`` surface (defined with the IR:
``pl.Tensor[[4, 8], pl.FP32]`` evaluates to an IR type)."""
from ..ir.annotations import (CommCtx, DistributedTensor, InOut, Out, Scalar, TaskId, Tensor,
                              Tuple, annotation_type, dynamic)

__all__ = ["CommCtx", "DistributedTensor", "InOut", "Out", "Scalar", "TaskId", "Tensor", "Tuple",
           "annotation_type", "dynamic"]
