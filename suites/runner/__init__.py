"""The matrix runner: the plan (plan.py), the run (matrix.py), one cell's life (cell.py,
workload_cell.py), THP control, preflight, resume, shards and their merge, the console's view."""
