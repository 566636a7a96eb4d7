"""Croniq's SQLite backend: Django's, with an eager write lock (see `base`)."""
