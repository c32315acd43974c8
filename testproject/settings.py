"""A runnable project using django-alkqueue: SQLite by default, PostgreSQL with DATABASE_URL."""

import os
import tempfile
from pathlib import Path

import dj_database_url
import django

BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = "testproject-not-secret"
# DJANGO_DEBUG=0: the tests' worker subprocesses run as in production (tests/workers.py).
DEBUG = os.environ.get("DJANGO_DEBUG", "1") != "0"
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django_alkqueue.admin_site.AdminConfig",  # the Queue overview first (docs/admin.md)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_extensions",
    "django_alkqueue",
    "testproject.shop",
    "testproject.chaos",
]
if os.environ.get("ALKQUEUE_DEMO"):  # make demo: the shop's queues only, not the chaos suite's
    INSTALLED_APPS.remove("testproject.chaos")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The admin in the browser's language (Accept-Language), German included (docs/admin.md).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "testproject.urls"
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
            ]
        },
    }
]
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_url = os.environ.get("DATABASE_URL", "")
if _url:
    DATABASES = {"default": dj_database_url.parse(_url, conn_max_age=0)}
    # One test database per test run, so that two runs side by side do not drop each other's.
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
else:
    # WAL lets readers run beside the one writer; IMMEDIATE makes every transaction take the
    # write lock up front, so concurrent workers wait their turn instead of failing.
    _sqlite = os.environ.get("ALKQUEUE_SQLITE_NAME") or str(BASE_DIR / "db.sqlite3")
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _sqlite,
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
            # A file, not memory: tests run workers in threads and subprocesses.
            # One file per test run, so that two runs side by side do not share it.
            "TEST": {
                "NAME": os.path.join(tempfile.gettempdir(), f"alkqueue-test-{os.getpid()}.db")
            },
        }
    }

if django.VERSION < (6, 0):  # Django 5.2 LTS: the Tasks framework is the django-tasks backport
    INSTALLED_APPS.append("django_tasks")

TASKS = {
    "default": {
        "BACKEND": "django_alkqueue.backend.AlkQueueBackend",
        "QUEUES": ["default", "tasks-high"],
        "OPTIONS": {"max_attempts": 3, "backoff_base": 0, "lease": 30, "result_retention": 86400},
    }
}

ALKQUEUE: dict[str, object] = {}
if os.environ.get("ALKQUEUE_EVERY_SECOND"):  # used by the test of racing schedulers
    ALKQUEUE["PERIODIC"] = {"every-second": {"cron": "* * * * * *", "queue": "health",
                                             "payload": {"ping": True}}}  # fmt: skip
if os.environ.get("ALKQUEUE_BAD_CRON"):  # used by the test of the periodic system check
    ALKQUEUE["PERIODIC"] = {"nightly-broken": {"cron": "61 * * * *", "payload": {}}}
if os.environ.get("ALKQUEUE_VACUUM_DEAD_TUPLES"):  # used by the test of the leader's vacuum
    ALKQUEUE["VACUUM_DEAD_TUPLES"] = int(os.environ["ALKQUEUE_VACUUM_DEAD_TUPLES"])
if os.environ.get("ALKQUEUE_OTEL_SPANS"):  # the trace tests' workers (testproject/otel.py)
    from testproject.otel import export_spans_to

    export_spans_to(os.environ["ALKQUEUE_OTEL_SPANS"])
if os.environ.get("ALKQUEUE_LISTEN_URL"):  # used by the PgBouncer tests: LISTEN bypasses it
    DATABASES["direct"] = dj_database_url.parse(os.environ["ALKQUEUE_LISTEN_URL"])
    DATABASES["direct"]["TEST"] = {"MIRROR": "default"}
    ALKQUEUE["LISTEN_DATABASE"] = "direct"
if os.environ.get("ALKQUEUE_PREPARED_STATEMENTS") == "0":  # the PgBouncer tests, too
    ALKQUEUE["PREPARED_STATEMENTS"] = False
if os.environ.get("ALKQUEUE_NOTIFY_WINDOW"):  # used by the test of the follow-up look
    ALKQUEUE["NOTIFY_WINDOW"] = float(os.environ["ALKQUEUE_NOTIFY_WINDOW"])
if os.environ.get("ALKQUEUE_WAKEUP_DIRECTORY"):  # a worker "on another host" (local wake-ups)
    ALKQUEUE["WAKEUP_DIRECTORY"] = os.environ["ALKQUEUE_WAKEUP_DIRECTORY"]
if os.environ.get("ALKQUEUE_HEARTBEAT_INTERVAL"):  # the tests of alk_worker --health-file
    ALKQUEUE["WORKER_HEARTBEAT_INTERVAL"] = float(os.environ["ALKQUEUE_HEARTBEAT_INTERVAL"])
if os.environ.get("ALKQUEUE_RECLAIM_INTERVAL"):  # the tests of timed waits (the leader's pace)
    ALKQUEUE["RECLAIM_INTERVAL"] = float(os.environ["ALKQUEUE_RECLAIM_INTERVAL"])
if os.environ.get("ALKQUEUE_DIALECT"):  # make test-orm: the whole suite on the ORM dialect
    ALKQUEUE["DIALECT"] = os.environ["ALKQUEUE_DIALECT"]
if os.environ.get("ALKQUEUE_EXTRA_CONSUMERS"):  # used by the tests of the duplicate check
    ALKQUEUE["CONSUMER_MODULES"] = os.environ["ALKQUEUE_EXTRA_CONSUMERS"].split(",")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_alkqueue": {"handlers": ["console"], "level": "INFO"}},
}
if os.environ.get("ALKQUEUE_JSON_LOGS"):  # the test of the log fields: docs/operations.md's config
    LOGGING["formatters"] = {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        }
    }
    LOGGING["handlers"]["console"]["formatter"] = "json"  # type: ignore[index]
if os.environ.get("ALKQUEUE_TEST_NO_LOGGING"):  # a project with no LOGGING setting
    del LOGGING

# A second database, for the tests of ALKQUEUE["DATABASE"] naming an alias other than
# "default" (tests/test_tasks_results.py). pytest-django creates its test database only for
# a run that collects a test asking for it (databases=[..., "other"]).
DATABASES["other"] = {
    **DATABASES["default"],
    "OPTIONS": dict(DATABASES["default"].get("OPTIONS", {})),
}
if _url:
    DATABASES["other"]["TEST"] = {"NAME": f"{DATABASES['default']['TEST']['NAME']}_other"}
else:
    # In memory outside the tests: the system checks connect to every alias, and a second
    # alias on the same file would wait a second time for a test's write lock.
    DATABASES["other"]["NAME"] = ":memory:"
    DATABASES["other"]["TEST"] = {
        "NAME": os.path.join(tempfile.gettempdir(), f"alkqueue-test-{os.getpid()}-other.db")
    }
