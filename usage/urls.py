from django.urls import path

from usage import views

urlpatterns = [
    path("usage/", views.usage, name="usage"),
]
