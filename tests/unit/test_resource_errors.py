"""OSErrors that mean a system resource ran out become RuntimeFault TC506 with
a hint naming the resource; any other OSError is left as it is."""
import errno
import os
import resource

import pytest

from tilecomm.errors import CODES, RuntimeFault
from tilecomm.transport import segments as S


@pytest.mark.parametrize("code,words", [
    (errno.ENOSPC, "/dev/shm is full"),
    (errno.ENOMEM, "out of memory"),
    (errno.EMFILE, "ulimit -n"),
    (errno.ENFILE, "too many open files"),
    (errno.EAGAIN, "ulimit -u"),
])
def test_resource_errnos_become_typed_errors_with_a_hint(code, words):
    e = S.resource_error(OSError(code, os.strerror(code)), "cannot create shared-memory segment x")
    assert isinstance(e, RuntimeFault) and e.code == "TC506" and "TC506" in CODES
    assert e.message.startswith("cannot create shared-memory segment x: ")
    assert errno.errorcode[code] in e.message
    assert words in e.hint


@pytest.mark.parametrize("code", [errno.ENOENT, errno.EACCES, errno.EEXIST])
def test_other_errnos_are_not_resource_errors(code):
    assert S.resource_error(OSError(code, os.strerror(code)), "x") is None


def test_creating_a_segment_without_a_free_descriptor_is_typed():
    name = S.segment_name(os.getpid(), 999998, 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (3, hard))      # 0, 1, 2 only
    try:
        with pytest.raises(RuntimeFault) as ei:
            S.Segment.create(name, 4096)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert ei.value.code == "TC506" and name in str(ei.value) and "4096 bytes" in str(ei.value)
    assert isinstance(ei.value.__cause__, OSError)
    assert ei.value.__cause__.errno == errno.EMFILE
    assert not os.path.exists(os.path.join(S.SHM_DIR, name))


def test_a_missing_segment_is_still_file_not_found():
    with pytest.raises(FileNotFoundError):
        S.Segment.attach(S.segment_name(os.getpid(), 999997, 0))
