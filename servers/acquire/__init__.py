"""Getting a server: which Debian release has a version and its allocators (archive.py), and a
fetched server built from it: a basedir or a minimal root (fetch.py)."""
