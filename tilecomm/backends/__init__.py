"""Backends whose ranks are not forked by the caller (one package each)."""
