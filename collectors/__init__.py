"""What is measured while a server runs.

Imports nothing of ours but rundir (the column and source names its readings are written under,
rundir.format, and the phase derivation it shares with the reader, rundir.derive.phases), which
imports nothing of ours in turn; never suites/,
servers/ or analysis/ (tests/unit/test_import_graph.py checks the packages' direction).
"""
