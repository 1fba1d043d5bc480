"""Named POSIX shared-memory segments for rank windows and control blocks.

Each segment is a file in ``/dev/shm`` mapped ``MAP_SHARED`` into every
process that uses it.  ``multiprocessing.shared_memory`` is deliberately not
used: it registers segments with the resource tracker, which unlinks them
when the *creating* process exits (and warns about "leaked" segments in the
others), while tilecomm needs segments to outlive whichever rank created them
and to be removed explicitly by the launcher (:func:`sweep`) or, after a
crash, by :func:`sweep_stale`.

Names are ``tilecomm-<owner_pid>-<call_id>-<index>`` so that everything a
launcher created for one call can be found and removed by prefix, and so
that segments of dead launchers can be recognised by their pid.

Mappings are page aligned, so :attr:`Segment.addr` is a multiple of the page
size (>= 4 KiB); the native core relies on that for naturally aligned atomics.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import mmap
import os
import sys
import weakref

import numpy as np

from ..errors import RuntimeFault

__all__ = ["PREFIX", "SHM_DIR", "Segment", "log_path", "mapped_ranges", "resource_error",
           "segment_name", "sweep", "sweep_stale"]

PREFIX = "tilecomm"
SHM_DIR = "/dev/shm"

# Python >= 3.13 can map without keeping a duplicate of the fd open; earlier
# versions keep one fd per live mapping (closed when the mapping goes away).
_MMAP_KW = {"trackfd": False} if sys.version_info >= (3, 13) else {}
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0)      # Linux only; elsewhere pages fault in


# Address -> length of every mapping of a segment in this process, so that a
# forked child can drop the mappings it inherits (see runtime/controller/forking.py).  An
# entry goes when its mapping does (the mmap object is freed); entries may be
# stale or missing for an instant, so the child checks a range before use.
_MAPPINGS: dict[int, int] = {}


def mapped_ranges() -> list:
    """``(address, length)`` of the segment mappings alive in this process."""
    return list(_MAPPINGS.items())


# An OSError with one of these errnos means a system resource ran out, not a
# bug: it becomes a RuntimeFault (TC506) that says which one and what to do.
_RESOURCE_HINTS = {
    errno.ENOSPC: "/dev/shm is full: make the windows smaller, remove stale tilecomm-* "
                  "segments there, or enlarge /dev/shm (docker: --shm-size)",
    errno.ENOMEM: "out of memory: shared memory counts against RAM (and the container's "
                  "memory limit); make the windows smaller or use fewer ranks",
    errno.EMFILE: "too many open files in this process: raise the limit (ulimit -n) or "
                  "keep fewer prepared workers open",
    errno.ENFILE: "too many open files on this system",
    errno.EAGAIN: "the process limit was reached (ulimit -u): use fewer ranks",
}


def resource_error(e: OSError, what: str) -> RuntimeFault | None:
    """The typed error for an OSError that means a resource ran out, else None."""
    hint = _RESOURCE_HINTS.get(e.errno)
    if hint is None:
        return None
    return RuntimeFault(f"{what}: {os.strerror(e.errno)} ({errno.errorcode[e.errno]})",
                        code="TC506", hint=hint)


def _resource_errors(verb: str):
    """Decorator: resource OSErrors of creating / mapping a segment become typed."""
    def wrap(fn):
        @functools.wraps(fn)
        def call(cls, name, *size, **options):
            try:
                return fn(cls, name, *size, **options)
            except OSError as e:
                what = f"cannot {verb} shared-memory segment {name}" + \
                    (f" of {int(size[0])} bytes" if size else "")
                typed = resource_error(e, what)
                if typed is None:
                    raise
                raise typed from e
        return call
    return wrap


def segment_name(owner_pid: int, call_id: int, index: int) -> str:
    """The canonical segment name ``tilecomm-<owner_pid>-<call_id>-<index>``."""
    return f"{PREFIX}-{int(owner_pid)}-{int(call_id)}-{int(index)}"


def log_path(owner_pid: int, call_id: int, what: str) -> str:
    """A path prefix for a call's files in /dev/shm that are not segments (the
    race check's logs), named like its segments so ``sweep`` and
    ``sweep_stale`` remove them with them."""
    # spelled out, not os.path.join: every call computes it
    return f"{SHM_DIR}/{PREFIX}-{int(owner_pid)}-{int(call_id)}-{what}"


def _path(name: str) -> str:
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise ValueError(f"invalid shared-memory segment name {name!r}")
    return os.path.join(SHM_DIR, name)


class Segment:
    """One mapped shared-memory segment.

    Attributes:
        name: segment name (file name under ``/dev/shm``).
        size: size in bytes as requested at creation (the file size).
        addr: base virtual address of the mapping in this process (page aligned).
    """

    __slots__ = ("name", "size", "addr", "_mm", "_buf", "__weakref__")

    def __init__(self, name: str, size: int, mm: mmap.mmap):
        self.name = name
        self.size = size
        self._mm = mm
        # numpy views are built on this ctypes array, not on the mmap: numpy
        # drops its buffer export right after creating a view (keeping only a
        # reference to the base object, and unwrapping memoryviews to the mmap),
        # so views on the bare mmap would not stop mmap.close() from unmapping
        # memory they still point to.  The ctypes array holds an export of the
        # mmap for as long as it lives, i.e. as long as any view does.
        self._buf = (ctypes.c_char * len(mm)).from_buffer(mm)
        self.addr = ctypes.addressof(self._buf)
        if size:                        # the mapping covers whole pages
            _MAPPINGS[self.addr] = -(-len(mm) // mmap.PAGESIZE) * mmap.PAGESIZE
            weakref.finalize(mm, _MAPPINGS.pop, self.addr, None)

    # -- construction --------------------------------------------------------

    @classmethod
    @_resource_errors("create")
    def create(cls, name: str, size: int) -> "Segment":
        """Create a new zero-filled segment; ``FileExistsError`` if it exists.

        A size of 0 is allowed: the file stays empty and a private anonymous
        page backs :attr:`addr` so that the address is still valid.
        """
        size = int(size)
        if size < 0:
            raise ValueError(f"segment size must be >= 0, got {size}")
        path = _path(name)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            if size:
                # ftruncate of a fresh tmpfs file reads back as zeros and does not
                # commit memory until pages are touched.
                os.ftruncate(fd, size)
            mm = _map(fd, size)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            raise
        os.close(fd)
        return cls(name, size, mm)

    @classmethod
    @_resource_errors("map")
    def attach(cls, name: str, populate_up_to: int = 0) -> "Segment":
        """Map an existing segment; ``FileNotFoundError`` if it does not exist.
        A segment of at most ``populate_up_to`` bytes is mapped with every
        page present (``MAP_POPULATE``: one call instead of a page fault per
        page on first touch; it commits the whole segment, hence the bound)."""
        fd = os.open(_path(name), os.O_RDWR | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            mm = _map(fd, size, 0 < size <= populate_up_to)
        finally:
            os.close(fd)
        return cls(name, size, mm)

    # -- access ----------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._mm is None

    def ndarray(self, dtype, shape, offset: int = 0, strides=None) -> np.ndarray:
        """A writable numpy view of the segment (shares memory with other processes).

        Raises ValueError if any element would lie outside ``[0, size)``.
        The view keeps the mapping alive even after :meth:`close`.
        """
        buf = self._buf
        if buf is None:
            raise ValueError(f"segment {self.name} is closed")
        dtype = np.dtype(dtype)
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
        offset = int(offset)
        if any(n < 0 for n in shape):
            raise ValueError(f"negative dimension in shape {shape}")
        if strides is None:
            # C-contiguous
            strides_t, step = [], dtype.itemsize
            for n in reversed(shape):
                strides_t.append(step)
                step *= max(n, 1)
            strides = tuple(reversed(strides_t))
        else:
            strides = (int(strides),) if np.ndim(strides) == 0 else tuple(int(s) for s in strides)
            if len(strides) != len(shape):
                raise ValueError(f"strides {strides} do not match shape {shape}")
        count = 1
        for n in shape:
            count *= n
        if count:
            lo = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
            hi = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0) + dtype.itemsize
            if lo < 0 or hi > self.size:
                raise ValueError(
                    f"view {dtype}{list(shape)} strides={strides} at offset {offset} spans bytes "
                    f"[{lo}, {hi}) outside segment {self.name} of {self.size} bytes")
        elif not 0 <= offset <= self.size:
            raise ValueError(f"offset {offset} outside segment {self.name} of {self.size} bytes")
        if count == 0:
            # Nothing to share; numpy rejects some offsets into a buffer for empty views.
            return np.empty(shape, dtype)
        return np.ndarray(shape, dtype, buffer=buf, offset=offset, strides=strides)

    # -- teardown --------------------------------------------------------------

    def close(self) -> None:
        """Unmap the segment in this process (the file stays; see :meth:`unlink`).

        If numpy views of the segment are still alive the unmap is deferred:
        the views hold the only remaining references to the mapping, which is
        unmapped when the last of them is garbage collected.  Never raises.
        """
        mm, self._mm = self._mm, None
        self._buf = None  # freed now unless a numpy view still references it
        if mm is None:
            return
        try:
            mm.close()
        except BufferError:
            pass  # views still alive; the mapping goes away with the last of them

    def unlink(self) -> None:
        """Remove the segment's name from ``/dev/shm``; idempotent.

        Processes that have it mapped keep their mapping; memory is freed once
        the last mapping is gone.
        """
        try:
            os.unlink(_path(self.name))
        except FileNotFoundError:
            pass

    def __enter__(self) -> "Segment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._mm is None else f"addr=0x{self.addr:x}"
        return f"<Segment {self.name} size={self.size} {state}>"


def _map(fd: int, size: int, populate: bool = False) -> mmap.mmap:
    if size == 0:
        # An empty file cannot be mapped; there is nothing to share anyway.
        return mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    flags = mmap.MAP_SHARED | (_MAP_POPULATE if populate else 0)
    return mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE, **_MMAP_KW)


# -- cleanup -------------------------------------------------------------------


def _list_names() -> list[str]:
    try:
        return [n for n in os.listdir(SHM_DIR) if n.startswith(PREFIX + "-")]
    except FileNotFoundError:
        return []
    except OSError as e:                # out of descriptors: say so, with a hint
        typed = resource_error(e, f"cannot list {SHM_DIR}")
        if typed is None:
            raise
        raise typed from e


def _unlink_names(names) -> int:
    count = 0
    for n in names:
        try:
            os.unlink(os.path.join(SHM_DIR, n))
            count += 1
        except FileNotFoundError:
            pass  # removed concurrently
    return count


def sweep(owner_pid: int, call_id: int | None = None) -> int:
    """Unlink all segments of ``owner_pid`` (only of ``call_id`` if given).

    Returns how many were removed.
    """
    prefix = f"{PREFIX}-{int(owner_pid)}-"
    if call_id is not None:
        prefix += f"{int(call_id)}-"
    return _unlink_names(n for n in _list_names() if n.startswith(prefix))


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def sweep_stale() -> int:
    """Unlink ``tilecomm-<pid>-*`` segments whose owner process no longer exists.

    Returns how many were removed.  Pids are only meaningful within one pid
    namespace: do not share ``/dev/shm`` between containers that run
    tilecomm concurrently.
    """
    stale = []
    alive: dict[int, bool] = {}
    for n in _list_names():
        field = n[len(PREFIX) + 1:].split("-", 1)[0]
        if not field.isdigit():
            continue
        pid = int(field)
        if pid not in alive:
            alive[pid] = _pid_alive(pid)
        if not alive[pid]:
            stale.append(n)
    return _unlink_names(stale)
