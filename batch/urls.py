from django.urls import path

from batch import views

app_name = "batch"
urlpatterns = [
    path("", views.batch_list, name="list"),
    path("new/", views.batch_new, name="new"),
    path("<int:batch_id>/", views.batch_detail, name="detail"),
    path("<int:batch_id>/results/", views.batch_results, name="results"),
    path("<int:batch_id>/export.<str:fmt>", views.batch_export, name="export"),
    path("<int:batch_id>/delete/", views.batch_delete, name="delete"),
    path("<int:batch_id>/<int:item_id>/retry/", views.item_retry, name="item_retry"),
    path("<int:batch_id>/<int:item_id>/workbench/", views.item_workbench, name="item_workbench"),
    path("<int:batch_id>/<int:item_id>/loom/", views.item_loom, name="item_loom"),
    path("<int:batch_id>/<str:control>/", views.batch_control, name="control"),
]
