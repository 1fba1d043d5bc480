"""The caller's side of a call: start the ranks, share the arguments, run the
HOST orchestrator, watch the ranks, copy back, release."""
