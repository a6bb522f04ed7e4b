"""Errors a user can act on when reading or comparing runs."""


class AnalysisError(Exception):
    """A run directory is missing, malformed, from a newer format, or not comparable."""
