"""What an iibench client process runs as its __main__: nothing.

multiprocessing "spawn" re-runs the parent's __main__ in each child before the client function;
level.py points it here so a client never re-runs the caller's script (see
_children_skip_parent_main). Keep this module free of side effects and imports.
"""
