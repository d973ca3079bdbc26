#!/bin/sh
# Entry point of the Assay image.
#
#   web          apply migrations, then serve the site with gunicorn (the default)
#   worker       run a Celery worker
#   demo         apply migrations, load the demo project (prints its logins), then serve
#   healthcheck  exit 0 if the web process answers on 127.0.0.1:$PORT
#   anything else is run as given, e.g. `python manage.py createsuperuser`
#
# Extra arguments after web, worker or demo go to gunicorn or Celery, e.g. `worker --concurrency=2`.
# Tunables: PORT (8000), WEB_CONCURRENCY (3 gunicorn workers), GUNICORN_THREADS (4 per worker),
# GUNICORN_KEEPALIVE (75 seconds), GUNICORN_TIMEOUT (60 seconds), LOG_LEVEL (INFO, also read by
# the settings). The rest of gunicorn's settings are in docker/gunicorn.conf.py.
set -eu

serve() {
    exec gunicorn assay.wsgi:application \
        --bind "0.0.0.0:${PORT:-8000}" \
        --workers "${WEB_CONCURRENCY:-3}" \
        --timeout "${GUNICORN_TIMEOUT:-60}" \
        --config /app/docker/gunicorn.conf.py \
        --worker-tmp-dir /dev/shm \
        --access-logfile - \
        --error-logfile - \
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
    worker)
        exec celery -A assay worker --loglevel="${LOG_LEVEL:-INFO}" "$@"
        ;;
    demo)
        python manage.py migrate --noinput
        python manage.py load_demo
        serve "$@"
        ;;
    healthcheck)
        exec python - "${PORT:-8000}" <<'PY'
import sys
import urllib.error
import urllib.request

url = f"http://127.0.0.1:{sys.argv[1]}/healthz"
try:
    urllib.request.urlopen(url, timeout=4)
except urllib.error.HTTPError as error:
    sys.exit(f"{url}: HTTP {error.code}" if error.code >= 500 else 0)
except OSError as error:
    sys.exit(f"{url}: {error}")
PY
        ;;
    *)
        exec "$command" "$@"
        ;;
esac
