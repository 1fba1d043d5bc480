"""The controller <-> worker wire: every message kind crosses a real pipe and
arrives equal, with its type."""
import dataclasses
from multiprocessing.connection import Pipe

import pytest

import ml_dtypes
import numpy as np

from tilecomm.errors import Span
from tilecomm.runtime import messages as M
from tilecomm.runtime.values import HostRef, WindowBuffer, WindowRef

_BUF = WindowBuffer(id=3, name="sig", nbytes=64, devices=(0, 2), segments=("seg-a", "seg-b"))

SAMPLES = [
    M.LoadImage(image=("an image", 3)),
    M.Dispatch(image_key=7, fname="chip", seq=2, args=(1, 2.5, "x", (3, 4)), deps=((1, 1),),
               loc=11),
    M.Dispatch(image_key=9, fname="step", seq=5,
               args=(WindowRef(_BUF, (4, 4), np.dtype(np.int32)),
                     HostRef("seg-h", 16, (2, 3), (24, 8), np.dtype(np.float64)),
                     WindowRef(_BUF, (8,), np.dtype(ml_dtypes.bfloat16)),
                     HostRef("seg-h", 0, (4,), (2,), np.dtype(ml_dtypes.bfloat16)),
                     HostRef("seg-r", 8, (2,), (4,), np.dtype(np.float32), 0x7F00_0000_1000),
                     ("\0w", "a tuple that only looks like a descriptor"), [1, 2], 3),
               deps=(), loc=2),
    M.EndRun(),
    M.EndRun(keep_windows=True),
    M.Batch(messages=(M.Dispatch(image_key=1, fname="f", seq=1, args=(), deps=(), loc=0),
                      M.EndRun(keep_windows=True), M.Shutdown())),
    M.Shutdown(),
    M.BeginRun(settings=("dfx_outputs", 4, 2)),
    M.Failed(rank=1, fname="chip", summary="ValueError: bad", text="Traceback ...",
             error_type="ValueError", error_code="TC503", span=Span("p.py", 4, 5, "f")),
    M.Files(root="/out/dfx_outputs", files=(("rank1/d0/deps.json", b"{}"),
                                            ("rank1/d0/args_dump/after/00_x.npy", b"\x93NUMPY"))),
]


def _message_classes():
    # Disconnected is never sent; Renumbered arrives as the dispatches it
    # stands for (tested below)
    return {c for c in vars(M).values()
            if isinstance(c, type) and dataclasses.is_dataclass(c)
            and c not in (M.Disconnected, M.Renumbered) and c.__module__ == M.__name__}


def test_samples_cover_every_message_kind():
    assert {type(m) for m in SAMPLES} == _message_classes()


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_message_crosses_a_pipe_unchanged(msg):
    a, b = Pipe(duplex=True)
    try:
        M.send(a, msg)
        got = M.receive(b)
    finally:
        a.close()
        b.close()
    assert type(got) is type(msg)
    assert got == msg


def test_a_closed_channel_is_eof():
    a, b = Pipe(duplex=True)
    a.close()
    try:
        with pytest.raises(EOFError):
            M.receive(b)
    finally:
        b.close()


def test_descriptors_arrive_with_their_element_types():
    """A window or host-tensor argument is rebuilt with a numpy dtype equal to
    the one sent, builtin or not (bfloat16 is pickled as itself)."""
    sent = SAMPLES[2]
    got = M.decode(M.encode(sent))
    for a, b in zip(sent.args, got.args):
        assert type(a) is type(b)
        if isinstance(a, (WindowRef, HostRef)):
            assert isinstance(b.dtype, np.dtype) and b.dtype == a.dtype
    assert got.args[0].buffer == _BUF and got.args[0].buffer.domain_rank(2) == 1


