"""Croniq settings: everything comes from the environment (README, "Configuration")."""

from pathlib import Path

import django

from core.framework_overrides import stock_from_env
from croniq_project import sso_settings
from croniq_project.database import database_from_url
from croniq_project.env import (
    check_heartbeat_fits_lease,
    env,
    envbool,
    envfloat,
    envint,
    envlist,
    envnetworks,
    envproxyheader,
    envurl,
)
from croniq_project.middleware_list import middleware_setting
from croniq_project.pooling import listen_database, pooler_safe

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = envbool("DEBUG", False)
SECRET_KEY = env("SECRET_KEY")
# Only the web server signs anything (sessions, CSRF): it refuses to start
# without a key when DEBUG is off (croniq_project.startup). Management
# commands such as apply, next_runs and scheduler_loop need none.
SECRET_KEY_MISSING = not SECRET_KEY and not DEBUG
if not SECRET_KEY:
    SECRET_KEY = "croniq-insecure-development-key" if DEBUG else "croniq-no-key-configured"
# Earlier keys, still accepted for what they signed while SECRET_KEY is
# rotated: sessions, and jobs' webhook URLs (scheduler.jobs.webhooks).
SECRET_KEY_FALLBACKS = envlist("SECRET_KEY_FALLBACKS", [])

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Sign-in (croniq_project/sign_in.py): allauth's login with its failed-login
    # rate limit, two-factor (TOTP and recovery codes), and the social accounts
    # single sign-on signs in with.
    "allauth",
    "allauth.account",
    "allauth.mfa",
    "allauth.socialaccount",
    # Single sign-on's provider (croniq_project/sso.py): offered only when
    # CRONIQ_OIDC_ISSUER configures it.
    "allauth.socialaccount.providers.openid_connect",
    "django_prometheus",
    # Its templates and static files: /api/docs renders Swagger UI from
    # Croniq's own static files, not from a CDN (works offline).
    "ninja",
    "core",
    "projects",
    "audit",
    "calendars",
    "scheduler",
    "runners",
    "dispatch",
    "notifications",
    "checks",
    "vault",
    "control",
    "dashboard",
    # Last: its admin.py fits allauth's admins (registered above) to Croniq.
    "croniq_project",
]

# Croniq's overrides of Django's own machinery that make way for Django's
# (core/framework_overrides.py): `all`, or names such as `asgi_handler,middleware`.
CRONIQ_STOCK_DJANGO = stock_from_env(env("CRONIQ_STOCK_DJANGO"))

# Croniq's async-capable subclasses of Django's middleware: this list tells
# Django's deploy checks (security.W001-W003 and the warnings they gate) that
# they are installed. With the `middleware` override off, Django's own.
MIDDLEWARE = middleware_setting(
    [
        "croniq_project.middleware.MetricsBeforeMiddleware",
        "croniq_project.middleware.SecurityHeadersMiddleware",
        "croniq_project.middleware.StaticFilesMiddleware",
        "croniq_project.middleware.BrowserSessionMiddleware",
        "croniq_project.middleware.CommonRequestMiddleware",
        "croniq_project.middleware.ApiErrorsMiddleware",
        "croniq_project.middleware.BrowserCsrfMiddleware",
        "croniq_project.middleware.BrowserAuthenticationMiddleware",
        "croniq_project.middleware.BrowserMessageMiddleware",
        # allauth's request context and its redirects (reauthentication).
        "allauth.account.middleware.AccountMiddleware",
        # CRONIQ_REQUIRE_2FA: staff without an authenticator enrol first.
        "croniq_project.two_factor.EnrolmentRequiredMiddleware",
        # A two-factor secret no key decrypts: a page saying so, not a 500.
        "croniq_project.sign_in.UnreadableSecretMiddleware",
        "croniq_project.middleware.FrameOptionsMiddleware",
        "croniq_project.middleware.MetricsAfterMiddleware",
    ],
    CRONIQ_STOCK_DJANGO,
)

