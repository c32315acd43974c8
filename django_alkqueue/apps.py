from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from . import testing  # noqa: F401  (registers RUN_ON_COMMIT's hook, hooks.py)
from .conf import get_settings
from .consumers import registry


class AlkQueueConfig(AppConfig):
    name = "django_alkqueue"
    verbose_name = _("Job queue")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported once the app registry is ready, as both import the models: checks registers
        # the system checks, queues how a JobSpec is sent (workflows/specs.py).
        from . import checks, queues  # noqa: F401

        try:
            extra_modules = get_settings().CONSUMER_MODULES
        except ImproperlyConfigured:
            # Bad settings are reported by the check alkqueue.E003, which `manage.py check`
            # and every command run; failing here would hide that report behind a traceback.
            extra_modules = ()
        registry.autodiscover(extra_modules)
