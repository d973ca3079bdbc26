"""Settings for every environment; each deployment-specific value comes from the environment.

See README "Configuration" for the variables. Nothing here may assume a single process: the
state lives in the database and the broker.
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

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
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_htmx",
    "annotation",
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
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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
    # A health check is one more round trip at the start of every request; without it a
    # connection that the server dropped fails one request, and the next one reconnects.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = env_bool("CONN_HEALTH_CHECKS", False)
    # Parameters bound on the server, and each statement prepared once a connection has run it
    # a few times: PostgreSQL then plans a judging answer's statements once per connection, not
    # on every request (about 40 % of its CPU per answer). A pooler that cannot keep prepared
    # statements (PgBouncer before 1.21 in transaction mode) needs DB_PREPARED_STATEMENTS=0.
    if env_bool("DB_PREPARED_STATEMENTS", True):
        DATABASES["default"]["OPTIONS"].update(server_side_binding=True, prepare_threshold=5)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Every request reads the session and its user: a signed cookie and Django's own read of the user
# row, rather than two queries. A signed cookie cannot be revoked on the server: logging out
# forgets it in the browser, and changing the password invalidates every copy (the session holds
# a hash of it). SESSION_STORE=db keeps sessions in the database instead.
_SESSION_STORES = {
    "signed_cookies": "django.contrib.sessions.backends.signed_cookies",
    "db": "django.contrib.sessions.backends.db",
}
_session_store = env_str("SESSION_STORE", "signed_cookies")
if _session_store not in _SESSION_STORES:
    raise ImproperlyConfigured(f"SESSION_STORE={_session_store!r}: use signed_cookies or db")
SESSION_ENGINE = _SESSION_STORES[_session_store]
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE", 7 * 24 * 3600, minimum=60)
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
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

# Uploaded logs wait here until a worker has ingested them (then they are deleted): web and
# workers must share this directory (a volume in docker/compose.yaml).
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(BASE_DIR / "media")))
LOG_UPLOAD_MAX_BYTES = env_int("LOG_UPLOAD_MAX_BYTES", 20 * 1024**3, minimum=1)

# Uploads: run and corpus files can be large; they are streamed to a temporary file.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024

SECURE_COOKIES = env_bool("SECURE_COOKIES", False)
SESSION_COOKIE_SECURE = SECURE_COOKIES
CSRF_COOKIE_SECURE = SECURE_COOKIES
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Celery: without a broker every task runs eagerly, in-process, so the app works with no set-up.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or None
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True  # a task killed mid-way is redelivered; tasks are idempotent
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or None

# The LLM judge (unused until it lands): any OpenAI-compatible endpoint.
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL") or None
OPENAI_API_KEY = env_str("OPENAI_API_KEY") or None

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
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
    "loggers": {"bm25s": {"level": "WARNING"}},
}
