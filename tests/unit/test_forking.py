"""Forking children: a child keeps stdio, its own pipe and the descriptors it
is told to keep; every other inherited descriptor reads as /dev/null."""
import os

import pytest

from tilecomm.runtime.controller import forking


def _child_report(keep_fds, probe_fds):
    """Fork one child that reports, for each probe descriptor, what it points at."""

    def body(conn):
        conn.send({fd: os.readlink(f"/proc/self/fd/{fd}") for fd in probe_fds})
        return 0

    started = []
    forking.spawn([body], started, keep=None if keep_fds is None else [keep_fds])
    (pid, conn), = started
    try:
        report = conn.recv()
    finally:
        os.waitpid(pid, 0)
        conn.close()
        forking.reaped([pid])
    return report


def test_a_child_keeps_exactly_the_descriptors_it_is_told_to_keep():
    kept_r, kept_w = os.pipe()
    other_r, other_w = os.pipe()
    try:
        links = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in (kept_w, other_w)}
        report = _child_report([kept_w], [kept_w, other_w])
        assert report[kept_w] == links[kept_w]          # the same pipe
        assert report[other_w] == "/dev/null"           # replaced, number still taken
    finally:
        for fd in (kept_r, kept_w, other_r, other_w):
            os.close(fd)


def test_without_keep_nothing_inherited_survives():
    r, w = os.pipe()
    try:
        assert _child_report(None, [r, w]) == {r: "/dev/null", w: "/dev/null"}
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("probe_limit", [forking._PROBE_LIMIT, 0],
                         ids=["probed", "listed"])
def test_a_high_numbered_descriptor_is_dropped_whether_probed_or_listed(monkeypatch,
                                                                          probe_limit):
    # a descriptor far above the others (the table grows to hold it): the
    # child finds it by probing every number below the table's size, or by
    # listing /proc/self/fd when the table is larger than it probes
    monkeypatch.setattr(forking, "_PROBE_LIMIT", probe_limit)
    r, w = os.pipe()
    high = os.dup2(w, 700, inheritable=False)
    try:
        assert _child_report(None, [r, high]) == {r: "/dev/null", high: "/dev/null"}
    finally:
        for fd in (r, w, high):
            os.close(fd)
