"""Deferred completion: waiters that give their core back, consumers that run
once the counter arrives, and a publisher submitted after all of them.

Each rank runs W waiter tasks -- more than it has cores -- whose bodies only
register "my signal cell >= epoch" with pld.system.defer_wait and end, so
their cores are free again at once; each waiter's TaskId completes only when
the counter arrives, and a consumer task with deps=[wait_tid] then copies the
payload.  The publisher comes last in program order: it pushes its payload to
the next rank (data first), then sets that rank's signal to the epoch.  With
blocking pld.system.wait in the waiters every core would spin in a waiter and
the publisher would never get one (the deadlock report says exactly that).
  * pl.manual_scope(): only the explicit waiter -> consumer edges order these
    tasks; the publisher stays independent of the waiters although all of
    them touch the signal window.
  * The counter only grows (epoch 1, 2, 3 on one prepared worker), as
    deferred conditions compare it with >= and never reset it.
Run: python examples/deferred_completion.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

NR = pl.dynamic("NR")
N = 8
WAITERS = 6          # more than the 2 cores each rank gets below
CORES = 2


@pl.jit
def chip(inp: pl.Tensor[[1, N], pl.INT32], out: pl.Out[pl.Tensor[[WAITERS, N], pl.INT32]],
         payload: pl.InOut[pld.DistributedTensor[[1, N], pl.INT32]],
         signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]], peer: pl.Scalar[pl.INT32]):
    with pl.manual_scope():
        for slot in pl.range(WAITERS):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="deferred_wait") as wait_tid:
                epoch: pl.Scalar[pl.INT32] = pl.read(inp, [0, 0])
                pld.system.defer_wait(signal=signal, offsets=[0, 0], expected=epoch,
                                      cmp=pld.WaitCmp.Ge)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="completion_consumer",
                       deps=[wait_tid]):
                received = pl.load(payload, [0, 0], [1, N])
                out = pl.store(received, [slot, 0], out)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="delayed_publisher"):
            local_payload = pl.load(inp, [0, 0], [1, N])
            pld.tile.remote_store(local_payload, target=payload, peer=peer, offsets=[0, 0])
            epoch: pl.Scalar[pl.INT32] = pl.read(inp, [0, 0])
            pld.system.notify(target=signal, peer=peer, offsets=[0, 0], value=epoch,
                              op=pld.NotifyOp.Set)
    return out


@pl.jit.host
def main(inps: pl.Tensor[[NR, 1, N], pl.INT32],
         outs: pl.Out[pl.Tensor[[NR, WAITERS, N], pl.INT32]]):
    pbuf = pld.alloc_window_buffer([1, N], dtype=pl.INT32)
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(inps[r], outs[r], pld.window(pbuf, [1, N], dtype=pl.INT32),
             pld.window(sbuf, [1, 1], dtype=pl.INT32), (r + 1) % pld.world_size(), device=r)
    return outs


def run(nranks: int):
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nranks))),
                    cores=CORES)
    rng = np.random.default_rng(0)
    inps = rng.integers(0, 100, (nranks, 1, N)).astype(np.int32)
    outs = np.zeros((nranks, WAITERS, N), np.int32)
    with main.compile(inps, outs, config=cfg).prepare() as worker:
        for epoch in (1, 2, 3):
            inps[:, 0, 0] = epoch
            worker(inps, outs)
            # reference: every consumer of rank r saw the payload of rank r - 1
            want = np.repeat(np.roll(inps, 1, axis=0), WAITERS, axis=1)
            np.testing.assert_array_equal(outs, want)
            print(f"epoch {epoch}: {nranks} ranks x {WAITERS} waiters on {CORES} cores each, "
                  f"rank 0 received {outs[0, 0, :4].tolist()}...")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    run(ap.parse_args().ranks)
    print("OK")
