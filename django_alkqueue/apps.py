from django.apps import AppConfig


class AlkQueueConfig(AppConfig):
    name = "django_alkqueue"
    verbose_name = "Job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .conf import get_settings
        from .consumers import registry

        registry.autodiscover(get_settings().CONSUMER_MODULES)
