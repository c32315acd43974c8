"""The test project with a bad ALKQUEUE setting, for the test that `manage.py check` reports
it as alkqueue.E003 instead of crashing (a string where a list of modules belongs)."""

from testproject.settings import *  # noqa: F403

ALKQUEUE = {"CONSUMER_MODULES": "shop.consumers"}
