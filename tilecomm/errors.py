"""Error types.

User errors (bad programs, bad arguments) and internal errors are distinct
types.  Every user error carries a stable ``code`` and, when it comes from a
program, the source span ``file:line:col`` it refers to.  User errors also
subclass the builtin exception a Python user would expect (``TypeError`` for a
wrong kind of operand, ``ValueError`` for a bad value, ``SyntaxError``-like
errors for unsupported constructs) so ``except TypeError`` keeps working.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A location in user source: 1-based line, 1-based column."""

    file: str
    line: int
    col: int
    func: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class TilecommError(Exception):
    """Base of every error tilecomm raises on purpose."""


class UserError(TilecommError):
    """A problem in the user's program or arguments.

    ``code`` is stable across releases (tests and tooling match on it);
    ``message`` says what was expected and what was got; ``hint`` says how to
    fix it.  Several diagnostics may be gathered before raising: the first is
    the exception itself, all are in ``diagnostics``.
    """

    default_code = "TC000"

    def __init__(self, message: str, *, code: str | None = None, span: Span | None = None,
                 hint: str | None = None):
        self.code = code or self.default_code
        self.message = message
        self.span = span
        self.hint = hint
        self.diagnostics: list[UserError] = [self]
        super().__init__(self._render())

    @property
    def line(self) -> int | None:
        return self.span.line if self.span else None

    @property
    def col(self) -> int | None:
        return self.span.col if self.span else None

    def _render(self) -> str:
        where = f"{self.span}: " if self.span else ""
        text = f"{where}error[{self.code}]: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def __str__(self) -> str:
        text = self._render()
        extra = [d for d in self.diagnostics if d is not self]
        if extra:
            text += f"\n({len(extra)} more diagnostic(s))"
            for d in extra:
                text += "\n" + d._render()
        return text


class ProgramTypeError(UserError, TypeError):
    """An operand of the wrong kind (Tensor vs DistributedTensor vs Tile ...)."""

    default_code = "TC100"


class ProgramValueError(UserError, ValueError):
    """An operand of the right kind with a bad value (shape, bounds, dtype)."""

    default_code = "TC200"


class ProgramSyntaxError(UserError, SyntaxError):
    """A construct the front end does not accept."""

    default_code = "TC300"

    def __init__(self, message: str, **kw):
        UserError.__init__(self, message, **kw)
        # SyntaxError's own fields, so tracebacks point at the user's line.
        if self.span:
            self.filename, self.lineno, self.offset = self.span.file, self.span.line, self.span.col


class ConfigError(UserError, ValueError):
    """A bad RunConfig / DistributedConfig value."""

    default_code = "TC400"


class ArgumentError(UserError, TypeError):
    """Host arguments that do not match the program's parameters."""

    default_code = "TC410"


class RuntimeFault(UserError, RuntimeError):
    """A fault detected while ranks run (bad peer, out-of-bounds region)."""

    default_code = "TC500"


class RankFailure(TilecommError, RuntimeError):
    """A rank raised or died; carries the rank's traceback."""

    def __init__(self, message: str, *, rank: int, traceback_text: str = "",
                 cause: BaseException | None = None):
        self.rank = rank
        self.traceback_text = traceback_text
        self.cause = cause
        super().__init__(message)


class DeadlockError(TilecommError, RuntimeError):
    """Every live rank is blocked and nothing can release any of them."""

    def __init__(self, message: str, blocked: list[dict]):
        self.blocked = blocked
        super().__init__(message)


class InternalError(TilecommError, AssertionError):
    """A bug in tilecomm itself, never the user's fault."""
