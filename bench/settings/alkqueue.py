"""django-alkqueue, as its workers run: the bench consumer, nothing else installed."""

import os

from .base import *  # noqa: F403
from .base import DATABASES, INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_alkqueue"]

ALKQUEUE = {"CONSUMER_MODULES": ["bench.jobs.alkqueue_consumers"]}
if os.environ.get("BENCH_ACK_WINDOW"):
    ALKQUEUE["ACK_WINDOW"] = float(os.environ["BENCH_ACK_WINDOW"])
# bench/scale_out.py's drain through PgBouncer: BENCH_DATABASE_URL is the pooler, and LISTEN
# (and the leader's advisory lock with it) takes this direct connection, as docs/worker.md
# (PgBouncer) sets a worker up behind transaction pooling.
if os.environ.get("BENCH_LISTEN_URL"):
    import dj_database_url

    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    DATABASES["direct"] = dj_database_url.parse(os.environ["BENCH_LISTEN_URL"], conn_max_age=60)
    ALKQUEUE["LISTEN_DATABASE"] = "direct"
