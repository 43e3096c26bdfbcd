"""The Django project itself: where it lives and writes, debug, apps, middleware, templates, log-in, time."""

from pathlib import Path

from .env import env_bool, env_path

BASE_DIR = Path(__file__).resolve().parents[2]

# Everything the platform writes goes under DATA_DIR (see the package docstring for who makes which folder).
DATA_DIR = env_path("DATA_DIR", BASE_DIR / "var").resolve()

DEBUG = env_bool("DEBUG", True)

INSTALLED_APPS = [
    # First: its admin/base_site.html (the site's icon on the Django admin's pages) goes before the admin's own.
    "frontend",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # intcomma: counts grouped per the page's language
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "dataplatform.accounts",
    "dataplatform.inference",
    "dataplatform.jobs",
    "dataplatform.system",
    "dataplatform.exports",
    "dataplatform.demo",
    "dataplatform.audit",
    "dataplatform.tallies",
    "annotate",
    "labeler",
    "corpora",
]

MIDDLEWARE = [
    "dataplatform.timing.server_timing_middleware",  # first: it times all the others
    "dataplatform.after_response.after_response_middleware",  # its work is not timed: the client has its answer
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # After sessions, before common: the language comes from the remembered switch (a cookie),
    # else the browser's Accept-Language, else LANGUAGE_CODE.
    "django.middleware.locale.LocaleMiddleware",
    # Before anything looks a URL value up: a NUL in the path or query is a 404/400, not a database error.
    "dataplatform.request_guard.unstorable_request_middleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "dataplatform.errors.PlatformErrorMiddleware",
]

ROOT_URLCONF = "dataplatform.urls"
WSGI_APPLICATION = "dataplatform.wsgi.application"
ASGI_APPLICATION = "dataplatform.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "project-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
# The interface languages. Each app keeps its catalog in <app>/locale/; the project layer
# (dataplatform/, frontend/) in locale/. `make` compiles them (manage.py compilemessages).
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_NAME = "dp_language"
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600  # the switch is remembered for a year
LANGUAGE_COOKIE_SAMESITE = "Lax"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
