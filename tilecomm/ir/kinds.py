"""Function kinds: where a program function runs.

A leaf module: the decorators, the front end, the op registry, the verifier
and the lowering all name kinds, so they are defined below all of them."""

HOST, ORCH, INCORE = "host", "orchestration", "incore"
# a HOST SubWorker: Python run by the controller, called from a HOST orchestrator
SUBWORKER = "subworker"

KIND_NAMES = {HOST: "a HOST orchestrator (@pl.jit.host)",
              ORCH: "a chip orchestration function (@pl.jit)",
              INCORE: "an InCore kernel (@pl.jit.incore)",
              SUBWORKER: "a HOST SubWorker (role=pl.Role.SubWorker)"}

ALL_KINDS = (HOST, ORCH, INCORE)

__all__ = ["HOST", "ORCH", "INCORE", "SUBWORKER", "KIND_NAMES", "ALL_KINDS"]
