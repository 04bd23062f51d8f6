"""The fake GitHub's modules, composed into one request handler by ../server.py."""