ROOT_URLCONF = "croniq_project.urls"

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

ASGI_APPLICATION = "croniq_project.asgi.application"
WSGI_APPLICATION = "croniq_project.wsgi.application"

# Not kept as a setting of its own: Django prints settings (diffsettings, the
# DEBUG error page) and would show the password in the URL.
DATABASES = {
    "default": pooler_safe(
        database_from_url(env("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'croniq.sqlite3'}")
    )
}
# The direct connection each process LISTENs on when DATABASE_URL goes through
# a transaction-mode pooler (croniq_project/pooling.py); None: DATABASE_URL's.
CRONIQ_LISTEN_DATABASE = listen_database(env("CRONIQ_LISTEN_DATABASE_URL"), DATABASES["default"])
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
# Shown dates carry their timezone (croniq_project/formats/en/formats.py).
FORMAT_MODULE_PATH = ["croniq_project.formats"]

STATIC_URL = "static/"
# Only needed after `collectstatic` (the Docker image runs it); without it the
# files are served straight from the installed apps (WHITENOISE_USE_FINDERS).
STATIC_ROOT = env("STATIC_ROOT") or None
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve the admin's static files straight from the installed apps, so
# `make run` needs no collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Sign-in (docs/design.md §11): the dashboard and the admin both send people
# to allauth's login (croniq_project/sign_in.py), which asks a user with an
# authenticator for a code before they are signed in.
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "/"
# Django's own backend alone: usernames match as they always did (exactly).
# Global permissions (superusers, the global groups), then the roles held
# per project (projects.backends, docs/design.md §11).
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "projects.backends.ProjectRoleBackend",
]
ACCOUNT_ADAPTER = "croniq_project.sign_in.AccountAdapter"
ACCOUNT_FORMS = {"login": "croniq_project.sign_in.LoginForm"}
ACCOUNT_LOGIN_METHODS = {"username"}
# No sign-up: users are made by admins (the adapter closes it too).
ACCOUNT_SIGNUP_FIELDS = ["username*", "password1*"]
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_EMAIL_NOTIFICATIONS = False
# A session lasts SESSION_COOKIE_AGE, as the admin's login made it: no box.
ACCOUNT_SESSION_REMEMBER = True
ACCOUNT_LOGOUT_REDIRECT_URL = "/accounts/login/"
# Changing two-factor asks for the password (or a code) again when the
# sign-in is older than 5 minutes; never for a code sent by email.
ACCOUNT_REAUTHENTICATION_METHODS = ("password", "mfa")
# Failed sign-ins (a wrong password, or a wrong two-factor code): at most 10 a
# minute from one address and 5 in 5 minutes for one username (one user's
# codes); then the login is refused, even with the right password, until the
# window has passed. Counted in the cache: per web process.
ACCOUNT_RATE_LIMITS = {"login": "30/m/ip", "login_failed": "10/m/ip,5/5m/key"}
MFA_ADAPTER = "croniq_project.sign_in.MFAAdapter"
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
MFA_TOTP_ISSUER = "Croniq"
# One 30-second step either side of now: a phone's clock drifts, and a code
# typed at the end of its step still counts. Each code is accepted once.
MFA_TOTP_TOLERANCE = 1
# Users are made by admins and sign in by username: their email is not theirs
# to verify here, and does not stand in the way of a second factor.
MFA_ALLOW_UNVERIFIED_EMAIL = True
# Every staff user without an authenticator (and not signed in through single
# sign-on) enrols at their next page (croniq_project/two_factor.py).
CRONIQ_REQUIRE_2FA = envbool("CRONIQ_REQUIRE_2FA", False)

