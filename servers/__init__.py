"""How a server lives: MySQL-family and MongoDB lifecycle, allocator launch and verification."""
