from django.urls import path

from workbench import compare_views, history_views, views

# No app namespace: the layout links to "workbench" and "history" by bare name.
urlpatterns = [
    path("workbench/", views.workbench, name="workbench"),
    path("workbench/check/", views.check, name="wb_check"),
    path("workbench/run/", views.run, name="wb_run"),
    path("workbench/code/", views.view_code, name="wb_code"),
    path("workbench/loom/", views.open_in_loom, name="wb_loom"),
    path("workbench/draft/", views.draft, name="wb_draft"),
    path("workbench/compare/", compare_views.compare, name="wb_compare"),
    path("workbench/generations/<int:generation_id>/save/", views.save, name="wb_save"),
    path("workbench/generations/<int:generation_id>/rerun/", views.rerun_generation, name="wb_rerun_generation"),
    path("workbench/generations/<int:generation_id>/dismiss/", views.dismiss, name="wb_dismiss"),
    path("workbench/presets/", views.preset_save, name="wb_preset_save"),
    path("workbench/presets/<int:preset_id>/", views.preset_load, name="wb_preset_load"),
    path("workbench/presets/<int:preset_id>/delete/", views.preset_delete, name="wb_preset_delete"),
    path("workbench/prompts/", views.prompt_save, name="wb_prompt_save"),
    path("workbench/prompts/<int:prompt_id>/delete/", views.prompt_delete, name="wb_prompt_delete"),
    path("history/", history_views.history, name="history"),
    path("history/recover/", history_views.recover, name="wb_recover"),
    path("history/export.<str:fmt>", history_views.export_history, name="wb_export"),
    path("history/<int:run_id>/", history_views.run_detail, name="wb_run_detail"),
    path("history/<int:run_id>/rerun/", history_views.run_rerun, name="wb_rerun"),
    path("history/<int:run_id>/delete/", history_views.run_delete, name="wb_run_delete"),
    path("history/<int:run_id>/export.<str:fmt>", history_views.export_run, name="wb_run_export"),
]  # fmt: skip
