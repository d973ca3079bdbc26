"""gunicorn settings of the web process: the image's entry point and the judging benchmark use
this file, so that what is measured is what is deployed. Command-line options override it.

Threaded workers keep each browser's connection open between requests. The judging page sends
one small request per answer, and a sync worker closes the connection after every response, so
each answer would pay for a new TCP connection (and, behind TLS, a new handshake). Threads also
let a worker serve other requests while one waits on PostgreSQL. Each thread holds its own
database connection: workers x threads connections in all, kept open for `CONN_MAX_AGE`.
"""

from __future__ import annotations

import os

wsgi_app = "assay.wsgi:application"
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
# Longer than the browser's pause between two answers, so that an annotator's connection stays
# open while they read; an idle connection costs one file descriptor, not a thread.
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "75"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
