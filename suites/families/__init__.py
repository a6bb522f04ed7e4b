"""The server family plugins (suites/families/registry.py registers them), one folder each: the
MySQL family (MariaDB/MySQL/Percona) in mysql/, MongoDB in mongodb/. What a family declares is
base.py, what its driver declares driver.py."""
