from django.urls import path

from feedback import views

urlpatterns = [
    path("feedback/", views.feedback_list, name="feedback_list"),
    path("feedback/new/", views.feedback_new, name="feedback_new"),
    path("feedback/<int:feedback_id>/", views.feedback_detail, name="feedback_detail"),
    path("budget/request/", views.budget_request, name="budget_request"),
    path(
        "budget/requests/<int:budget_request_id>/withdraw/",
        views.budget_request_withdraw,
        name="budget_request_withdraw",
    ),
]
