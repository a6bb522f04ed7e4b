"""The Suite: a suite file's model assembled from the core sections (suites/config/) and the
sections and rules the registered plugins declare (suites/families/, suites/workloads/), with
its loading (model.py) and the command-line options over a file (overrides.py). It sits above
config and the plugin registries, so neither of those imports the other back."""
