"""Shared by every system's settings: the database from BENCH_DATABASE_URL, DEBUG off (no query
log), persistent connections for every system alike, warnings-only logging (no per-job lines)."""

import os

import dj_database_url

SECRET_KEY = "bench-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("BENCH_DATABASE_URL", "postgres://root@127.0.0.1:5432/bench"),
        conn_max_age=60,
    )
}
# BENCH_SYNCHRONOUS_COMMIT=off: this process's transactions do not wait for the WAL flush.
if os.environ.get("BENCH_SYNCHRONOUS_COMMIT"):
    DATABASES["default"]["OPTIONS"] = {
        "options": f"-c synchronous_commit={os.environ['BENCH_SYNCHRONOUS_COMMIT']}"
    }

# SQLite (bench/systems/alkqueue_sqlite.py): the testproject's settings (docs/databases.md,
# "SQLite"): WAL, and every transaction taking the write lock up front.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }

INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
