"""django-alkqueue in the suite process: the worker settings plus the admin, whose pages are
timed with 1M rows (workers run without it, like the other systems' workers)."""

from ..scale import BASELINE_ALIAS, BASELINE_SUFFIX
from .alkqueue import *  # noqa: F403
from .alkqueue import DATABASES, INSTALLED_APPS

# The claim+ack baseline (bench/scale.py): 10k pending in a database of its own, created and
# dropped by the suite. Nothing connects to it before then.
DATABASES = {
    **DATABASES,
    BASELINE_ALIAS: {
        **DATABASES["default"],
        "NAME": DATABASES["default"]["NAME"] + BASELINE_SUFFIX,
    },
}

INSTALLED_APPS = [
    "django.contrib.admin",
    *INSTALLED_APPS,
    "django.contrib.sessions",
    "django.contrib.messages",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "bench.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "static/"
