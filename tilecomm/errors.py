"""Error types.

User errors (bad programs, bad arguments) and internal errors are distinct
types.  Every user error carries a stable ``code`` and, when it comes from a
program, the source span ``file:line:col`` it refers to.  User errors also
subclass the builtin exception a Python user would expect (``TypeError`` for a
wrong kind of operand, ``ValueError`` for a bad value, ``SyntaxError``-like
errors for unsupported constructs) so ``except TypeError`` keeps working.
"""
from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass

# the package's directory: frames of files under it are tilecomm's own
_PACKAGE = os.path.dirname(os.path.abspath(__file__))
FILTERING_NOTE = ("(tilecomm's internal frames are hidden from this traceback; "
                  "TILECOMM_TRACEBACK_FILTERING=off shows them)")


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


def _internal(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE + os.sep) or filename.startswith("<")


def user_span():
    """Where the user's code called into tilecomm: the innermost frame outside
    the package (errors about a call point at the user's line)."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not _internal(fn):
            col = 1
            try:
                pos = list(f.f_code.co_positions())[f.f_lasti // 2]
                col = (pos[2] or 0) + 1
            except (AttributeError, IndexError, TypeError):
                pass
            return Span(fn, f.f_lineno, col, f.f_code.co_name)
        f = f.f_back
    return None


def frames_filtered() -> bool:
    """Whether entry points hide tilecomm's frames from the errors they pass
    on: yes unless ``TILECOMM_TRACEBACK_FILTERING=off`` (read at the moment
    an error passes, so a test or a debugger can switch it)."""
    return os.environ.get("TILECOMM_TRACEBACK_FILTERING", "").lower() not in ("off", "0")


def at_entry_point(e: BaseException) -> None:
    """What an entry point (a decorated function called from Python, a
    compiled program's call) does with an error passing out through it: a
    tilecomm error about the user's program loses tilecomm's frames; an
    ``InternalError`` or any other exception is a bug in tilecomm and keeps
    every frame."""
    if isinstance(e, TilecommError) and not isinstance(e, InternalError) and \
            frames_filtered():
        hide_internal_frames(e)


def hide_internal_frames(e: BaseException) -> BaseException:
    """``e`` with tilecomm's own frames taken out of its traceback, as JAX and
    Triton filter theirs: what a user reads of a ``UserError`` (or a report
    about the program: a deadlock, races, a rank's failure) is their own
    lines and the located message, not the compiler's.  The exception it was
    raised while handling is internal too, so it is not shown.  Each entry
    point the error passes filters again, so only the outermost one's frame
    (the line that re-raises) remains."""
    kept = []
    tb = e.__traceback__
    while tb is not None:
        # lowered code runs in a namespace of its own, without a module name:
        # it is tilecomm's translation of the user's lines, which the message names
        frame = tb.tb_frame
        if not _internal(frame.f_code.co_filename) and "__name__" in frame.f_globals:
            kept.append(tb)
        tb = tb.tb_next
    new = None
    for t in reversed(kept):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    e.__suppress_context__ = True
    if not getattr(e, "frames_hidden", False):
        e.frames_hidden = True
        if hasattr(e, "add_note"):      # Python 3.11+: printed under the message
            e.add_note(FILTERING_NOTE)
    return e.with_traceback(new)


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
    "TC227": "chip dispatch without device= that takes window views or sits in a loop over "
             "the ranks",
    "TC228": "a HOST input (not pl.Out / pl.InOut) passed to a chip pl.Out / pl.InOut "
             "parameter",
    "TC240": "pld.system.defer_wait supports only WaitCmp.Ge",
    "TC241": "a deferred waiter may register at most 64 conditions",
    "TC242": "an asynchronous put's region is not static, flat-contiguous and logically 1-D",
    "TC243": "async_session option out of range (sync_id in [0, 7], block_bytes not negative)",
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
    "TC313": "an ergonomic collective's rank count (nranks) missing where its signal needs it, "
             "given where nothing uses it, or not a positive compile-time int",
    "TC330": "task scope misuse (pl.at / pl.spmd / pl.manual_scope form, placement, nesting, "
             "deps)",
    "TC331": "pld.system.defer_wait outside a dedicated pl.at(CORE_GROUP) waiter, or a waiter "
             "body that breaks the deferred-completion contract",
    "TC332": "a defer=True collective outside a pl.at(CORE_GROUP) task body, or a task that "
             "uses its result or issues more work after it",
    "TC401": "invalid DistributedConfig",
    "TC402": "invalid RunConfig",
    "TC403": "a program written for several ranks called without a DistributedConfig (it "
             "would run on 1 rank)",
    "TC410": "host arguments do not match the program",
    "TC411": "host argument of the wrong type",
    "TC412": "output argument is read-only",
    "TC413": "a worker (DistributedWorker, ChipWorker) used after close(), or a registration "
             "handle after unregister()",
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
    "TC427": "ChipWorker or benchmark misuse (a level other than 2, a program of another "
             "platform, a second active worker for one device, options that exclude each "
             "other, no positive round count)",
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
    "TC508": "a kernel ended with an asynchronous put whose event was never waited",
    "TC509": "an asynchronous put's session or event used outside its kernel call or session",
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
             "several machines, a bad world size)",
    "TC605": "a schedule token that is malformed, or was recorded for another program, world "
             "size or preemption bound",
    "TC606": "a read of window elements nobody had written: they still held the "
             "RunConfig.poison_windows sentinel (a warning)",
    # protocol lint (TC7xx): warnings, errors under RunConfig(lint="error")
    "TC701": "Set and AtomicAdd notifies mixed on one signal cell",
    "TC702": "an Eq wait on a cell that several AtomicAdd notifies can carry past its value",
    "TC703": "a wait threshold no notifier of the cell can reach",
    "TC704": "a notify issued before the store or put it publishes to the same peer (an "
             "asynchronous put: before the wait of its event)",
    "TC705": "a collective's signal window also used by hand-rolled notifies or waits",
    "TC706": "a notify in a pl.split_aiv body that every lane issues (fires once per lane)",
    "TC707": "a window its peers store into, read by its owner before any wait",
    "TC708": "a peer's window copy that is written during the call, read with remote_load "
             "or get before any wait",
    "TC709": "a Ge 0 wait, which the cell's initial value already satisfies",
    "TC710": "one signal cell Set by two ranks with nothing ordering the Sets",
    "TC711": "a Ge wait several producers add into, reachable without one of them, before a "
             "read of what every producer stores",
}

# How to fix each code: one hint per entry of CODES (the error reference of
# the documentation site prints them beside the meanings; a test keeps the
# two tables' codes equal).  The hint an error carries is about its own
# arguments; these say what the code asks of a program in general.
FIXES = {
    "TC101": "pass a window view: a pl.InOut[pld.DistributedTensor[...]] parameter that the "
             "HOST orchestrator fills with pld.window(buf, shape, dtype=...)",
    "TC102": "pass the kind the op takes: load a Tensor into a Tile with pl.load before tile "
             "ops, store a Tile with pl.store, and take comm contexts from "
             "pld.get_comm_ctx(window)",
    "TC103": "call it with the parameters `tilecomm ops NAME` lists: every required argument "
             "once, keyword-only ones by name",
    "TC104": "make the argument the kind the callee's parameter is annotated with (a window "
             "view for a DistributedTensor parameter, a host tensor row for a Tensor, a scalar "
             "for pl.Scalar)",
    "TC105": "write a literal int or bool (or a module-level constant) for this argument; it "
             "shapes the compiled code",
    "TC106": "annotate the parameter with a tilecomm type: pl.Tensor[[shape], dtype], "
             "pld.DistributedTensor[...], pl.Scalar[dtype], wrapped in pl.Out / pl.InOut "
             "when written",
    "TC107": "give the annotation a shape (pl.Tensor[[R, C], pl.FP32]), or compile with real "
             "host arguments so the shape can be taken from them",
    "TC200": "pass a value in the documented range; the message names the argument and what it "
             "accepts",
    "TC201": "give offsets and shapes one entry per dimension of the tensor (a 2-D window takes "
             "[row, col])",
    "TC202": "keep offsets + shape within the tensor's shape; read a smaller region or grow the "
             "window",
    "TC203": "accumulate into FP32, BF16, FP16, INT32, INT16 or INT8 (64-bit types have no "
             "atomic add), or use a plain store",
    "TC204": "make both sides the same dtype: cast the tile with pl.cast, or view the window "
             "with the dtype the data has",
    "TC205": "give dst_offsets, src_offsets and shape together, or none of them for a whole "
             "tensor",
    "TC206": "pass chunk_rows / chunk_cols of 0 (one copy) or a positive size",
    "TC207": "set both chunk_rows and chunk_cols when pipeline=True",
    "TC208": "make the shapes agree: the tile's shape must be the region's, and elementwise "
             "operands must match",
    "TC209": "use one form: alloc_window_buffer(nbytes) for bytes, or "
             "alloc_window_buffer([shape], dtype=...) for a shape; not both, not neither",
    "TC210": "make every dimension and size at least 1",
    "TC211": "dispatch with device=r, r a rank index (an int, a loop variable of "
             "pl.range(pld.world_size()) or an expression of them)",
    "TC212": "keep device= below the world size (len(DistributedConfig.device_ids))",
    "TC213": "view the buffer with pld.window(...) in a dispatch, or delete the allocation",
    "TC214": "use a member of the enum the parameter takes (pld.NotifyOp.Set, "
             "pld.WaitCmp.Ge, pld.ReduceOp.Sum, ...)",
    "TC215": "stay within the chip profile's limits (see the collectives tutorial), or run "
             "with RunConfig(platform=\"cpu\"), which lifts them",
    "TC216": "compute the value from literals, module constants and static parameters only",
    "TC217": "set chunk_rows and chunk_cols so the staging tile has a static size when the "
             "transfer extent is known only at run time",
    "TC218": "keep signal values and constant expressions within INT32",
    "TC219": "use a dtype and ReduceOp the collective supports (`tilecomm ops "
             "pld.tensor.NAME` lists them)",
    "TC220": "size the signal for the path: [NR, 1] for a mesh kernel collective, "
             "[2*(NR-1), NR] for a ring allreduce, [world_size] on the HOST path",
    "TC221": "give each operand of the collective its own alloc_window_buffer",
    "TC222": "pass core_num >= 1, not above the signal's column count (and the chip's AIV "
             "cores under a chip profile)",
    "TC224": "name a root inside the comm domain: 0 <= root < its rank count",
    "TC225": "take every operand of one HOST collective from windows dispatched to the same "
             "set of devices",
    "TC226": "allocate the HOST collective's signal with one cell per device of its comm "
             "domain ([pld.world_size()] when every rank takes part)",
    "TC227": "dispatch with device=r (r the rank loop's variable, or a rank index); leave "
             "device= out only for comm-less work outside a loop over the ranks",
    "TC228": "annotate the HOST parameter pl.Out[...] (written only) or pl.InOut[...] (read "
             "and written), so the results reach the caller's array",
    "TC240": "defer on a Ge condition: count arrivals with AtomicAdd and wait for >= the count",
    "TC241": "split the conditions over several waiter tasks (64 each at most)",
    "TC242": "move one row ([1, n]) or one contiguous run per pld.tensor.put_async, with a "
             "static shape; use pld.tensor.put for 2-D or runtime-sized regions",
    "TC243": "pass sync_id from 0 to 7 and block_bytes of 0 (the 1 MiB default) or more",
    "TC250": "index a pl.Array with one scalar index and store elements of its declared type",
    "TC251": "move tiles into the memory the op needs (pl.move to Left / Right for matmul "
             "operands, Vec for vector ops)",
    "TC252": "make the inner dimensions agree: [M, K] x [K, N]",
    "TC253": "drop the layout option: the CPU has no physical tile layouts, and results are "
             "the same without it",
    "TC254": "put the tensor operation inside a pl.at(level=pl.Level.CORE_GROUP) task or an "
             "InCore kernel",
    "TC256": "give pl.split_aiv a lane count the form accepts, and do not nest it",
    "TC257": "write pl.while_ / pl.cond in the documented form (a condition on scalars, loop "
             "state through init_values)",
    "TC300": "rewrite the construct with the language's own forms (pl.range for loops, ops "
             "from `tilecomm ops`)",
    "TC301": "move the op to a kind of function that may use it (`tilecomm ops NAME` says "
             "where): tile and comm work into @pl.jit.incore kernels, windows and dispatches "
             "into the @pl.jit.host orchestrator",
    "TC302": "rewrite the line with the supported subset of Python: assignments, calls, "
             "pl.range loops, if on scalars, return",
    "TC303": "write `name = pld.alloc_window_buffer(...)` on a line of its own",
    "TC304": "drop name=: the buffer is named after the variable it is assigned to",
    "TC305": "give each window buffer of a program its own variable name",
    "TC306": "use an op that exists (`tilecomm ops` lists them; pld.system, pld.tile and "
             "pld.tensor are the categories)",
    "TC307": "define the name before use, import it at module level, or check its spelling "
             "against `tilecomm ops`",
    "TC308": "pass device= only on dispatches of chip functions from the HOST orchestrator",
    "TC309": "use pl.yield_ only as the last statement of a loop or branch that carries values "
             "in init_values, with one value per carried variable",
    "TC310": "allocate window buffers before the loop and reuse them in every iteration",
    "TC311": "call the HOST collective as a statement of its own, outside loops (or pass an "
             "explicit signal allocated before the loop)",
    "TC312": "pass an explicit signal window, or drop signal= entirely on a HOST mesh "
             "allreduce so one is synthesized",
    "TC313": "pass nranks=<the program's rank count> (a literal int) to pld.all_reduce("
             "mode=\"ring\") or pld.all_to_all_v, and leave it out of a mesh pld.all_reduce",
    "TC330": "write tasks in the documented forms: `with pl.at(level=pl.Level.CORE_GROUP, "
             "deps=[...]) as tid:` or `for i in pl.spmd(n):` inside a @pl.jit function, deps "
             "naming TaskIds",
    "TC331": "put pld.system.defer_wait alone in its own pl.at(level=pl.Level.CORE_GROUP) "
             "waiter task, and let tasks that need it take deps=[waiter_tid]",
    "TC332": "issue the collective as the last tensor work of its own `with pl.at(level="
             "pl.Level.CORE_GROUP) as tid:` task and read its result in tasks with deps=[tid]",
    "TC401": "give DistributedConfig(device_ids=[0, 1, ...]): distinct non-negative ints, at "
             "least one",
    "TC403": "call with config=RunConfig(distributed_config=DistributedConfig(device_ids="
             "[0, 1, ...])), one device per rank the program is written for",
    "TC402": "pass RunConfig fields with the documented types and values (the message names "
             "the field)",
    "TC410": "pass one host tensor per parameter of the HOST function, in order, with the "
             "annotated shapes (leading dimension: the rank count)",
    "TC411": "pass numpy arrays or torch CPU tensors of the annotated dtype",
    "TC412": "pass a writable array for pl.Out / pl.InOut parameters (np.zeros(...), not a "
             "read-only view)",
    "TC413": "make calls inside the `with compiled.prepare() as rt:` block, or prepare a new "
             "worker",
    "TC414": "pass device tensors only to calls of the worker that allocated them, before "
             "free_tensor, and host tensors to one-shot calls",
    "TC415": "register the program with the worker first (prepare(extra_compiled=[...]) or "
             "rt.register(compiled))",
    "TC416": "name the program: rt.run(compiled, *args)",
    "TC417": "build the worker from compiled programs of one platform and device set, with "
             "reset_persistent_windows only together with persistent=True",
    "TC418": "use a device tensor with its own shape and dtype, on the rank (device=) that "
             "holds it",
    "TC419": "keep copies within the allocation: an address from malloc (or data_ptr) of the "
             "same worker, and a size that fits",
    "TC420": "keep a persistent window's shape and device set the same across calls, or "
             "prepare a new worker",
    "TC421": "pass a finite timeout >= 0, or None to wait without limit",
    "TC422": "call in place with output tensors you allocated, since a pl.dynamic dimension "
             "has no size to allocate from",
    "TC423": "name SubWorkers that the prepared programs declare (the message lists them)",
    "TC424": "select one orchestration function: compiled[\"name\"] or compiled.name",
    "TC425": "bind the SubWorker with prepare(callbacks={\"name\": fn}), or give it a body",
    "TC427": "construct ChipWorker(config=RunConfig(platform=...)) for the program's platform, "
             "enter one worker per device, and pass benchmark either config= or platform=",
    "TC426": "look at the error of the call before it, which stopped this one, and fix that",
    "TC440": "give the run-artefact fields of RunConfig their documented types",
    "TC441": "drop enable_pmu: the CPU has no PMU counters to read",
    "TC443": "make the program's output directory writable, or compile with an output_dir "
             "that is",
    "TC444": "pass a trace written by a traced call (compiled.trace_path, or its dfx_outputs "
             "directory)",
    "TC445": "list in dumps= only tensor arguments of that task, by name",
    "TC446": "tag one tensor argument by name, as a statement of its own, inside a kernel or "
             "chip function, not in the HOST orchestrator",
    "TC450": "start as many MPI processes as the program has ranks: mpiexec -n "
             "len(device_ids)",
    "TC451": "install the MPI extra (pip install 'tilecomm[mpi]') or choose another "
             "transport; the MPI library must offer MPI_THREAD_MULTIPLE",
    "TC456": "use an MPI library whose windows use the unified memory model, or keep host "
             "tensors on one node",
    "TC501": "compute peers inside the comm domain: 0 <= peer < pld.nranks(ctx), e.g. "
             "(my_rank + nranks - 1) % nranks rather than my_rank - 1",
    "TC502": "keep run-time offsets + shape within the tensor; check the index arithmetic "
             "the message names",
    "TC503": "pass run-time values in the documented range (the message names the argument)",
    "TC504": "raise RunConfig.wait_timeout_s, or find why the notify is late (tilecomm trace "
             "shows who released each wait)",
    "TC505": "free space in /dev/shm (or enlarge it), or make the windows and arguments "
             "smaller",
    "TC506": "raise the limit the message names (ulimit -n for open files, memory, "
             "processes), or run fewer ranks",
    "TC507": "give each collective a signal window of its own that nothing else notifies or "
             "sets, and do not reuse a signal after a call stopped half way",
    "TC508": "wait every event with pld.system.wait_async_event(event, session) before the "
             "kernel returns, and before the notify that publishes its data",
    "TC509": "build the session in the kernel that issues and waits the puts, and wait each "
             "event with the session it was issued on",
    "TC510": "set TILECOMM_MPI_POOL_MB above the windows a run needs",
    "TC520": "keep divisors non-zero in device code; check the value before dividing",
    "TC601": "order the two accesses: publish data before the notify a reader's wait needs, "
             "or put a collective or task dependency between them",
    "TC602": "make the program compute the same thing from run to run between its "
             "communication ops (no clocks, random numbers or process ids)",
    "TC603": "wait on a signal instead of polling window memory in a loop, or raise "
             "max_steps",
    "TC604": "explore programs without deferred waits or tasks that must run at once, on "
             "one machine, at a world size of 1 to 16",
    "TC605": "replay a token exactly as a failure printed it, on the program and world size "
             "that explored it (an edit to the program makes its tokens stale: explore again)",
    "TC606": "write every element a reader reads before the notify that lets it in (a peer's "
             "rows included), or read only the rows that were written; the warning names the "
             "window, the rows and the read",
    "TC701": "use one notify op per signal cell: Set for flags, AtomicAdd for counters",
    "TC702": "wait with Ge for the total of the adds, not Eq",
    "TC703": "make the threshold one the notifies can reach (count the notifiers and their "
             "values)",
    "TC704": "issue the remote store or put first (wait an asynchronous put's event), then the "
             "notify that announces it",
    "TC705": "give the collective a signal window of its own",
    "TC706": "issue the notify from one lane only (`if aiv_id == 0:`), or make the cell "
             "depend on aiv_id",
    "TC707": "wait for the peers' notifies before the owner reads the window",
    "TC708": "wait for the owner's notify (its data is in place) before remote_load or get",
    "TC709": "wait for the value the notifies produce (>= 1 for a Set of 1, >= n for n "
             "AtomicAdds of 1)",
    "TC710": "give each writer its own cell, or count arrivals with AtomicAdd and wait for "
             ">= their number",
    "TC711": "wait for >= the sum of every producer's adds before reading what they all store",
}
