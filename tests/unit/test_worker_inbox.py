"""A rank's inbox (runtime/rank/inbox.py): messages come out in order whoever read
them; a run that arrives whole is read by the main thread with no pump; a
run still arriving is drained by the pump, so the sender never stalls."""
import os
import socket
import threading
from multiprocessing.connection import Pipe

import pytest

from tilecomm.runtime import messages as M
from tilecomm.runtime.rank.inbox import Inbox


def _dispatch(seq):
    return M.Dispatch(image_key=1, fname="f", seq=seq, args=(seq,), deps=(), loc=0)


@pytest.fixture(params=[0, 2_000_000], ids=["blocking", "polling-first"])
def channel(request):
    """(the controller's end, a factory of inboxes on the rank's end), the
    inbox either blocking in its reads at once or polling first."""
    a, b = Pipe(duplex=True)
    inboxes = []

    def make():
        inboxes.append(Inbox(b, request.param))
        return inboxes[-1]
    yield a, make
    a.close()
    for inbox in inboxes:
        inbox.close()                      # the pump sees the closed channel or stops
    b.close()


def test_a_whole_run_is_read_without_a_pump(channel):
    ctl, make = channel
    inbox = make()
    for run in range(3):
        sent = [_dispatch(2 * run + 1), _dispatch(2 * run + 2), M.EndRun(True)]
        M.send(ctl, M.Batch(tuple(sent)))
        assert [inbox.next() for _ in sent] == sent
    assert inbox._turns is None, "a pump was started for runs that arrived whole"
    assert not inbox.pending()


def test_a_run_in_several_messages_comes_out_in_order(channel):
    ctl, make = channel
    inbox = make()
    parts = [[M.LoadImage(("image", 1))],
             [_dispatch(1), _dispatch(2)], [_dispatch(3)], [_dispatch(4), M.EndRun()],
             [_dispatch(5), M.EndRun()], [M.Shutdown()]]
    for part in parts:
        M.send(ctl, part[0] if len(part) == 1 else M.Batch(tuple(part)))
    want = [m for part in parts for m in part]
    assert [inbox.next() for _ in want] == want
    assert inbox._turns is not None       # the first message did not end a run


def test_the_pump_drains_a_run_larger_than_the_channel(channel):
    """The rank takes the first message of a run and then does not read (it
    is busy running it): the rest, many times what the channel buffers, is
    still written without the sender blocking."""
    ctl, make = channel
    with socket.socket(fileno=os.dup(ctl.fileno())) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    inbox = make()
    M.send(ctl, _dispatch(0))              # does not end the run: the pump takes over
    assert inbox.next() == _dispatch(0)
    rest = [M.Batch(tuple(_dispatch(i * 32 + j) for j in range(32))) for i in range(1, 200)]
    rest.append(M.EndRun())
    done = threading.Event()

    def write():
        for msg in rest:
            M.send(ctl, msg)
        done.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert done.wait(30), "the sender blocked: nothing drained the channel"
    got = [inbox.next() for _ in range(199 * 32 + 1)]
    assert got[-1] == M.EndRun() and [m.seq for m in got[:-1]] == list(range(32, 200 * 32))
    writer.join()


def test_a_closed_channel_is_disconnected(channel):
    ctl, make = channel
    inbox = make()
    ctl.close()
    assert isinstance(inbox.next(), M.Disconnected)


def test_a_message_sent_while_the_inbox_polls_is_read():
    """An idle inbox that polls before blocking neither loses nor reorders a
    run written during its window or after it (it then blocks in the read)."""
    a, b = Pipe(duplex=True)
    inbox = Inbox(b, 50_000_000)
    try:
        for delay in (0.0, 0.01, 0.1):       # inside the window, and after it
            run = [_dispatch(1), M.EndRun()]
            timer = threading.Timer(delay, M.send, (a, M.Batch(tuple(run))))
            timer.start()
            assert [inbox.next(), inbox.next()] == run
            timer.join()
    finally:
        a.close()
        b.close()


def test_an_idle_rank_polls_only_when_it_has_a_cpu_and_a_pipe(monkeypatch):
    from types import SimpleNamespace
    from tilecomm.runtime.rank import loop

    def setup(world, forked=True, spin_iters=2000):
        return SimpleNamespace(world=world, forked=forked,
                               config=SimpleNamespace(spin_iters=spin_iters))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert loop.idle_spin_ns(setup(2)) == loop.IDLE_SPIN_NS > 0
    assert loop.idle_spin_ns(setup(3)) == 0              # more ranks than CPUs
    assert loop.idle_spin_ns(setup(2, forked=False)) == 0   # an MPI process's channel
    assert loop.idle_spin_ns(setup(2, spin_iters=0)) == 0   # waits asked not to spin
