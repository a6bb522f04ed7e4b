"""Suite files' vocabulary: the base every section is built on (settings.py), the core sections
(sections.py), the one-line messages a bad value gets (errors.py). The plugins (suites/families/,
suites/workloads/) declare their sections on it; the Suite model that joins them with the plugins'
is assembled above both, in suites/suite/, so this package imports no plugin registry."""
