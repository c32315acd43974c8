from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "testproject.shop"
    label = "shop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals  # noqa: F401  (connects the post_save receiver)
