from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _


class AlkQueueConfig(AppConfig):
    name = "django_alkqueue"
    verbose_name = _("Job queue")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .conf import get_settings
        from .consumers import registry

        try:
            extra_modules = get_settings().CONSUMER_MODULES
        except ImproperlyConfigured:
            # Bad settings are reported by the check alkqueue.E003, which `manage.py check`
            # and every command run; failing here would hide that report behind a traceback.
            extra_modules = ()
        registry.autodiscover(extra_modules)
