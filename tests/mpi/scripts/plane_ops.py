"""The RMA control plane's operations, checked against the shared-memory
control plane: run under ``mpiexec -n N`` by test_rma_control.py.  Every
process drives its own rank's side of an ``RmaControlPlane`` on the job's
communicator; process 0 replays the same operations on a
``ShmControlPlane`` of its own and compares what the controller reads from
both.  Prints ``OK <rank>`` per process."""
import json
import os
import sys
import threading
import time
import traceback


from tilecomm.runtime import control as C
from tilecomm.backends.mpi.control import RmaControlPlane
from tilecomm.transport.base import WaitHooks
from tilecomm.backends.mpi.comm import check_job, require_mpi
from tilecomm.transport.segments import Segment, segment_name

THREADS, ENTRIES, BUFFER = 4, 25, 3


def record(r: int, world: int) -> C.WaitRecord:
    return C.WaitRecord(buffer=r, index=5 * r + 1, cmp=1, expected=7 + r, loc=r,
                        peer=(r + 1) % world, func=2, cols=4, ndim=2, coll=r - 1, gen=3 * r)


def area(r: int) -> bytes:
    return json.dumps({"rank": r, "cores": list(range(r + 1))}).encode()


class Hooks(WaitHooks):
    """Counts what a wait reports; gives up once the plane is aborted."""

    def __init__(self, plane, rank):
        self.plane, self.rank = plane, rank
        self.calls = {"blocked": 0, "check": 0, "unblocked": 0}

    def blocked(self):
        self.calls["blocked"] += 1
        self.plane.publish_wait(self.rank, C.WaitRecord(C.DEP_WAIT, 0, 1, 0, -1, 0, 0, 1, 1))

    def check(self, value):
        self.calls["check"] += 1
        if self.plane.aborted():
            raise TimeoutError("aborted")

    def unblocked(self):
        self.calls["unblocked"] += 1
        self.plane.set_state(self.rank, C.RUNNING)


def rank_side(plane, r: int, world: int) -> list:
    """What rank ``r`` does; returns the values its collective entries got."""
    plane.set_state(r, C.RUNNING)
    plane.publish_done(r, 10 + r)
    got, lock = [], threading.Lock()

    def enter():
        mine = [plane.enter_collective(r, BUFFER) for _ in range(ENTRIES)]
        with lock:
            got.extend(mine)

    threads = [threading.Thread(target=enter) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert plane.enter_collective(r, C.COUNTER_SLOTS + 1) == 0
    plane.write_area(r, area(r))
    plane.publish_wait(r, record(r, world))
    return got


def replay(ref, world: int) -> None:
    """The same operations, one rank after another, on the reference plane."""
    for r in range(world):
        ref.set_state(r, C.RUNNING)
        ref.publish_done(r, 10 + r)
        for _ in range(THREADS * ENTRIES):
            ref.enter_collective(r, BUFFER)
        ref.write_area(r, area(r))
        ref._gen = 0                     # each rank process counts its own blocks
        ref.publish_wait(r, record(r, world))


def controller_view(plane, world: int) -> dict:
    return {"snapshot": plane.snapshot(range(world)),
            "done": [plane.done_seq(r) for r in range(world)],
            "counts": [[plane.collective_count(r, b) for b in (BUFFER, 0, C.COUNTER_SLOTS)]
                       for r in range(world)],
            "areas": [plane.read_area(r) for r in range(world)],
            "aborted": plane.aborted()}


def main() -> None:
    MPI = require_mpi()
    comm = MPI.COMM_WORLD
    me, world = comm.Get_rank(), comm.Get_size()
    check_job(comm, world)               # as the backend does (require_mpi unlinked MPI's files)
    plane = RmaControlPlane(comm, world)
    assert plane.attach() is plane
    ref = None
    if me == 0:
        seg = Segment.create(segment_name(os.getpid(), 0, 0),
                             C.control_size(world) + plane.area_bytes * world)
        seg.unlink()                     # mapped here only: nothing to leave behind
        ref = C.ShmControlPlane(seg, world)
        plane.reset()
        ref.reset()
        assert controller_view(plane, world) == controller_view(ref, world)
        assert plane.read_area(0) is None
    comm.Barrier()

    # every rank at once: states, progress, entries from several threads, an
    # area, a published wait
    got = rank_side(plane, me, world)
    assert sorted(got) == list(range(1, THREADS * ENTRIES + 1)), sorted(got)
    comm.Barrier()
    if me == 0:
        replay(ref, world)
        view = controller_view(plane, world)
        assert view == controller_view(ref, world), (view, controller_view(ref, world))
        assert [s.state for s in view["snapshot"]] == [C.BLOCKED] * world
        try:
            plane.write_area(0, b"x" * plane.area_bytes)
        except ValueError:
            pass
        else:
            raise AssertionError("an oversized area was accepted")
    comm.Barrier()

    # a wait on a peer's progress: released by the peer once the waiter is
    # seen blocked, then one the controller aborts.  The releaser learns
    # where the waiter is from the plane itself (and, polling it, drives
    # MPI progress at the block's holder, which it is)
    waiter, releaser = world - 1, 0
    if me == waiter:
        assert plane.wait_done(releaser, 100, 50, None) is False
        comm.send(plane.snapshot([me])[0].gen, dest=releaser)   # before it blocks
        hooks = Hooks(plane, me)
        assert plane.wait_done(releaser, 100, 0, hooks) is True
        assert hooks.calls["blocked"] == 1 and hooks.calls["unblocked"] == 1, hooks.calls
        hooks = Hooks(plane, me)
        try:
            plane.wait_done(releaser, 10 ** 6, 0, hooks)
        except TimeoutError:
            pass
        else:
            raise AssertionError("an aborted wait returned")
        assert hooks.calls["unblocked"] == 1 and hooks.calls["check"] >= 1, hooks.calls
    if me == releaser:
        gen = comm.recv(source=waiter)
        for release in (lambda: plane.publish_done(releaser, 100), plane.abort):
            while True:
                status = plane.snapshot([waiter])[0]
                if status.state == C.BLOCKED and status.gen > gen:
                    break
                time.sleep(0.001)
            gen = status.gen
            assert status.wait.buffer == C.DEP_WAIT and not plane.aborted()
            time.sleep(0.05)             # a few of its sleep slices
            release()
    comm.Barrier()
    assert plane.aborted()
    comm.Barrier()

    # between runs: everything the controller clears, cleared (the
    # generations and records stay, as on shared memory)
    if me == 0:
        ref.publish_done(releaser, 100)
        ref._gen = 1                     # the waiter published two more waits
        for _ in range(2):
            ref.publish_wait(waiter, C.WaitRecord(C.DEP_WAIT, 0, 1, 0, -1, 0, 0, 1, 1))
        ref.set_state(waiter, C.RUNNING)
        ref.abort()
        plane.reset()
        ref.reset()
        view = controller_view(plane, world)
        assert view == controller_view(ref, world), (view, controller_view(ref, world))
        assert not view["aborted"] and view["done"] == [0] * world
        assert [c[0] for c in view["counts"]] == [0] * world
        ref.close()
    comm.Barrier()
    plane.close()
    print(f"OK {me}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        # the other processes would wait in a barrier for ever
        traceback.print_exc()
        sys.stderr.flush()
        require_mpi().COMM_WORLD.Abort(1)
