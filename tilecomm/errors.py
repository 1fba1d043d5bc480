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

    default_code = "TC200"

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

    default_code = "TC102"


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

    default_code = "TC401"


class ArgumentError(UserError, TypeError):
    """Host arguments that do not match the program's parameters."""

    default_code = "TC410"


class RuntimeFault(UserError, RuntimeError):
    """A fault detected while ranks run (bad peer, out-of-bounds region)."""

    default_code = "TC503"


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


class DataRaceError(TilecommError, RuntimeError):
    """A race-checking call found accesses to one window copy that nothing
    orders (``RunConfig(detect_races=True)``).  ``races``: the races found
    (``tilecomm.check.races.Race`` records, at most ``MAX_REPORTED``),
    ``omitted``: how many more.  The call's results were written back."""

    def __init__(self, races, omitted: int = 0):
        self.races = tuple(races)
        self.omitted = int(omitted)
        n = len(self.races) + self.omitted
        lines = [f"{n} data race(s) found -- these accesses may see each other's data in "
                 f"either order on the chip:"]
        for i, r in enumerate(self.races, 1):
            lines.append(f"  {i}. {r}")
        if self.omitted:
            lines.append(f"  ... and {self.omitted} more")
        self.code = "TC601"
        self.hint = ("order each pair with a notify the reader's wait needs, a collective, or a "
                     "task dependency")
        super().__init__("\n".join(lines) + f"\n  hint: {self.hint}")


class TilecommWarning(UserWarning):
    """A program that compiles but whose protocol looks wrong (the protocol
    lint, ``RunConfig(lint=...)``): ``code``, ``span``, ``message``, ``hint``
    as a ``UserError``'s, rendered ``file:line:col: warning[TCnnn]: ...``."""

    def __init__(self, message: str, *, code: str, span: Span | None = None,
                 hint: str | None = None):
        self.code, self.message, self.span, self.hint = code, message, span, hint
        super().__init__(self.render())

    def render(self) -> str:
        where = f"{self.span}: " if self.span else ""
        text = f"{where}warning[{self.code}]: {self.message}"
        return text + (f"\n  hint: {self.hint}" if self.hint else "")


class LintError(UserError, ValueError):
    """``RunConfig(lint="error")``: the protocol lint's warnings, raised before
    any rank starts.  The first warning is the error itself (its code and
    span); all of them are in ``diagnostics``."""

    default_code = "TC701"

    def __init__(self, warnings_found):
        first = warnings_found[0]
        super().__init__(first.message, code=first.code, span=first.span, hint=first.hint)
        self.warnings = tuple(warnings_found)
        self.diagnostics = [self] + [UserError(w.message, code=w.code, span=w.span, hint=w.hint)
                                     for w in warnings_found[1:]]


class InternalError(TilecommError, AssertionError):
    """A bug in tilecomm itself, never the user's fault."""


