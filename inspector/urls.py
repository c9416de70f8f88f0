from django.urls import path

from inspector import views

urlpatterns = [
    path("inspect/", views.inspect, name="inspect"),
    path("inspect/score/", views.score, name="inspect_score"),
    path("inspect/choices/", views.choices, name="inspect_choices"),
    path("inspect/compare/", views.compare, name="inspect_compare"),
    path("inspect/<int:generation_id>/", views.result, name="inspect_result"),
    path(
        "inspect/<int:generation_id>/export.<str:fmt>",
        views.export,
        name="inspect_export",
    ),
    path("inspect/<int:generation_id>/save/", views.save, name="inspect_save"),
]
