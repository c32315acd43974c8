"""The test project without "django_alkqueue" in INSTALLED_APPS, for the tests of the
system check alkqueue.E103 (tests/test_command_errors.py): its shop's views import the queue
API, so loading the URLconf imports the models. With ALKQUEUE_TEST_DJANGO_ADMIN set, Django's
own admin stands in for ours."""

import os

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS

LEFT_OUT = ("django_alkqueue", "testproject.chaos")
INSTALLED_APPS = [app for app in INSTALLED_APPS if app not in LEFT_OUT]
if os.environ.get("ALKQUEUE_TEST_DJANGO_ADMIN"):
    INSTALLED_APPS[0] = "django.contrib.admin"
TASKS: dict[str, object] = {}  # the Tasks backend refuses to load without the app (E102)
