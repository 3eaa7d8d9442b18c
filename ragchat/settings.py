"""Django settings. Everything comes from the environment (see .env.example and docs/configuration.md);
the defaults are the embedded mode: SQLite, in-memory channel layer, on-disk embedded Qdrant under
data/, local embedding model, Ollama at localhost if it runs.

References: requirement IDs (R-…): docs/requirements.md; "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from ragchat.services.config import RAGSettings, SettingsError

BASE_DIR = Path(__file__).resolve().parent.parent

# .env first, before any setting is read (the environment wins over it).
env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# A relative RAGCHAT_DATA_DIR is the project's, wherever the process starts (like QDRANT_PATH).
DATA_DIR = BASE_DIR / env.str("RAGCHAT_DATA_DIR", default="data")
(DATA_DIR / "staticfiles").mkdir(parents=True, exist_ok=True)  # SQLite and WhiteNoise want it

# Off unless asked for: `make run` turns it on explicitly for the local demo and says so.
DEBUG = env.bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env.str(
    "DJANGO_SECRET_KEY",
    default="dev-only-insecure-key-change-me" if DEBUG else environ.Env.NOTSET,
)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])
CSRF_FAILURE_VIEW = "ragchat.views.csrf_failure"  # the product's page; a sentence for htmx requests

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "django_htmx",
    "ragchat",
    "access",
    "documents",
    "chat",
    "routing",
    "api",
    "ninja",  # django-ninja: the JSON API's Swagger UI files and templates
    "django_tasks",
    "django_tasks_db",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "ragchat.middleware.RequestIdMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "ragchat.middleware.NullCharacterMiddleware",  # a NUL in a query or form value: 400 with a sentence
    "ragchat.middleware.SignInReturnMiddleware",  # an action's sign-in redirect leads back to its page
    "api.middleware.api_error_shape",  # JSON 404/405 under /api/v1/ (inside CSP and the rest)
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

ROOT_URLCONF = "ragchat.urls"
ASGI_APPLICATION = "ragchat.asgi.application"
WSGI_APPLICATION = None

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
                "routing.context_processors.routing_nav",
                "access.context_processors.access",
            ],
        },
    },
]

# Database: SQLite in WAL mode with a busy timeout and IMMEDIATE transactions (writers queue
# instead of failing with "database is locked"), or PostgreSQL via DATABASE_URL. SQLite reads the
# file through a memory map (up to 1 GiB of it: address space, shared by the connections, not
# memory taken): a page the OS holds is read without a system call, which at a million messages is
# half of the knowledge-gap report's time (docs/performance.md).
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=10000; PRAGMA foreign_keys=ON;"
                " PRAGMA mmap_size=1073741824;"
            ),
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
# Persistent connections on both engines (checked before reuse): a new SQLite connection runs the
# PRAGMAs above, a new PostgreSQL one a handshake; per query that is most of a chat turn's DB time.
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DB_CONN_MAX_AGE", default=60))
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)

AUTH_USER_MODEL = "ragchat.User"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# Channel layer: in-memory for one process, Redis when REDIS_URL is set (several processes).
REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    # No socket read timeout on the layer's connections: redis-py 8 reads with a 5 s timeout by
    # default, the same as channels_redis' blocking pop, so an idle tab's wait raced it ("Timeout
    # reading from ...") and daphne closed its socket with 1011 (redis/redis-py#4091,
    # django/channels_redis#422). A finite timeout above the pop (10 s, 30 s) left cancelled receives
    # hanging (tests' event loops did not close); None, redis-py 7's default, does not.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
                "prefix": env.str("CHANNELS_PREFIX", default="ragchat"),
            },
        }
    }
else:
    # channels' in-memory layer, its O(channels) expiry sweep run once a second instead of per message.
    CHANNEL_LAYERS = {"default": {"BACKEND": "chat.layers.ThrottledInMemoryChannelLayer"}}

# Which part of the embedded vector store this process plays (ragchat/processes.py, docs/deploying.md "Scale-out"):
# "own" (default) opens it and runs its own chat turns and ingestion; with several processes on the
# embedded store one "holder" opens it (and runs the chat turns the others hand over through Redis)
# and the "client" processes never open it. Checked at start-up.
RAGCHAT_STORE_ROLE = env.str("RAGCHAT_STORE_ROLE", default="own")

# Django's cache: the API's per-token rate limits count in it (django-ratelimit), so with several
# processes (REDIS_URL) it must be the shared Redis; one process keeps it in memory.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env.str("CHANNELS_PREFIX", default="ragchat"),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# JSON API (/api/v1/): requests per token and window (django-ratelimit's "N/s|m|h|d"), all calls
# and, on top, questions (POST chat); over it: 429 with Retry-After.
RAGCHAT_API_RATE = env.str("RAGCHAT_API_RATE", default="120/m")
RAGCHAT_API_CHAT_RATE = env.str("RAGCHAT_API_CHAT_RATE", default="20/m")

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True
# Dates and times are written one way on every page ("27 Nov 2026, 13:02"): ragchat/formats/en/formats.py.
FORMAT_MODULE_PATH = ["ragchat.formats"]

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed, compressed names once `collectstatic` has run (deployments); plain names from the
    # source folders before it (a fresh clone, the tests), so DEBUG-off needs no extra step.
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage" if DEBUG else "ragchat.storage.StaticStorage"
    },
}
WHITENOISE_USE_FINDERS = True
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(DATA_DIR / "media")))
MEDIA_URL = "/media-not-served/"  # originals are served by an access-checked view, never directly

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Email (routing/notifications.py, sent through ragchat/mail.py): the console by default; with
# EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend, the mail server below. EMAIL_USE_TLS is
# STARTTLS (usually port 587), EMAIL_USE_SSL TLS from the first byte (usually 465): one or neither.
# No AUTH while EMAIL_HOST_USER or EMAIL_HOST_PASSWORD is empty. EMAIL_TIMEOUT bounds each network
# step of a send (Django's own default is none): a mail server that accepts and never answers fails
# the send after it (logged), instead of holding the mail thread and every email queued behind it.
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="ragchat@localhost")
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
EMAIL_TIMEOUT = env.float("EMAIL_TIMEOUT", default=10.0)
if EMAIL_USE_TLS and EMAIL_USE_SSL:  # Django would refuse only when the first email is sent
    raise ImproperlyConfigured(
        "EMAIL_USE_TLS and EMAIL_USE_SSL are both true: set one, EMAIL_USE_TLS for STARTTLS (usually "
        "port 587) or EMAIL_USE_SSL for TLS from the first byte (usually port 465)"
    )
if EMAIL_TIMEOUT <= 0:  # 0 would make the mail server's socket non-blocking: every send would fail
    raise ImproperlyConfigured(f"EMAIL_TIMEOUT must be a number of seconds above 0, not {EMAIL_TIMEOUT:g}")
RAGCHAT_BASE_URL = env.str("RAGCHAT_BASE_URL", default="http://127.0.0.1:8000")
# Routing (R-ROUTE-6): an open question on the same tag at least this similar (cosine of the query
# embeddings) joins its group, and one answer reaches every asker.
ROUTING_GROUP_SIMILARITY = env.float("ROUTING_GROUP_SIMILARITY", default=0.85)
# Reminders and digests (routing/reminders.py): the admins' fallback items wait this long before a
# reminder (a tag owner's: the tag's target_hours); the daily digest goes out after this local hour.
RAGCHAT_FALLBACK_TARGET_HOURS = env.int("RAGCHAT_FALLBACK_TARGET_HOURS", default=48)
RAGCHAT_DIGEST_HOUR = env.int("RAGCHAT_DIGEST_HOUR", default=7)

# Upload limits (R-DOC-7)
RAGCHAT_MAX_UPLOAD_BYTES = env.int("RAGCHAT_MAX_UPLOAD_BYTES", default=25 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# Ingestion (documents app): "inprocess" runs it as bounded asyncio tasks inside the server process
# (embedded mode: the on-disk Qdrant can only be opened by one process); "tasks" enqueues it with
# django-tasks' database backend (django-tasks-db) for `manage.py db_worker` processes (needs QDRANT_URL,
# and REDIS_URL for live progress). See docs/ingestion.md.
# That one setting decides: django-tasks is only reached with "tasks" (documents/tasks.py), so its
# own setting does not repeat the choice; it always names the database backend the workers read.
RAGCHAT_INGEST_BACKEND = env.str("RAGCHAT_INGEST_BACKEND", default="inprocess")
RAGCHAT_INGEST_CONCURRENCY = env.int("RAGCHAT_INGEST_CONCURRENCY", default=2)
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default", "ingestion"]}}
# Workers (`manage.py ingest_worker`, documents/workers.py) beat every RAGCHAT_WORKER_HEARTBEAT_SECONDS;
# one silent for RAGCHAT_WORKER_STALE_SECONDS is dead, and the ingestion it held is resumed by the others.
RAGCHAT_WORKER_HEARTBEAT_SECONDS = env.float("RAGCHAT_WORKER_HEARTBEAT_SECONDS", default=10.0)
RAGCHAT_WORKER_STALE_SECONDS = env.float("RAGCHAT_WORKER_STALE_SECONDS", default=60.0)

# More sources (docs/ingestion.md "Websites, scanned PDFs, synced folders"). RAG_ALLOWLIST_DOMAINS,
# when set, bounds every site source's own allowlist (A4); RAG_CRAWL_START_URLS with it defines a
# site source from the environment (`manage.py crawl_site --configured --tag SLUG`); RAG_MAX_PAGES
# caps any source's page count. Fetching refuses loopback and private addresses unless
# RAGCHAT_CRAWL_ALLOW_PRIVATE (an intranet crawl, or the tests' local server).
RAG_ALLOWLIST_DOMAINS = env.list("RAG_ALLOWLIST_DOMAINS", default=[])
RAG_CRAWL_START_URLS = env.list("RAG_CRAWL_START_URLS", default=[])
RAG_MAX_PAGES = env.int("RAG_MAX_PAGES", default=500)
RAGCHAT_CRAWL_ALLOW_PRIVATE = env.bool("RAGCHAT_CRAWL_ALLOW_PRIVATE", default=False)
RAGCHAT_CRAWL_DELAY_SECONDS = env.float("RAGCHAT_CRAWL_DELAY_SECONDS", default=1.0)
RAGCHAT_CRAWL_MAX_PAGE_BYTES = env.int("RAGCHAT_CRAWL_MAX_PAGE_BYTES", default=5 * 1024 * 1024)
RAGCHAT_CRAWL_TIMEOUT_SECONDS = env.float("RAGCHAT_CRAWL_TIMEOUT_SECONDS", default=20.0)
# Synced folders checked on the schedule: "PATH=tag,tag;PATH2=tag" (manage.py sync_folder --configured).
RAGCHAT_SYNC_FOLDERS = env.str("RAGCHAT_SYNC_FOLDERS", default="")
# How often the server looks for due re-crawls, configured folders, reminders and digests (minutes; 0: never).
RAGCHAT_SCHEDULE_MINUTES = env.int("RAGCHAT_SCHEDULE_MINUTES", default=15)
# A file where every chat turn appends one JSON line of its steps' times (manage.py bench: where a
# burst's time goes); unset: nothing is written.
RAGCHAT_TURN_TIMELINE = env("RAGCHAT_TURN_TIMELINE", default="")

# Health: Ollama is optional in embedded mode (answers degrade to cited passages + routing).
RAGCHAT_REQUIRE_OLLAMA = env.bool("RAGCHAT_REQUIRE_OLLAMA", default=False)

# The RAG core's settings (spec v3 names), read from the same environment. The embedded
# Qdrant lives in the data directory unless QDRANT_PATH says otherwise.
try:
    RAG = RAGSettings.from_env()
except SettingsError as e:  # start-up stops with the sentence naming the bad variable, not a traceback
    raise ImproperlyConfigured(str(e)) from None
RAG = replace(
    RAG,
    qdrant_path=str(BASE_DIR / env.str("QDRANT_PATH"))
    if env.str("QDRANT_PATH", default="")
    else str(DATA_DIR / "qdrant"),
)

# Security (production: DJANGO_DEBUG=false; see docs/deploying.md)
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the cookie-less meta tag; keep default
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
    SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "ragchat.services.logs.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
    },
}

# ---- Access hardening (docs/access.md) ---------------------------------------------------------
# Content-Security-Policy (django-csp): every script, style, image and connection from this origin
# only; no inline script; no framing.
from csp.constants import NONE, SELF  # noqa: E402

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# Sign-in throttling (django-axes): after RAGCHAT_LOGIN_FAILURE_LIMIT failed sign-ins for one
# username from one address, that pair is locked out for RAGCHAT_LOGIN_LOCKOUT_MINUTES.
# Company sign-in (OpenID Connect, mozilla-django-oidc; docs/sign-in.md): on when an issuer and a
# client id are set. RAGCHAT_LOCAL_PASSWORDS: true (passwords too), admins (only superusers may
# use a password: the way back in when the provider fails), false (company sign-in only).
RAGCHAT_OIDC_ISSUER = env.str("RAGCHAT_OIDC_ISSUER", default="").rstrip("/")
OIDC_RP_CLIENT_ID = env.str("RAGCHAT_OIDC_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env.str("RAGCHAT_OIDC_CLIENT_SECRET", default="")
OIDC_RP_SCOPES = env.str("RAGCHAT_OIDC_SCOPES", default="openid email profile")
OIDC_RP_SIGN_ALGO = env.str("RAGCHAT_OIDC_SIGN_ALGO", default="RS256")
RAGCHAT_OIDC_GROUPS_CLAIM = env.str("RAGCHAT_OIDC_GROUPS_CLAIM", default="groups")
RAGCHAT_OIDC_USERNAME_CLAIM = env.str("RAGCHAT_OIDC_USERNAME_CLAIM", default="preferred_username")
RAGCHAT_OIDC_EMAIL_CLAIM = env.str("RAGCHAT_OIDC_EMAIL_CLAIM", default="email")
RAGCHAT_OIDC_LABEL = env.str("RAGCHAT_OIDC_LABEL", default="your company account")
RAGCHAT_OIDC_TENANT = env.str("RAGCHAT_OIDC_TENANT", default="default")
RAGCHAT_LOCAL_PASSWORDS = env.str("RAGCHAT_LOCAL_PASSWORDS", default="true").strip().lower()
OIDC_USE_PKCE = True
OIDC_TIMEOUT = 10
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc:callback"
OIDC_REDIRECT_ALLOWED_HOSTS: list[str] = []
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/"
if RAGCHAT_OIDC_ISSUER:
    # Signing out posts a form whose answer sends the browser to the provider's end_session_endpoint
    # (access.oidc.end_session_url): browsers hold a form's redirects to form-action too.
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(
        "{0.scheme}://{0.netloc}".format(urlsplit(RAGCHAT_OIDC_ISSUER))
    )

AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend"]
if RAGCHAT_LOCAL_PASSWORDS in ("admins", "admin"):
    AUTHENTICATION_BACKENDS.append("access.oidc.AdminPasswordBackend")
elif RAGCHAT_LOCAL_PASSWORDS not in ("false", "off", "no", "0"):
    AUTHENTICATION_BACKENDS.append("django.contrib.auth.backends.ModelBackend")
if RAGCHAT_OIDC_ISSUER and OIDC_RP_CLIENT_ID:
    AUTHENTICATION_BACKENDS.append("access.oidc.OIDCBackend")
AXES_FAILURE_LIMIT = env.int("RAGCHAT_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.int("RAGCHAT_LOGIN_LOCKOUT_MINUTES", default=15) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "access.views.locked_out"
AXES_VERBOSE = False
AXES_WHITELIST_CALLABLE = "access.oidc.axes_exempt"  # company sign-ins: the provider throttles them
AXES_ENABLE_ADMIN = False  # lockouts are in the tenant's audit log; `manage.py axes_reset_username` unlocks
