"""The DistributedWorker API: ranks kept alive across calls, handles, device
tensors, builds kept on disk."""
