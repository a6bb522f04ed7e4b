"""The command line: `mallocsweep` (main.py: one place turns errors into exit codes and one-line
messages) and one module per subcommand (commands/)."""
