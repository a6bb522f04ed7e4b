"""What is measured while a server runs. Imports nothing else of ours."""
