"""Diagnostics: run artefacts, traces, argument dumps, deadlock and task reports."""
