"""The dead letters stored before error groups normalised identifiers mixing letters and
digits (`c1`, `user_17b`, error_groups.py): fingerprinted again, with 0005's backfill, so
that a bug's earlier dead letters stay in the group of its new ones."""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

backfill = import_module("django_alkqueue.migrations.0005_error_fingerprint").backfill


class Migration(migrations.Migration):
    dependencies = [("django_alkqueue", "0011_crashes")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
