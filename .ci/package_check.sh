#!/usr/bin/env bash
# The package as a user gets it: build the wheel, install it with no extras into a fresh venv,
# then `manage.py check`, `migrate` and a small enqueue-and-drain (the alk_worker command in
# burst mode) on SQLite; then the same with [mysql] on MariaDB (make mariadb first).
# Usage: .ci/package_check.sh PYTHON MARIADB_URL
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:-python3}
MARIADB_URL=${2:-mysql://alkqueue:alkqueue@127.0.0.1:3306/alkqueue}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Built from a copy of what the sdist ships, so the build leaves nothing in the checkout.
mkdir "$work/src"
cp -r pyproject.toml README.md LICENSE MANIFEST.in CHANGELOG.md django_alkqueue docs "$work/src"
"$PYTHON" -m pip wheel -q --no-deps --wheel-dir "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/django_alkqueue-*.whl)
# The German catalogue ships compiled (make venv compiles it; docs/admin.md, "Languages").
# The listing is read whole first: grep -q stops reading at its first match, and under pipefail
# the lister's broken pipe would fail the check.
listing=$("$PYTHON" -m zipfile -l "$wheel")
for f in django_alkqueue/locale/de/LC_MESSAGES/django.po django_alkqueue/locale/de/LC_MESSAGES/django.mo; do
  grep -q "^$f " <<<"$listing" || { echo "package check: $f is not in the wheel"; exit 1; }
done
"$PYTHON" -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q --upgrade pip
"$py" -m pip install -q "$wheel"
if "$py" -c 'import psycopg' 2>/dev/null || "$py" -c 'import psycopg2' 2>/dev/null; then
  echo "package check: a psycopg came with the wheel's plain install"; exit 1
fi

# A tiny project: the app, one consumer that counts what it ran, the queue's database.
mkdir -p "$work/site"
cat > "$work/site/pkgcheck_settings.py" <<'PY'
import os
from urllib.parse import urlsplit

SECRET_KEY = "package-check"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django_alkqueue"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ALKQUEUE = {"CONSUMER_MODULES": ["pkgcheck_consumers"]}
_url = os.environ.get("PKGCHECK_MYSQL")
if _url:
    _u = urlsplit(_url)
    DATABASES = {"default": {"ENGINE": "django.db.backends.mysql", "NAME": _u.path[1:],
                             "USER": _u.username, "PASSWORD": _u.password,
                             "HOST": _u.hostname, "PORT": _u.port or 3306}}
else:
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                             "NAME": os.path.join(os.path.dirname(__file__), "db.sqlite3"),
                             "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL;"}}}
PY
cat > "$work/site/pkgcheck_consumers.py" <<'PY'
from django_alkqueue import consumer


@consumer("pkgcheck")
def count(payload, job):
    with open(payload["file"], "a") as out:
        out.write(f"{payload['n']}\n")
PY
cat > "$work/site/pkgcheck_drain.py" <<'PY'
import os
import subprocess
import sys

import django

django.setup()
from django_alkqueue import queue  # noqa: E402

ran = os.path.join(os.path.dirname(__file__), "ran.txt")
if os.path.exists(ran):
    os.remove(ran)
queue("pkgcheck").enqueue_many([{"n": n, "file": ran} for n in range(50)])
subprocess.run([sys.executable, "-m", "django", "alk_worker", "--queue", "pkgcheck",
                "--burst"], check=True)
with open(ran) as done:
    count = len(done.read().split())
stats = queue("pkgcheck").stats()
assert count == 50 and stats.pending == stats.claimed == stats.dead == 0, (count, stats)
print(f"package check: {count} jobs enqueued and drained on {django.db.connection.vendor}")
PY

run() {
  (cd "$work/site" && DJANGO_SETTINGS_MODULE=pkgcheck_settings PYTHONPATH=. "$py" "$@")
}
check_and_drain() {
  run -m django check --fail-level WARNING
  run -m django migrate -v 0
  # The checks that connect, the stand-ins' among them (alkqueue.W102), on what migrate built.
  run -m django check --database default --fail-level WARNING
  run pkgcheck_drain.py
}

check_and_drain
# The installed wheel speaks German: its .mo is found and read.
run -c 'import django; django.setup(); from django.utils import translation
from django_alkqueue.models import QueueMessage
with translation.override("de"):
    plural = str(QueueMessage._meta.verbose_name_plural)
assert plural == "Jobs", plural
print("package check: the German catalogue is installed and read")'

"$py" -m pip install -q "${wheel}[mysql]"
mariadb -uroot -e 'DROP DATABASE IF EXISTS alkqueue_pkgcheck; CREATE DATABASE alkqueue_pkgcheck CHARACTER SET utf8mb4;'
user=$(python3 -c "import sys, urllib.parse as u; print(u.urlsplit(sys.argv[1]).username)" "$MARIADB_URL")
mariadb -uroot -e "GRANT ALL PRIVILEGES ON alkqueue_pkgcheck.* TO '$user'@'localhost', '$user'@'127.0.0.1';"
export PKGCHECK_MYSQL="${MARIADB_URL%/*}/alkqueue_pkgcheck"
check_and_drain
mariadb -uroot -e 'DROP DATABASE alkqueue_pkgcheck;'
