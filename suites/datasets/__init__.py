"""Datasets: prepared once per (server version, dataset spec) into a pristine cache (prepare.py,
cache.py), restored per cell, and what a killed preparation left (stale.py)."""