# Stable error codes.  A test checks every code raised anywhere is listed here.
CODES = {
    "TC101": "operand must be a window-bound DistributedTensor",
    "TC102": "operand of the wrong kind (Tensor / Tile / Scalar / Ptr / CommCtx)",
    "TC103": "call arguments do not match the signature",
    "TC104": "argument kind does not match the callee's parameter",
    "TC105": "argument must be a static int / bool literal",
    "TC106": "invalid parameter annotation",
    "TC107": "bare tensor annotation needs a real argument to take its shape from",
    "TC200": "bad value",
    "TC201": "offsets / shape rank does not match the tensor rank",
    "TC202": "static region out of bounds",
    "TC203": "atomic add on an unsupported dtype",
    "TC204": "dtype mismatch",
    "TC205": "put/get sub-region arguments must be given together",
    "TC206": "negative chunk size",
    "TC207": "pipeline=True without both chunk sizes",
    "TC208": "shape mismatch",
    "TC209": "alloc_window_buffer shape/dtype form misuse",
    "TC210": "non-positive dimension or size",
    "TC211": "unsupported device= form",
    "TC212": "device= out of range",
    "TC213": "window buffer never viewed or never dispatched",
    "TC214": "invalid enum value",
    "TC215": "not supported on the selected platform profile",
    "TC216": "value must be a compile-time constant",
    "TC217": "runtime transfer extent needs a static chunk size",
    "TC218": "value out of range (INT32 signal values, constant expressions)",
    "TC219": "collective dtype or ReduceOp not supported",
    "TC220": "collective signal shape wrong for its path (mesh / ring, kernel / HOST)",
    "TC221": "collective operands must be different buffers",
    "TC222": "invalid core_num for a collective",
    "TC224": "collective root out of range",
    "TC225": "operands of one HOST collective belong to different comm domains",
    "TC226": "HOST collective signal not sized for its comm domain's device count",
    "TC240": "pld.system.defer_wait supports only WaitCmp.Ge",
    "TC241": "a deferred waiter may register at most 64 conditions",
    # the pl op set and device arithmetic (TC250-TC279)
    "TC250": "pl.Array misuse (index form, element type, update target, dtype)",
    "TC251": "tile in the wrong memory space for the op (matmul Left x Right, vector ops Vec)",
    "TC252": "matmul operand shapes do not multiply",
    "TC253": "argument the CPU cannot honour (a physical layout with no CPU equivalent)",
    "TC254": "misplaced tensor op: a tensor operation in chip orchestration outside "
             "pl.at(CORE_GROUP)",
    "TC256": "pl.split_aiv misuse (lane count, form, nesting)",
    "TC257": "pl.while_ / pl.cond misuse",
    "TC300": "unsupported construct",
    "TC301": "operation used in the wrong kind of function",
    "TC302": "unsupported syntax",
    "TC303": "alloc_window_buffer must be the right side of a simple assignment",
    "TC304": "alloc_window_buffer name= passed explicitly",
    "TC305": "duplicate window buffer name",
    "TC306": "unknown distributed operation or category",
    "TC307": "unknown name or operation",
    "TC308": "device= on a call that does not accept it",
    "TC309": "pl.yield_ / init_values misuse",
    "TC310": "alloc_window_buffer inside a loop",
    "TC311": "HOST collective not allowed inside a loop or a larger expression",
    "TC312": "allreduce signal omitted where it cannot be synthesized, or passed as None",
    "TC330": "task scope misuse (pl.at / pl.spmd / pl.manual_scope form, placement, nesting, "
             "deps)",
    "TC331": "pld.system.defer_wait outside a dedicated pl.at(CORE_GROUP) waiter, or a waiter "
             "body that breaks the deferred-completion contract",
    "TC401": "invalid DistributedConfig",
    "TC402": "invalid RunConfig",
    "TC410": "host arguments do not match the program",
    "TC411": "host argument of the wrong type",
    "TC412": "output argument is read-only",
    "TC413": "DistributedWorker used after close()",
    "TC414": "argument not accepted by this call (foreign or freed device tensor; device tensor "
             "in a one-shot call)",
    "TC415": "program not registered with this DistributedWorker",
    "TC416": "rt(*args) is ambiguous on a multi-program DistributedWorker",
    "TC417": "invalid DistributedWorker construction (no program, programs on different "
             "platforms/devices, reset without persistent, bad config or start-up time-out)",
    "TC418": "device tensor misuse (shape, dtype, worker, placement, ownership)",
    "TC419": "raw device address or size invalid (malloc / free / copy_to / copy_from)",
    "TC420": "persistent comm domain changed specification",
    "TC421": "invalid run-handle timeout",
    "TC422": "return-style call cannot allocate an output with dynamic dimensions",
    "TC423": "callbacks name no SubWorker of the prepared programs",
    "TC426": "a submitted call stopped by the failure of another call in flight",
    "TC425": "a SubWorker declared with a `...` body has no callback bound",
    "TC424": "a program with several orchestration functions called without naming one",
    "TC440": "invalid run-artefact (DFX) field of RunConfig",
    "TC441": "RunConfig.enable_pmu: no PMU counters on the CPU",
    "TC443": "run artefacts could not be written under the program's output directory",
    "TC444": "a trace file is not a tilecomm swimlane trace",
    "TC445": "a dumps= entry is not a tensor argument of its task (pl.at / pl.submit / "
             "inline chip scope)",
    "TC446": "pl.dump_tag misuse (not one tensor by name, used as a value, in a HOST "
             "orchestrator, or on a tensor local to a task body or kernel)",
    "TC450": "MPI job size differs from the program's world size",
    "TC451": "MPI backend unavailable (mpi4py / an MPI library missing, or no thread support)",
     "TC456": "the MPI library's dynamic windows use the separate memory model (host tensors "
              "across nodes need MPI_WIN_UNIFIED)",
    "TC501": "peer out of range (runtime)",
    "TC502": "region out of bounds (runtime)",
    "TC503": "invalid runtime value",
    "TC504": "wait timed out (RunConfig.wait_timeout_s)",
    "TC505": "not enough free space in /dev/shm for the call's windows and arguments",
    "TC506": "a system resource ran out (memory, /dev/shm, open files, processes)",
    "TC507": "a collective's signal is not clean (left over credits or hand-rolled values)",
    # device arithmetic and the pl op set at run time (TC520-TC529)
    "TC520": "integer division or modulo by zero in device code (runtime)",
    "TC510": "MPI window pool exhausted (TILECOMM_MPI_POOL_MB)",
    # checkers (TC6xx)
    "TC601": "data race: two accesses to one window copy that nothing orders "
             "(RunConfig.detect_races)",
    "TC602": "an explored schedule did not replay (the program computes something different "
             "between its visible operations from run to run)",
    "TC603": "an explored schedule ran past its step limit (a loop polling window memory "
             "without a wait)",
    "TC604": "a program or argument explore cannot run (tasks on a rank's cores, ranks on "
             "several machines, a bad schedule token or world size)",
    # protocol lint (TC7xx): warnings, errors under RunConfig(lint="error")
    "TC701": "Set and AtomicAdd notifies mixed on one signal cell",
    "TC702": "an Eq wait on a cell that several AtomicAdd notifies can carry past its value",
    "TC703": "a wait threshold no notifier of the cell can reach",
    "TC704": "a notify issued before the store or put it publishes to the same peer",
    "TC705": "a collective's signal window also used by hand-rolled notifies or waits",
    "TC706": "a notify in a pl.split_aiv body that every lane issues (fires once per lane)",
    "TC707": "a window its peers store into, read by its owner before any wait",
}
