#!/bin/sh
# Entry point of the Assay image.
#
#   web          apply migrations, then serve the site with granian (the default)
#   serve        serve the site without migrating (a second web replica; the judging benchmark)
#   worker       run a Celery worker
#   beat         run Celery beat: the job reaper every JOB_REAP_INTERVAL seconds (run one only)
#   demo         apply migrations, load the demo project (prints its logins), then serve
#   healthcheck  exit 0 if the web process answers on 127.0.0.1:$PORT
#   anything else is run as given, e.g. `python manage.py createsuperuser`
#
# Extra arguments after web, serve, worker or demo go to granian or Celery, e.g.
# `worker --concurrency=2`. Tunables: HOST (0.0.0.0), PORT (8000), WEB_CONCURRENCY (2 worker
# processes), WEB_THREADS (4 threads per process running Django), LOG_LEVEL (INFO, also read
# by the settings).
#
# Why granian rather than gunicorn: it parses HTTP and holds the kept-alive connections in Rust,
# off the Python interpreter, and hands each request to whichever worker thread is free. On the
# judging benchmark (docs/benchmarks.md) that gave a fifth more answers per second and half the
# 95th-percentile latency of gunicorn's threaded workers, with the same Django behind it.
set -eu

# One process per core is the default: each runs Django in its threads (one interpreter lock
# each), and the threads let a process go on while one of them waits on PostgreSQL. Each thread
# holds its own database connection: WEB_CONCURRENCY x WEB_THREADS in all. Crashed workers are
# started again; uploads stream to Django as they arrive (a search log is never held in memory).
serve() {
    exec granian assay.wsgi:application \
        --interface wsgi \
        --host "${HOST:-0.0.0.0}" \
        --port "${PORT:-8000}" \
        --workers "${WEB_CONCURRENCY:-2}" \
        --blocking-threads "${WEB_THREADS:-4}" \
        --no-ws \
        --respawn-failed-workers \
        --access-log \
        "$@"
}

if [ "$#" -eq 0 ]; then
    set -- web
fi

command="$1"
shift

case "$command" in
    web)
        python manage.py migrate --noinput
        serve "$@"
        ;;
    serve)
        serve "$@"
        ;;
    worker)
        exec celery -A assay worker --loglevel="${LOG_LEVEL:-INFO}" "$@"
        ;;
    beat)
        exec celery -A assay beat --loglevel="${LOG_LEVEL:-INFO}" \
            --schedule=/data/celerybeat-schedule "$@"
        ;;
    demo)
        python manage.py migrate --noinput
        python manage.py load_demo --address "127.0.0.1:${PORT:-8000}"
        serve "$@"
        ;;
    healthcheck)
        exec python - "${PORT:-8000}" <<'PY'
import sys
import urllib.error
import urllib.request

url = f"http://127.0.0.1:{sys.argv[1]}/healthz"
try:
    urllib.request.urlopen(url, timeout=4)  # 200 only: the app answers the probe first
except urllib.error.HTTPError as error:
    sys.exit(f"{url}: HTTP {error.code}")
except OSError as error:
    sys.exit(f"{url}: {error}")
PY
        ;;
    *)
        exec "$command" "$@"
        ;;
esac
