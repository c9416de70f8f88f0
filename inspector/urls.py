from django.urls import path

from inspector import views

urlpatterns = [
    path("inspect/", views.inspect, name="inspect"),
]
