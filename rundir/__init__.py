"""The run directory: its format, records, migrations, reader and writer.

Writers (suites/, collectors/, servers/) and readers (analysis/) import this package; none of them
owns it, and it imports nothing of theirs. Modules:
  format      file names, FORMAT_VERSION and its history, column sets, shared vocabulary
  records     typed records of manifest.json (top level, figures' meaning, one cell)
  migrations  format N -> N+1 upgrades of a run read from disk (update_to_2, ...)
  read        load_run(): a run directory, upgraded, as a `Run`
  write       RunDir: creating and filling a run directory (cells, manifest, results.csv)
  atomic      atomic_write(): the one way a result, manifest, report or record is written
"""
