"""The two-rank Set handshake: each rank drops a tag in its peer's cell and reads its own.

This is the smallest notify/wait protocol.  Each rank owns a one-cell INT32
window.  Rank r sends tag 2 - r to its peer 1 - r with NotifyOp.Set, then waits
until its own cell holds something >= 1 and reports what arrived.  So rank 0
receives rank 1's tag (1) and rank 1 receives rank 0's tag (2).
  * Set, not AtomicAdd: the cell has exactly one writer (the one peer), so a
    plain store is enough and the value read back is the tag itself.
  * Ge 1 works because both tags are >= 1; a tag of 0 would look exactly like
    "nothing arrived yet" and the wait would never finish.
  * notify before wait, on both ranks: if either waited first, each would wait
    for a tag the other had not sent yet, forever.
The protocol names a single peer (1 - r), so it only makes sense for 2 ranks.
Run: python examples/set_handshake.py --ranks 2
"""
import argparse
import sys

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig


@pl.jit.incore
def handshake_step(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                   signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                   peer: pl.Scalar[pl.INT32],
                   tag: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    pld.system.notify(signal, peer=peer, offsets=[0, 0], value=tag, op=pld.NotifyOp.Set)
    pld.system.wait(signal=signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    received = pl.read(signal, [0, 0])
    pl.write(out, [0, 0], received)
    return out


@pl.jit
def chip(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
         signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
         peer: pl.Scalar[pl.INT32], tag: pl.Scalar[pl.INT32]):
    return handshake_step(out, signal, peer, tag)


@pl.jit.host
def main(outputs: pl.Out[pl.Tensor[[2, 1, 1], pl.INT32]]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        # peer and tag are plain host scalars computed from the loop index
        chip(outputs[r], pld.window(buf, [1, 1], dtype=pl.INT32), 1 - r, 2 - r, device=r)
    return outputs


def run() -> np.ndarray:
    outputs = np.full((2, 1, 1), -1, np.int32)
    main(outputs, config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1])))
    # reference: rank r ends up holding the tag its peer (1 - r) sent, 2 - (1 - r)
    ranks = np.arange(2)
    tags, peers = 2 - ranks, 1 - ranks
    np.testing.assert_array_equal(outputs.reshape(2), tags[peers])
    return outputs


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    if args.ranks != 2:
        print(f"set_handshake: this protocol pairs exactly 2 ranks (each rank's peer is 1 - r); "
              f"got --ranks {args.ranks}. Run it with --ranks 2.", file=sys.stderr)
        sys.exit(2)
    outputs = run()
    print(f"handshake on 2 ranks: outputs = {outputs.reshape(2, 1).tolist()}")
    print("OK")
