"""What runs inside a rank process: the rank's loop over its channel, the
rank context (pld ops), the kernel tile ops, the task scheduler."""
