"""A rank's worker process: executes the dispatches sent to its rank, in order."""
from __future__ import annotations

import ctypes
import linecache
import os
import queue
import signal
import threading
import traceback

from .. import _native_core as native
from ..errors import UserError
from ..transport.segments import Segment
from ..transport.shm import ShmTransport
from . import control as C
from .rank import RankAborted, RankContext
from .values import HostRef, WindowRef, WindowView

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def worker_main(rank: int, ranks, conn) -> int:
    """Serve one rank until told to shut down: run dispatches in order; an
    ``end`` closes one run of the host orchestrator (ranks may serve many)."""
    # Ctrl-C reaches the whole process group; the controller alone handles it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    if os.getppid() != ranks.owner:
        return 1
    images = dict(ranks.images)             # inherited; later ones arrive by message
    try:
        control = C.ControlBlock(Segment.attach(ranks.control_segment.name), ranks.world)
    except UserError as e:                  # out of descriptors or memory: say so, not just die
        conn.send(("error", rank, "start-up", f"{type(e).__name__}: {e.message}", str(e),
                   (type(e).__name__, e.code, None)))
        return 1
    transport = ShmTransport(control, rank)
    rc = RankContext(rank, ranks.world, control, transport, ranks.config)
    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def reader():
        # drains the pipe continuously so the controller never blocks sending
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                inbox.put(("eof",))
                return
            inbox.put(msg)
            if msg[0] == "shutdown":
                return

    threading.Thread(target=reader, daemon=True).start()
    finished = False                        # between the end of a run and the next one
    while True:
        try:
            msg = inbox.get_nowait()
        except queue.Empty:
            if not finished:                # a finished rank stays FINISHED for the monitor
                control.set(rank, C.STATE, C.IDLE)
            msg = inbox.get()
        kind = msg[0]
        if kind == "eof":
            return 2
        if kind == "shutdown":
            return 0
        if kind == "image":
            images[msg[1].key] = msg[1]
            continue
        control.set(rank, C.STATE, C.RUNNING)
        finished = kind == "end"
        if finished:
            control.set(rank, C.STATE, C.FINISHED)
            conn.send(("done", rank))
            transport.close()               # unmap this run's segments (being unlinked)
            continue
        _, key, fname, seq, args, deps, loc = msg
        image = images[key]
        try:
            rc.func_id = image.func_names.index(fname)
            for dep_rank, dep_seq in deps:
                rc.wait_dispatch(dep_rank, dep_seq)
            shapes = image.param_shapes[fname]
            vals = [_materialize(a, rank, transport, s) for a, s in zip(args, shapes)]
            image.function(fname)(rc, *vals)
        except RankAborted:
            return 3
        except BaseException as e:                       # report, then stop this rank
            control.set(rank, C.STATE, C.FAILED)
            conn.send(("error", rank, fname) + format_failure(e, image, loc))
            return 1
        # publish progress for host-tensor dependencies of other ranks
        native.notify_i32(control.done_seq_addr(rank), 1, seq, 0)


def _materialize(desc, rank, transport, shape):
    if isinstance(desc, HostRef):
        a = transport.array(desc.segment, desc.dtype, desc.shape, desc.offset, desc.strides)
        return a.reshape(shape) if shape is not None and a.shape != shape else a
    if isinstance(desc, WindowRef):
        buf = desc.buffer
        if rank not in buf.devices:
            raise UserError(f"window '{buf.name}' was passed to rank {rank}, which is not in its "
                            f"comm domain {list(buf.devices)}", code="TC503")
        member = buf.domain_rank(rank)
        view_shape = shape if shape is not None else desc.shape
        local = transport.window_array(buf, member, view_shape, desc.dtype)
        return WindowView(buf, view_shape, desc.dtype, local, member)
    return desc


def format_failure(exc, image, loc):
    """(summary, traceback text in user terms, (type, code, span)) of a rank failure."""
    frames = []
    for fr in traceback.extract_tb(exc.__traceback__):
        if fr.filename == image.filename:
            span = image.linemap.get(fr.lineno)
            if span is not None:
                frames.append(span)
    lines = ["Traceback (program frames, most recent call last):"]
    dispatched = image.span(loc)
    if dispatched is not None:
        lines.append(f'  File "{dispatched.file}", line {dispatched.line}, in {dispatched.func} '
                     f'(dispatch)')
    for sp in frames:
        lines.append(f'  File "{sp.file}", line {sp.line}, in {sp.func}')
        src = linecache.getline(sp.file, sp.line).strip()
        if src:
            lines.append(f"    {src}")
    msg = exc.message if isinstance(exc, UserError) else str(exc)
    code = getattr(exc, "code", None)
    lines.append(f"{type(exc).__name__}: {msg}" + (f" [{code}]" if code else ""))
    if not isinstance(exc, UserError):
        lines.append("-- full traceback --")
        lines.append("".join(traceback.format_exception(exc)).rstrip())
    where = frames[-1] if frames else dispatched
    summary = f"{type(exc).__name__}: {msg}" + (f" at {where}" if where else "")
    return summary, "\n".join(lines), (type(exc).__name__, code, where)