# Single sign-on through an OpenID provider (croniq_project/sso.py): the
# authorization code flow with PKCE, configured from these settings alone.
# Unset CRONIQ_OIDC_ISSUER: no provider, no SSO button.
CRONIQ_OIDC_ISSUER = (env("CRONIQ_OIDC_ISSUER") or "").strip() or None
CRONIQ_OIDC_CLIENT_ID = (env("CRONIQ_OIDC_CLIENT_ID") or "").strip() or None
# Or CRONIQ_OIDC_CLIENT_SECRET_FILE. Hidden from the DEBUG page like every
# setting named *SECRET* (and the provider's copy under its `secret` key).
CRONIQ_OIDC_CLIENT_SECRET = env("CRONIQ_OIDC_CLIENT_SECRET") or None
# The claim listing the user's roles: `croniq:<project>:<role>` and `croniq:admin`.
CRONIQ_OIDC_ROLES_CLAIM = (env("CRONIQ_OIDC_ROLES_CLAIM") or "").strip() or "groups"
# Password sign-in for superusers alone (their break-glass); everyone else SSO.
CRONIQ_OIDC_ONLY = envbool("CRONIQ_OIDC_ONLY", False)
SOCIALACCOUNT_PROVIDERS = sso_settings.providers(
    sso_settings.OIDC(
        issuer=CRONIQ_OIDC_ISSUER,
        client_id=CRONIQ_OIDC_CLIENT_ID,
        client_secret=CRONIQ_OIDC_CLIENT_SECRET,
        roles_claim=CRONIQ_OIDC_ROLES_CLAIM,
        only=CRONIQ_OIDC_ONLY,
    )
)
SOCIALACCOUNT_ADAPTER = "croniq_project.sso.SocialAccountAdapter"
# Users are made at their first SSO login, never through a sign-up form.
SOCIALACCOUNT_AUTO_SIGNUP = True
# Never sign into a local account because the provider names its email:
# a provider's email is not proof of owning the Croniq account.
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
SOCIALACCOUNT_EMAIL_AUTHENTICATION_AUTO_CONNECT = False
# Starting a sign-in takes a POST (the login page's button): a link or an
# image elsewhere cannot send a browser through the provider.
SOCIALACCOUNT_LOGIN_ON_GET = False
# The provider's tokens are used once, at login, and not kept.
SOCIALACCOUNT_STORE_TOKENS = False

# HTTPS behind a TLS-terminating proxy (README, "Running in production").
# Off by default so plain-HTTP installs (make run, a first compose) work.
SECURE_PROXY_SSL_HEADER = envproxyheader("SECURE_PROXY_SSL_HEADER")
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", False)
# Only browsers are redirected: probes, Prometheus and runners inside the
# network talk plain HTTP to the web process, and a redirected runner POST
# would fail without protecting anything (the token was already sent).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$", r"^api/"]
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

