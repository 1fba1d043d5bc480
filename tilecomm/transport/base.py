"""The transport interface: how ranks reach each other's symmetric windows.

Two halves, because windows are allocated by the controller and used by ranks:

* :class:`TransportHost` (controller side, one per set of ranks): allocates
  the symmetric windows of a comm domain (one zero-filled copy per member),
  reads a signal cell for the monitor, wakes sleepers on abort, and hands the
  ranks what they need to reach it (:meth:`TransportHost.endpoint`).
* :class:`Endpoint` (rank side, one per rank process): this rank's own copy of
  a window, put / get of regions (plain or atomic add), signal set / add,
  waits with a deadline and a "blocked" callback, flush, read a cell -- and,
  optionally, a direct array view of a peer's copy where memory is shared.

Windows are symmetric: every member's copy has the same size, and a view of it
(``WindowKey``: shape, dtype) the same layout, so a remote region is named by
a window handle (``Endpoint.window(key, member)``) and an ``index``, a tuple
of slices computed (and bounds-checked) by the rank runtime on its own copy.  A transport never checks
bounds or types; the rank runtime never touches a peer's memory itself.

Completion: every put, get, signal and atomic add is complete at the target
when the call returns, in program order, so "data, then flag" needs no fence;
``flush`` exists for transports that relax this later.  Signal operations are
sequentially consistent with one another (see the lost-wakeup argument in
native_core.c).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
import numpy as np

from .. import _native_core as native

__all__ = ["Endpoint", "TransportHost", "WaitHooks", "WindowKey", "NOTIFY_ADD", "NOTIFY_SET",
           "CMP_EQ", "CMP_GE"]

# the native core's encodings (pld NotifyOp / WaitCmp share them; a unit test
# cross-checks the enums against these)
NOTIFY_ADD = native.OP_ADD
NOTIFY_SET = native.OP_SET
CMP_EQ = native.CMP_EQ
CMP_GE = native.CMP_GE


@dataclass(frozen=True)
class WindowKey:
    """One typed view of a window buffer: the same on every member."""

    segments: object         # per-member handles of the window (a sequence; shm: Copies)
    devices: tuple           # per-member device (logical rank)
    shape: tuple
    dtype: object             # numpy dtype


class WaitHooks(ABC):
    """What a blocked wait reports to, and asks of, the rank runtime."""

    @abstractmethod
    def blocked(self) -> None:
        """Called once, before the wait first sleeps: publish the wait record
        (the monitor's deadlock analysis reads it).  The transport re-checks the
        condition after this call, so a release racing with it is never lost."""

    @abstractmethod
    def check(self, value: int) -> None:
        """Called after every unsatisfied sleep slice with the last value seen;
        raises to end the wait (abort, time-out)."""

    @abstractmethod
    def unblocked(self) -> None:
        """Called once when a wait that called :meth:`blocked` ends, however."""


class Endpoint(ABC):
    """A rank's side of the transport."""

    name: str = "?"

    # ----------------------------------------------------------- own memory
    @abstractmethod
    def local(self, key: WindowKey, member: int) -> np.ndarray:
        """This rank's own copy (member ``member``) of a window, as an array."""

    def peer_view(self, key: WindowKey, member: int) -> np.ndarray | None:
        """Optional capability: a writable array aliasing member ``member``'s
        copy (zero-copy), or None where the transport cannot map peer memory."""
        return None

    # ----------------------------------------------------------- data
    def where(self, addr: int) -> tuple | None:
        """Optional capability: (the name every rank knows the window memory
        at process address ``addr`` by, the byte offset there), or None --
        how an explored run names what an op touches across processes."""
        return None

    @abstractmethod
    def window(self, key: WindowKey, member: int):
        """An opaque handle for member ``member``'s copy of a window view;
        ranks cache it per view, so put / get skip any lookup."""

    @abstractmethod
    def put(self, window, index: tuple, src: np.ndarray, atomic: bool) -> None:
        """Write ``src`` into ``copy[index]`` of a ``window`` handle (``+=``
        element-wise atomically if ``atomic``).  ``src`` has the region's size;
        ``index`` ``()`` is the whole view."""

    @abstractmethod
    def get(self, window, index: tuple, dst: np.ndarray) -> None:
        """Copy ``copy[index]`` of a ``window`` handle into ``dst`` (same shape)."""

    def flush(self) -> None:
        """Complete every operation issued so far (already true here)."""

    # ----------------------------------------------------------- signals
    @abstractmethod
    def cell(self, key: WindowKey, member: int, byte_offset: int):
        """An opaque handle for the int32 cell at ``byte_offset`` of member
        ``member``'s copy; ranks cache it, so it should be cheap to use."""

    @abstractmethod
    def signal(self, cell, op: int, value: int) -> int:
        """Atomically set (``NOTIFY_SET``) or add to (``NOTIFY_ADD``) a cell and
        wake whoever sleeps on it; returns the value the cell took (a trace
        tells from it which notify released a wait)."""

    @abstractmethod
    def read_cell(self, cell) -> int:
        """The cell's current value (seq_cst)."""

    @abstractmethod
    def try_wait(self, cell, cmp: int, expected: int, spin: int) -> bool:
        """Spin ``spin`` times, then yield briefly, until the cell (always this
        rank's own) satisfies ``cmp`` against ``expected``; False if it still
        does not.  Publishes nothing: the common, cheap case of a wait."""

    def signal_group(self, outs: list, ins: list):
        """Prepare the cells of one barrier generation for :meth:`arrive_wait`:
        ``outs`` (cells in peers' copies) and ``ins`` (this rank's own cells).
        Opaque; built once, used for every call."""
        return tuple(outs), tuple(ins)

    def arrive_wait(self, group, value: int, expected: int, spin: int) -> int:
        """Add ``value`` to every cell of ``outs``, then :meth:`try_wait` (``>=
        expected``) on each cell of ``ins``; -1 if all were satisfied, else the
        index of the first that was not.  A transport may do it in one step."""
        outs, ins = group
        for c in outs:
            self.signal(c, NOTIFY_ADD, value)
        for i, c in enumerate(ins):
            if not self.try_wait(c, CMP_GE, expected, spin):
                return i
        return -1

    @abstractmethod
    def wait(self, cell, cmp: int, expected: int, hooks: WaitHooks) -> None:
        """Block until the cell (this rank's own) satisfies the condition:
        ``hooks.blocked()`` first, then sleep in slices, ``hooks.check(value)``
        after each, ``hooks.unblocked()`` at the end."""

    # ----------------------------------------------------------- lifetime
    def end_run(self) -> None:
        """Forget the windows of the run that just ended (they are being freed)."""

    def close(self) -> None:
        self.end_run()


class TransportHost(ABC):
    """The controller's side of a transport, for one set of ranks."""

    name: str = "?"

    @abstractmethod
    def allocate(self, run, nbytes: int, members: tuple) -> tuple:
        """Symmetric window of ``nbytes`` per member (zero-filled) for one run;
        returns the per-member handles (``WindowKey.segments``)."""

    @abstractmethod
    def read_cell(self, handle, byte_offset: int) -> int:
        """Value of an int32 cell of one member's copy (for the monitor)."""

    @abstractmethod
    def endpoint(self, device: int, world: int) -> Endpoint:
        """Called inside rank ``device``'s process: its side of the transport."""

    def allocate_kept(self, source, nbytes: int, members: tuple) -> tuple:
        """A window that outlives runs (a persistent comm domain), as
        :meth:`allocate`; ``source.new_segment`` gives segments that live as
        long as the ranks."""
        return self.allocate(source, nbytes, members)

    def zero(self, handles: tuple, nbytes: int) -> bool:
        """Zero every member's copy of a kept window (every rank idle); False
        when the window is the caller's segments, which it zeroes itself."""
        return False

    def start_run(self, run) -> None:
        """A run begins (windows will be allocated, ranks will connect)."""

    def end_run(self, run) -> None:
        """A run ended: its windows are about to be freed."""

    def wake(self, handle, byte_offset: int) -> None:
        """Wake whoever sleeps on a cell (on abort), if the transport can."""

    def started(self) -> None:
        """In the controller, once every rank process exists."""

    def child_fds(self, device: int) -> list:
        """File descriptors rank ``device``'s process must keep open (a
        launcher that closes inherited descriptors in its children spares these)."""
        return []

    def in_child(self, device: int) -> None:
        """In a freshly forked rank process: drop what belongs to other ranks."""

    def close(self) -> None:
        """Release everything (the ranks are gone)."""
