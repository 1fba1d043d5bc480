"""Import every module that declares records."""
from . import pl_ops, pld_ops  # noqa: F401
