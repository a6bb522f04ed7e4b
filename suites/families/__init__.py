"""The server family plugins (suites/families/registry.py registers them): MariaDB/MySQL/Percona in
mysql.py, MongoDB in mongodb.py, what a family declares in base.py."""
