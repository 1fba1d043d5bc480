"""Leave nothing behind when the controller is terminated by SIGTERM or SIGHUP.

Ranks die with the controller on their own (their parent-death signal), but
the /dev/shm segments of a call -- possibly GiBs -- would stay until some
later call sweeps them.  So, while it still has the default action, SIGTERM
and SIGHUP get a handler that kills every rank of this process, unlinks every
segment it owns, and then dies of the same signal with the default action
(the exit status a parent sees is unchanged).  A handler the program
installed itself is left alone; Python only lets the main thread install
handlers, so they are installed by the first launcher created there.
"""
from __future__ import annotations

import os
import signal
import threading
import time
import weakref

from ...transport import segments as S

_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

# Every launcher of this process that may have live workers.  A process-wide
# registry because a signal ends the whole process, whichever thread started
# the ranks.
_LIVE: "weakref.WeakSet" = weakref.WeakSet()


def watch(launcher) -> None:
    """Register ``launcher`` (anything with ``workers``: a list of ``(pid,
    conn)``) so that its ranks are killed if the process is terminated, and
    install the handlers."""
    _LIVE.add(launcher)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _SIGNALS:
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _terminate)


def _terminate(signum, frame):
    try:
        for launcher in list(_LIVE):
            for pid, _ in list(launcher.workers):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass                # already gone
        S.sweep(os.getpid())
    finally:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        time.sleep(1.0)                 # the signal is delivered before this returns
        os._exit(128 + signum)


def _after_fork_in_child():
    # a rank (or any child of this process) owns neither those ranks nor those
    # segments: it must die of SIGTERM / SIGHUP plainly
    _LIVE.clear()
    for sig in _SIGNALS:
        try:
            if signal.getsignal(sig) is _terminate:
                signal.signal(sig, signal.SIG_DFL)
        except ValueError:
            pass                        # not the main thread of the child: nothing to reset


os.register_at_fork(after_in_child=_after_fork_in_child)
