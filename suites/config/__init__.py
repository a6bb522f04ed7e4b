"""Suite files: the settings model (suite.py), its core sections (sections.py), the base every
section is built on (settings.py), command-line options over a file (overrides.py) and the
one-line messages a bad value gets (errors.py)."""
