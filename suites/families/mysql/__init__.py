"""The MySQL family (MariaDB, MySQL, Percona Server), everything of it in this folder: the plugin
(plugin.py: its [server] section and what the runner asks of it), its driver (driver.py: how
clients connect, sysbench's driver arguments, its SQL dialect), the server life (server.py), its
my.cnf (my_cnf.py, written with option_file.py), the binary and its flavor (flavor.py) and its
storage engines (engines.py). Registered in suites/families/registry.py."""
