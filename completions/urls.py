from django.urls import path

from completions import views

urlpatterns = [
    path(
        "generations/<int:generation_id>/result/", views.generation_result, name="generation_result"
    ),
    path(
        "generations/<int:generation_id>/cancel/", views.generation_cancel, name="generation_cancel"
    ),
]
