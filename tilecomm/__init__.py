"""tilecomm: PyPTO-style distributed tile programs on real processes."""
from .errors import (ArgumentError, ConfigError, DeadlockError, InternalError, ProgramSyntaxError,
                     ProgramTypeError, ProgramValueError, RankFailure, RuntimeFault,
                     TilecommError, UserError)

__version__ = "0.1.0"
__all__ = ["ArgumentError", "ConfigError", "DeadlockError", "InternalError", "ProgramSyntaxError",
           "ProgramTypeError", "ProgramValueError", "RankFailure", "RuntimeFault",
           "TilecommError", "UserError"]
