from django.apps import AppConfig


class AlkQueueConfig(AppConfig):
    name = "django_alkqueue"
    verbose_name = "Job queue"
    default_auto_field = "django.db.models.BigAutoField"
