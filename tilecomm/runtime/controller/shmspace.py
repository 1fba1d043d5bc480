"""Room in /dev/shm: checked before a run, named when a rank dies of SIGBUS.

Segments are sparse tmpfs files: creating one larger than the free space
succeeds, and the process that first touches a page with no room behind it
dies of SIGBUS.  So before a run the bytes the call is known to need (window
buffers of static size, one segment per member of each comm domain, plus the
tensor arguments) are compared with the free space, and a clear error with
the numbers is raised instead.  Sizes known only at run time are not
counted, and other processes may fill /dev/shm during the run: for those, a
rank killed by SIGBUS is reported with a hint.
"""
from __future__ import annotations

import mmap
import os
import signal

from ...errors import RuntimeFault
from ...transport import segments as S


def _pages(nbytes: int) -> int:
    """Bytes a segment of ``nbytes`` occupies in tmpfs (whole pages)."""
    return -(-max(int(nbytes), 1) // mmap.PAGESIZE) * mmap.PAGESIZE


def _free() -> int | None:
    try:
        st = os.statvfs(S.SHM_DIR)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _size(nbytes: int) -> str:
    return f"{nbytes} bytes ({nbytes / 2**30:.2f} GiB)"


def check(executable, arg_bytes) -> None:
    """Raise RuntimeFault TC505 if the windows of ``executable`` plus tensor
    arguments of ``arg_bytes`` (one size per shared array) cannot fit."""
    windows = []
    for rec in executable.prog.buffers:
        if isinstance(rec.nbytes, int) and rec.devices:
            windows.append((_pages(rec.nbytes) * len(rec.devices), rec))
    window_bytes = sum(b for b, _ in windows)
    args = sum(_pages(b) for b in arg_bytes)
    need = window_bytes + args
    free = _free()
    if free is None or need <= free:
        return
    biggest = max(windows, key=lambda w: w[0], default=(0, None))[1]
    per_window = ", ".join(f"'{rec.name}' {len(rec.devices)} x {rec.nbytes} bytes"
                           for _, rec in sorted(windows, key=lambda w: -w[0]))
    raise RuntimeFault(
        f"this call needs {_size(need)} of shared memory but {S.SHM_DIR} has only "
        f"{_size(free)} free: window buffers {_size(window_bytes)} ({per_window or 'none'}), "
        f"tensor arguments {_size(args)}", code="TC505",
        span=biggest.span if biggest is not None and window_bytes > args else None,
        hint=f"make the windows smaller, free space in {S.SHM_DIR}, or enlarge it "
             f"(docker: --shm-size)")


def death_hint(signum: int) -> str:
    """Text appended to the report of a rank killed by ``signum``."""
    if signum != signal.SIGBUS:
        return ""
    free = _free()
    room = f" ({_size(free)} free now)" if free is not None else ""
    return (f"\n  hint: SIGBUS on shared memory means a page could not be backed: "
            f"{S.SHM_DIR} is probably full{room}")
