"""The MongoDB family (a user-supplied mongod), everything of it in this folder: the plugin
(plugin.py), its driver (driver.py: the wire protocol through pymongo) and the server life
(server.py). Registered in suites/families/registry.py."""
