"""Function kinds: where a program function runs.

A leaf module: the decorators, the front end, the op registry, the verifier
and the lowering all name kinds, so they are defined below all of them."""

HOST, ORCH, INCORE = "host", "orchestration", "incore"

KIND_NAMES = {HOST: "a HOST orchestrator (@pl.jit.host)",
              ORCH: "a chip orchestration function (@pl.jit)",
              INCORE: "an InCore kernel (@pl.jit.incore)"}

ALL_KINDS = (HOST, ORCH, INCORE)

__all__ = ["HOST", "ORCH", "INCORE", "KIND_NAMES", "ALL_KINDS"]
