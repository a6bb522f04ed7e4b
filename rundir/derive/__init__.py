"""Per-level figures derived from a cell's raw record: pure functions, no I/O.

phases.py: a phase's deltas and a measured window's deltas; window.py: where the measured window
lies and the per-operation rates over it; levels.py: a cell's results rows from its raw record.
"""
