"""Data only: the allocator registry, the server config template and the suite profiles.

A package so that an installed mallocsweep (`pip install .`, not editable) carries these files and
finds them through importlib.resources (servers.shipped), never at a path beside a checkout.
"""