# Croniq's own knobs (README, "Configuration").
CRONIQ_LEASE_TTL = envfloat("CRONIQ_LEASE_TTL", 30.0, minimum=1)
CRONIQ_HEARTBEAT_INTERVAL = envfloat("CRONIQ_HEARTBEAT_INTERVAL", 10.0, minimum=0.1)
# Every process refuses to start when a healthy runner's leases could expire
# between two of its heartbeats.
check_heartbeat_fits_lease(CRONIQ_HEARTBEAT_INTERVAL, CRONIQ_LEASE_TTL)
CRONIQ_TICK_INTERVAL = envfloat("CRONIQ_TICK_INTERVAL", 1.0, minimum=0.01)
CRONIQ_FLAP_THRESHOLD = envint("CRONIQ_FLAP_THRESHOLD", 5, minimum=1)
CRONIQ_FLAP_WINDOW = envfloat("CRONIQ_FLAP_WINDOW", 600.0, minimum=1)
CRONIQ_LOG_LIMIT = envint("CRONIQ_LOG_LIMIT", 1024 * 1024, minimum=1024)
CRONIQ_LOG_CHUNK_LIMIT = 64 * 1024
CRONIQ_LOST_RETRIES = envint("CRONIQ_LOST_RETRIES", 3, minimum=0)
CRONIQ_RUNNER_RETENTION = envfloat("CRONIQ_RUNNER_RETENTION", 7 * 24 * 3600.0, minimum=60)
CRONIQ_AUDIT_RETENTION_DAYS = envint("CRONIQ_AUDIT_RETENTION_DAYS", 90, minimum=1)
CRONIQ_EXECUTION_RETENTION_DAYS = envint("CRONIQ_EXECUTION_RETENTION_DAYS", 90, minimum=1)
CRONIQ_LOG_RETENTION_DAYS = envint("CRONIQ_LOG_RETENTION_DAYS", 30, minimum=1)
CRONIQ_HORIZON_YEARS = envint("CRONIQ_HORIZON_YEARS", 5, minimum=1)
CRONIQ_TIMEOUT_GRACE = envfloat("CRONIQ_TIMEOUT_GRACE", 30.0, minimum=0)
CRONIQ_MISFIRE_GRACE = envfloat("CRONIQ_MISFIRE_GRACE", 60.0, minimum=0)
CRONIQ_RUN_ALL_CAP = envint("CRONIQ_RUN_ALL_CAP", 100, minimum=1)
# A manual trigger is refused (429) while its job has this many pending runs.
CRONIQ_TRIGGER_QUEUE_LIMIT = envint("CRONIQ_TRIGGER_QUEUE_LIMIT", 100, minimum=1)
# The most instants one backfill call may create.
CRONIQ_BACKFILL_CAP = envint("CRONIQ_BACKFILL_CAP", 1000, minimum=1)
# Seconds past its instant after which a dead letter's replay needs `force`.
CRONIQ_REPLAY_MAX_AGE = envfloat("CRONIQ_REPLAY_MAX_AGE", 7 * 24 * 3600.0, minimum=0)
# /metrics asks for `Authorization: Bearer <token>` when set.
CRONIQ_METRICS_TOKEN = env("CRONIQ_METRICS_TOKEN") or None
# Executions' spans go to this OTLP/HTTP collector (core/tracing.py, the
# extra `tracing`); unset, nothing is exported.
CRONIQ_OTLP_ENDPOINT = envurl("CRONIQ_OTLP_ENDPOINT")

# Check-ins (docs/design.md §12). A ping token may send CRONIQ_PING_LIMIT
# pings per CRONIQ_PING_WINDOW seconds before it is answered 429: a job pings
# twice a run, so 60 a minute lets one run every two seconds.
CRONIQ_PING_LIMIT = envint("CRONIQ_PING_LIMIT", 60, minimum=1)
CRONIQ_PING_WINDOW = envint("CRONIQ_PING_WINDOW", 60, minimum=1)
# Each check keeps its last this many pings (the older are pruned by the loop).
CRONIQ_CHECK_PINGS_KEPT = envint("CRONIQ_CHECK_PINGS_KEPT", 100, minimum=1)

