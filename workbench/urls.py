from django.urls import path

from workbench import views

urlpatterns = [
    path("workbench/", views.workbench, name="workbench"),
    path("history/", views.history, name="history"),
]
