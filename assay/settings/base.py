"""Settings for every environment; each deployment-specific value comes from the environment.

See README "Configuration" for the variables. Nothing here may assume a single process: the
state lives in the database and the broker.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from .env import env_bool, env_int, env_list, env_str, parse_database_url

BASE_DIR = Path(__file__).resolve().parents[2]

DEBUG = env_bool("DEBUG", False)

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    # Development only: a fixed key is harmless on 127.0.0.1 and keeps sessions across restarts.
    SECRET_KEY = "assay-development-only-not-secret"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_htmx",
    "axes",
    "accounts",
    "annotation",
    "jobs",
    "sampling",
    "pooling",
    "judging",
    "agreement",
    "evaluation",
    "demo",
]

MIDDLEWARE = [
    "assay.health.health_middleware",  # first: the probe needs no host check or HTTPS redirect
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files leave here, cacheable
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "assay.headers.no_store_middleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a sign-in it refused into the lockout answer
]

ROOT_URLCONF = "assay.urls"
WSGI_APPLICATION = "assay.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": parse_database_url(
        env_str("DATABASE_URL", "sqlite:///db.sqlite3"), base_dir=BASE_DIR
    )
}
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"]["CONN_MAX_AGE"] = env_int("CONN_MAX_AGE", 60, minimum=0)
    # A persistent connection that the server dropped (a restart, a failover, an idle timeout,
    # a terminated backend) would fail the next request that uses it with a 500. The check
    # costs one `SELECT 1` round trip, once per request and only on a reused connection.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = env_bool("CONN_HEALTH_CHECKS", True)
    # Parameters bound on the server, and each statement prepared once a connection has run it
    # a few times: PostgreSQL then plans a judging answer's statements once per connection, not
    # on every request (about 40 % of its CPU per answer). A pooler that cannot keep prepared
    # statements (PgBouncer before 1.21 in transaction mode) needs DB_PREPARED_STATEMENTS=0.
    if env_bool("DB_PREPARED_STATEMENTS", True):
        DATABASES["default"]["OPTIONS"].update(server_side_binding=True, prepare_threshold=5)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Sessions and sign-in throttling ------------------------------------------------------------
# Sessions live in the database, so that logging out ends a session on the server (a copied
# cookie stops working) and a password change ends every other session of the user (each session
# stores a hash of the password, checked on every request). Not the cache store: the cache may
# evict sessions under memory pressure, and it would be one more service the sign-in depends on.
SESSION_ENGINE = "django.contrib.sessions.backends.db"
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE", 7 * 24 * 3600, minimum=60)
# Axes first: it refuses a locked-out account or address before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed sign-ins (the login form, /api/token/, the admin) are counted per account and, apart,
# per address; either count reaching the limit refuses that account or address, with a 429, for
# LOGIN_COOLOFF_MINUTES after the last failure. A successful sign-in clears the account's count
# only (assay/throttle.py says why).
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
# A lockout lasts the cool-off from the failure that caused it, so that its end is predictable
# for the person locked out; attempts during it are refused without being counted.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_HANDLER = "assay.throttle.AccountResetHandler"
AXES_LOCKOUT_CALLABLE = "assay.throttle.lockout_response"
AXES_ENABLE_ADMIN = True  # the admin lists current failures and lockouts
# Failures are kept until their cool-off ends; successful sign-ins are not logged (a table that
# would only grow, with addresses and browsers in it).
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
# How long a one-time sign-in link (a new account's "set your password" page) works.
PASSWORD_RESET_TIMEOUT = env_int("PASSWORD_RESET_TIMEOUT", 3 * 24 * 3600, minimum=60)
# The site's address as people reach it (https://assay.example), for links printed by
# commands (`add_member --create`); pages build their links from the request.
ASSAY_BASE_URL = env_str("ASSAY_BASE_URL").rstrip("/")
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # Hashed, compressed files in production; plain files while developing so that no
        # collectstatic is needed before `runserver`.
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage",
    },
}

# While developing (and in tests) whitenoise serves straight from the source folders.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG

# Uploaded logs and runs wait here until a worker has read them (then they are deleted): web and
# workers must share this directory (a volume in docker/compose.yaml).
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(BASE_DIR / "media")))
LOG_UPLOAD_MAX_BYTES = env_int("LOG_UPLOAD_MAX_BYTES", 20 * 1024**3, minimum=1)
# Run files uploaded on the pool page, all files of one upload together: a worker holds one
# file's rows in memory at a time (about 6 bytes per byte of uncompressed run file).
RUN_UPLOAD_MAX_BYTES = env_int("RUN_UPLOAD_MAX_BYTES", 512 * 1024**2, minimum=1)
# A corpus or query file uploaded on a project's Data page (the commands have no limit).
IMPORT_UPLOAD_MAX_BYTES = env_int("IMPORT_UPLOAD_MAX_BYTES", 10 * 1024**3, minimum=1)

# Uploads: run and corpus files can be large; they are streamed to a temporary file.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024

# --- Transport and response headers -------------------------------------------------------------
SECURE_COOKIES = env_bool("SECURE_COOKIES", False)
SESSION_COOKIE_SECURE = SECURE_COOKIES
CSRF_COOKIE_SECURE = SECURE_COOKIES
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
BEHIND_TLS_PROXY = env_bool("BEHIND_TLS_PROXY", False)
if BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # The client's address for the sign-in throttle: the right-most X-Forwarded-For entry, the
    # one the proxy appended (what a client wrote in the header itself is further left and never
    # used). A chain of proxies must have the last one set the header to the client's address.
    AXES_IPWARE_META_PRECEDENCE_ORDER: tuple[str, ...] = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
    AXES_IPWARE_PROXY_ORDER = "right-most"
else:
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("REMOTE_ADDR",)
# Behind a TLS proxy, plain HTTP is redirected to HTTPS and browsers are told to stay on HTTPS
# (HSTS; sent on HTTPS answers only). The health probe answers before either (assay/health.py).
# Empty or unset: follow BEHIND_TLS_PROXY (compose passes an empty value by default).
SECURE_SSL_REDIRECT = (
    env_bool("SECURE_SSL_REDIRECT", False) if env_str("SECURE_SSL_REDIRECT") else BEHIND_TLS_PROXY
)
SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 365 * 24 * 3600 if BEHIND_TLS_PROXY else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = False
# Scripts, styles and requests from this site only; no inline script or style anywhere (the
# templates load static files; static/js/htmx-config.js turns off htmx's own inline styles).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],  # data: for the empty favicon
    "connect-src": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "object-src": [CSP.NONE],
}

# Background jobs (jobs/models.py; docs/deployment.md "Failure modes"). A running job's worker
# refreshes its heartbeat every JOB_HEARTBEAT_INTERVAL seconds; the reaper (Celery beat, every
# JOB_REAP_INTERVAL seconds) queues again a job silent for JOB_HEARTBEAT_TIMEOUT, or fails it
# once JOB_MAX_ATTEMPTS are used up, and publishes again a job queued for JOB_QUEUED_TIMEOUT.
JOB_TIME_LIMIT = env_int("JOB_TIME_LIMIT", 6 * 3600, minimum=10)
JOB_HEARTBEAT_INTERVAL = env_int("JOB_HEARTBEAT_INTERVAL", 10, minimum=1)
JOB_HEARTBEAT_TIMEOUT = env_int("JOB_HEARTBEAT_TIMEOUT", 60, minimum=2)
JOB_QUEUED_TIMEOUT = env_int("JOB_QUEUED_TIMEOUT", 900, minimum=1)
JOB_REAP_INTERVAL = env_int("JOB_REAP_INTERVAL", 30, minimum=1)
JOB_MAX_ATTEMPTS = env_int("JOB_MAX_ATTEMPTS", 3, minimum=1)
JOB_RETRY_BACKOFF = env_int("JOB_RETRY_BACKOFF", 5, minimum=0)  # seconds, doubled per attempt
# A failure a retry may cure keeps its uploaded file for the retry; left so this many days, the
# reaper discards the job and deletes the file.
JOB_KEEP_FAILED_DAYS = env_int("JOB_KEEP_FAILED_DAYS", 7, minimum=1)
# The LLM judge's wait before retrying a call (429, 5xx, timeout): LLM_BACKOFF_MS doubled per
# attempt, never more than LLM_BACKOFF_CAP seconds (a Retry-After header is capped too).
LLM_BACKOFF_MS = 1000
LLM_BACKOFF_CAP = 30
if JOB_HEARTBEAT_TIMEOUT < 2 * JOB_HEARTBEAT_INTERVAL:
    raise ImproperlyConfigured(
        "JOB_HEARTBEAT_TIMEOUT must be at least twice JOB_HEARTBEAT_INTERVAL, or live jobs "
        "would be taken for dead"
    )

# Celery: without a broker every task runs eagerly, in-process, so the app works with no set-up.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or None
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
CELERY_TASK_EAGER_PROPAGATES = True
# Acknowledged only once done, and given back when the worker process dies, so a killed job
# is delivered again; a message unacknowledged for longer than the longest job is delivered
# again too, so the visibility timeout is the job time limit with a margin (a shorter one would
# hand a live job to a second worker; the claim makes that a no-op, but it wastes a worker).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# max_retries 0: a publisher (a web request) fails at once on an unreachable broker instead of
# retrying for seconds; the worker's own connection keeps its retry loop.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": JOB_TIME_LIMIT + 300, "max_retries": 0}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A web request that publishes a job fails fast when the broker is down (no retry loop): the
# job is withdrawn and the page says so.
CELERY_BROKER_CONNECTION_TIMEOUT = env_int("CELERY_BROKER_CONNECTION_TIMEOUT", 3, minimum=1)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or None
CELERY_BEAT_SCHEDULE = {
    "reap-jobs": {"task": "jobs.tasks.jobs_reap", "schedule": float(JOB_REAP_INTERVAL)},
}

# The LLM judge (unused until it lands): any OpenAI-compatible endpoint.
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL") or None
OPENAI_API_KEY = env_str("OPENAI_API_KEY") or None

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "accounts.authentication.ApiTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # assay/api.py: JSON bodies of bounded depth, one error shape, every error in the schema.
    "DEFAULT_PARSER_CLASSES": [
        "assay.api_parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "assay.api.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "assay.api.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Assay API",
    "DESCRIPTION": "Judging, pooling and qrels of Assay projects.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Bodies are documented as JSON: a form cannot say null (a grade left out of an undo), so a
    # form is accepted as browsers send it but is not the API's contract.
    "PARSER_WHITELIST": ["assay.api_parsers.JSONParser"],
}

# Any case, as Celery's --loglevel (docker/entrypoint.sh passes it the same variable).
_log_level = env_str("LOG_LEVEL", "INFO").upper()
if _log_level not in logging.getLevelNamesMapping():
    raise ImproperlyConfigured(
        f"LOG_LEVEL={_log_level!r} is not a log level (use DEBUG, INFO, WARNING, ERROR or CRITICAL)"
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": _log_level},
    # Libraries that narrate their progress at INFO/DEBUG would drown the app's own messages.
    # Axes narrates every successful sign-in at INFO; its failures and lockouts are WARNINGs.
    "loggers": {"bm25s": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}