# Notifications (docs/design.md §9, README "Notifications").
# The dashboard's address as operators reach it: links in notifications.
CRONIQ_PUBLIC_URL = (env("CRONIQ_PUBLIC_URL") or "http://localhost:8000").rstrip("/")
# A notification that keeps failing is retried with backoff for this long.
CRONIQ_NOTIFY_GIVE_UP = envfloat("CRONIQ_NOTIFY_GIVE_UP", 24 * 3600.0, minimum=1)
# Deliveries run at once, in the notifier's own threads.
CRONIQ_NOTIFY_WORKERS = envint("CRONIQ_NOTIFY_WORKERS", 8, minimum=1)
# Webhook and chat channels never connect to private, loopback or link-local
# addresses (checked on the address connected to), except in these networks:
# internal receivers, e.g. "10.20.0.0/16, fd00::/8".
CRONIQ_NOTIFY_ALLOW_NETS = envnetworks("CRONIQ_NOTIFY_ALLOW_NETS")
# Channels' `file:` references read only files under this directory.
CRONIQ_SECRETS_DIR = env("CRONIQ_SECRETS_DIR") or "/run/secrets"
# The secrets store's Fernet keys, comma-separated (or in
# CRONIQ_SECRETS_KEYS_FILE): the first encrypts, all decrypt (vault.crypto).
CRONIQ_SECRETS_KEYS = envlist("CRONIQ_SECRETS_KEYS", [])
# Many failures on one runner pool or runner within this window become one
# incident.grouped notification once more than CRONIQ_INCIDENT_THRESHOLD.
CRONIQ_INCIDENT_WINDOW = envfloat("CRONIQ_INCIDENT_WINDOW", 300.0, minimum=1)
CRONIQ_INCIDENT_THRESHOLD = envint("CRONIQ_INCIDENT_THRESHOLD", 3, minimum=1)
# Default graces and factors; a rule may set its own.
CRONIQ_MISSED_GRACE = envfloat("CRONIQ_MISSED_GRACE", 300.0, minimum=1)
CRONIQ_UNSERVED_GRACE = envfloat("CRONIQ_UNSERVED_GRACE", 300.0, minimum=1)
CRONIQ_STALL_GRACE = envfloat("CRONIQ_STALL_GRACE", 60.0, minimum=1)
CRONIQ_SLOW_FACTOR = envfloat("CRONIQ_SLOW_FACTOR", 3.0, minimum=1)
CRONIQ_SLOW_MIN_HISTORY = envint("CRONIQ_SLOW_MIN_HISTORY", 5, minimum=1)
# When daily digests go out, HH:MM in TIME_ZONE.
CRONIQ_DIGEST_AT = env("CRONIQ_DIGEST_AT", "08:00")

# The email channel: Django's email settings, from the environment. Django
# 6.1 reads them from MAILERS (its EMAIL_* settings are deprecated there),
# earlier releases from EMAIL_*; core/mail.py reads either.
_email_backend = env("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
_email_server = {
    "host": env("EMAIL_HOST", "localhost"),
    "port": envint("EMAIL_PORT", 25, minimum=1),
    "username": env("EMAIL_HOST_USER", ""),
    "password": env("EMAIL_HOST_PASSWORD", ""),
    "use_tls": envbool("EMAIL_USE_TLS", False),
    "use_ssl": envbool("EMAIL_USE_SSL", False),
    "timeout": envfloat("EMAIL_TIMEOUT", 10.0, minimum=1),
}
if django.VERSION >= (6, 1):
    # Only the SMTP backend takes a server's options; others refuse them.
    MAILERS = {
        "default": {
            "BACKEND": _email_backend,
            "OPTIONS": _email_server if _email_backend.endswith(".smtp.EmailBackend") else {},
        }
    }
else:
    EMAIL_BACKEND = _email_backend
    EMAIL_HOST, EMAIL_PORT = _email_server["host"], _email_server["port"]
    EMAIL_HOST_USER, EMAIL_HOST_PASSWORD = _email_server["username"], _email_server["password"]
    EMAIL_USE_TLS, EMAIL_USE_SSL = _email_server["use_tls"], _email_server["use_ssl"]
    EMAIL_TIMEOUT = _email_server["timeout"]
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "croniq@localhost")
# Events, notifications and their delivery log are kept this long.
CRONIQ_NOTIFICATION_RETENTION_DAYS = envint("CRONIQ_NOTIFICATION_RETENTION_DAYS", 30, minimum=1)

# Each web process watches the scheduler's heartbeat and reports a stall
# (scheduler.stalled, notifications.stall_watch); the test suite turns it off
# but where a test starts it.
CRONIQ_STALL_WATCH = envbool("CRONIQ_STALL_WATCH", True)
# Whether scheduler_loop (and serve) runs the notifier beside it. Off, that
# loop fires and reaps but delivers nothing (another loop must).
CRONIQ_NOTIFIER = envbool("CRONIQ_NOTIFIER", True)
