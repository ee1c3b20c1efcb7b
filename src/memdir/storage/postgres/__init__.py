"""The PostgreSQL backend of the Store protocol (storage/base.py): team memory, many
machines on one database, one schema per scope (W1). `open_store` imports store.py only
when a database URL is configured; psycopg (~100-250 ms to import) is never loaded on a
SQLite path. url.py is light: settings and doctor read it without the driver.
"""
