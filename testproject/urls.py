from django.contrib import admin
from django.urls import include, path

from testproject.shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics/", include("django_alkqueue.reports.metrics.urls")),
    path("orders/", views.place_order, name="place-order"),
    path("orders/fail/", views.place_order_then_fail, name="place-order-then-fail"),
    path("orders/async/", views.place_order_async, name="place-order-async"),
    path("ping/async/", views.ping_async, name="ping-async"),
]
