"""A kernel's local tile ops on numpy (pl.load / store / arithmetic / casts /
shapes / matmul), composed into ``KernelOps``; used by the rank context and,
for the few a HOST orchestrator calls, by the controller's host runtime."""
