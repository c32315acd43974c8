"""URLs of the alkqueue bench settings: the admin, for the render-time figures."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
