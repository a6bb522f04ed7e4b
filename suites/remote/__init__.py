"""The load generator on its own host: an SSH connection, the remote host's clock and load, and
sysbench levels run there (suites.remote.clients)."""
