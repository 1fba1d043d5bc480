"""Import every module that declares records."""
from . import async_ops, collective_ops, ergonomic_ops, pl_matmul, pl_ops, pl_shape, pld_ops  # noqa: F401
