"""Push-mode exchange with remote_store, then a notify/wait handshake.

Where remote_load pulls from a peer, remote_store pushes into a peer's window,
so the receiver only ever reads its own memory.  Each rank:
  * pld.tile.remote_store: pushes its tile into row my_rank of every rank's
    `inbox` window (rank r owns row r everywhere, so no two ranks write the
    same bytes; pushing to itself is allowed too),
  * pld.tensor.remote_store: pushes a computed tensor value, 2 * x, into its
    right neighbour's `ring` window (no tile needed at tensor level),
  * atomic=pld.AtomicType.Add: adds its tile into the single shared `total`
    row of every rank; many writers hit the same cells, so plain stores would
    lose updates, while atomic adds all land (sum = allreduce by push).
Then the order is push -> notify -> wait -> read own window: remote_store has no
synchronisation of its own, so the notify after the pushes is what tells a peer
"my data has landed", and a rank may only read its window after every pusher's
notify has arrived.
Run: python examples/remote_store_exchange.py --ranks 3
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 8
NR = pl.dynamic("NR")
Vec = pl.Tensor[[1, SIZE], pl.FP32]
Win = pld.DistributedTensor[[1, SIZE], pl.FP32]


@pl.jit.incore
def push_kernel(x: Vec, got_inbox: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]],
                got_ring: pl.Out[Vec], got_total: pl.Out[Vec],
                inbox: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
                ring: pl.InOut[Win], total: pl.InOut[Win],
                signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(inbox)
    my_rank = pld.rank(ctx)
    nranks = pld.nranks(ctx)
    t = pl.load(x, [0, 0], [1, SIZE])
    for peer in pl.range(nranks):
        pld.tile.remote_store(t, inbox, peer=peer, offsets=[my_rank, 0])
        pld.tile.remote_store(t, total, peer=peer, offsets=[0, 0], atomic=pld.AtomicType.Add)
    pld.tensor.remote_store(pl.mul(x, 2.0), ring, peer=(my_rank + 1) % nranks, offsets=[0, 0])
    # pushes done: now say so to every peer, then wait until every peer said so
    for peer in pl.range(nranks):
        if peer != my_rank:
            pld.system.notify(signal, peer=peer, offsets=[my_rank, 0], value=1,
                              op=pld.NotifyOp.AtomicAdd)
    for src in pl.range(nranks):
        if src != my_rank:
            pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
    # everything addressed to this rank is in its own window now.  Tile shapes
    # must be compile-time: NR is bound from the host arguments when the program
    # is specialised, so it can size a tile; the runtime scalar nranks cannot.
    got_inbox = pl.store(pl.load(inbox, [0, 0], [NR, SIZE]), [0, 0], got_inbox)
    got_ring = pl.store(pl.load(ring, [0, 0], [1, SIZE]), [0, 0], got_ring)
    got_total = pl.store(pl.load(total, [0, 0], [1, SIZE]), [0, 0], got_total)
    return got_inbox


@pl.jit
def chip(x: Vec, got_inbox: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]], got_ring: pl.Out[Vec],
         got_total: pl.Out[Vec], inbox: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
         ring: pl.InOut[Win], total: pl.InOut[Win],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return push_kernel(x, got_inbox, got_ring, got_total, inbox, ring, total, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32],
         inboxes: pl.Out[pl.Tensor[[NR, NR, SIZE], pl.FP32]],
         rings: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
         totals: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
    inbox_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
    ring_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    total_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], inboxes[r], rings[r], totals[r],
             pld.window(inbox_buf, [NR, SIZE], dtype=pl.FP32),
             pld.window(ring_buf, [1, SIZE], dtype=pl.FP32),
             pld.window(total_buf, [1, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return inboxes


def run(nr: int):
    rng = np.random.default_rng(5)
    # small integers: float sums are exact whatever order the atomic adds land in
    xs = rng.integers(1, 50, size=(nr, 1, SIZE)).astype(np.float32)
    inboxes = np.full((nr, nr, SIZE), np.nan, np.float32)
    rings, totals = np.full_like(xs, np.nan), np.full_like(xs, np.nan)
    main(xs, inboxes, rings, totals,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(inboxes, np.broadcast_to(xs[:, 0, :], (nr, nr, SIZE)))
    np.testing.assert_array_equal(rings, 2 * np.roll(xs, 1, axis=0))   # from left neighbour
    np.testing.assert_array_equal(totals, np.broadcast_to(xs.sum(axis=0), xs.shape))
    return totals


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    totals = run(args.ranks)
    print(f"push exchange on {args.ranks} ranks; atomic total starts {totals[0, 0, :4].tolist()}")
    print("OK")