def test_a_window_table_decodes_equal_descriptors_to_one_object():
    """With a table kept across messages (a rank's inbox keeps one), a window
    descriptor seen before decodes to the same WindowRef, equal to the one
    sent; the table never holds more than ``WINDOW_MEMO`` descriptors."""
    sent = SAMPLES[2]
    table: dict = {}
    first = M.decode(M.encode(sent), table)
    again = M.decode(M.encode(sent), table)
    assert first == sent and again == sent
    windows = [(a, b) for a, b in zip(first.args, again.args) if isinstance(a, WindowRef)]
    assert windows and all(a is b for a, b in windows)
    for i in range(M.WINDOW_MEMO + 10):
        buf = WindowBuffer(i, f"b{i}", 4, (0,), (f"seg-{i}",))
        msg = M.Dispatch(image_key=1, fname="f", seq=i, args=(WindowRef(buf, (1,), np.dtype(np.int32)),),
                         deps=(), loc=0)
        got = M.decode(M.encode(msg), table)
        assert got == msg
        assert len(table) <= M.WINDOW_MEMO


def test_a_renumbered_body_arrives_as_its_dispatches_shifted_and_is_decoded_once():
    """A replayed run's body: each dispatch's number moved by the rank's
    shift, each dependency's by its rank's; the body decoded once per rank
    (``bodies``), whatever the shifts of later sends."""
    recorded = (SAMPLES[2],
                M.Dispatch(image_key=9, fname="after", seq=6, args=(1,), deps=((0, 4), (2, 9)),
                           loc=3))
    body = M.encode(M.Batch(recorded))
    windows, bodies = {}, {}
    for shift, deps in ((0, ((0, 0), (2, 0))), (10, ((0, 3), (2, 7))), (25, ((0, 8), (2, 14)))):
        sent = M.Batch((M.Renumbered(body, shift, deps), M.EndRun(keep_windows=True)))
        got = M.decode(M.encode(sent), windows, bodies)
        moved = dict(deps)
        want = tuple(dataclasses.replace(m, seq=m.seq + shift,
                                         deps=tuple((r, s + moved[r]) for r, s in m.deps))
                     for m in recorded)
        assert got == M.Batch(want + (M.EndRun(keep_windows=True),))
    assert list(bodies) == [body]
    # the same decoded arguments every time: decoded once, not per send
    again = M.decode(M.encode(M.Renumbered(body, 1, ((0, 1), (2, 1)))), windows, bodies)
    assert again.messages[0].args is got.messages[0].args


def test_the_frame_reader_and_send_speak_the_connections_own_framing():
    """``send`` writes what ``Connection.recv_bytes`` reads, and a
    ``FrameReader`` reads what ``Connection.send_bytes`` writes: several
    messages in one read, messages larger than a read, and one arriving in
    pieces, each equal to what was sent."""
    import os
    import threading
    a, b = Pipe(duplex=True)
    try:
        big = M.LoadImage(image=("x" * 200_000, 1))          # more than one read
        mid = M.LoadImage(image=("y" * 20_000, 2))           # sent as length, then bytes
        M.send(a, SAMPLES[1])
        assert M.decode(b.recv_bytes()) == SAMPLES[1]        # the connection reads ours
        reader = M.FrameReader(b)
        sent = (SAMPLES[1], big, SAMPLES[3], mid, SAMPLES[2])
        writer = threading.Thread(target=lambda: [a.send_bytes(M.encode(m)) for m in sent])
        writer.start()                                       # back to back
        got = [reader.receive() for _ in range(5)]
        writer.join()
        assert got == list(sent)
        assert not reader.complete()
        data = M.encode(SAMPLES[5])
        framed = len(data).to_bytes(4, "big") + data
        pieces = [framed[:2], framed[2:7], framed[7:]]      # the length itself split

        def trickle():
            for p in pieces:
                os.write(a.fileno(), p)
        t = threading.Timer(0.05, trickle)
        t.start()
        assert reader.receive() == SAMPLES[5]
        t.join()
        a.close()
        with pytest.raises(EOFError):
            reader.receive()
    finally:
        a.close()
        b.close()
