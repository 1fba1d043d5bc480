"""Checkers over what a run recorded: data races (``races.py``) from the
events of ``events.py``.  Pure analyses: nothing here imports the runtime."""
