from django.urls import path

from loom import share_views, tree_views, views

app_name = "loom"
urlpatterns = [
    path("", views.trees, name="trees"),
    path("import/", views.tree_import, name="import"),
    path("recover/", views.recover, name="recover"),
    path("depths/", tree_views.depths, name="depths"),
    path("link/<str:token>/", share_views.open_link, name="link"),
    path("<int:tree_id>/", views.tree_open, name="tree"),
    path("<int:tree_id>/rename/", views.tree_rename, name="rename"),
    path("<int:tree_id>/duplicate/", views.tree_duplicate, name="duplicate"),
    path("<int:tree_id>/delete/", views.tree_delete, name="delete"),
    path("<int:tree_id>/share/", share_views.share_page, name="share"),
    path("<int:tree_id>/share/add/", share_views.share_add, name="share_add"),
    path(
        "<int:tree_id>/share/<int:user_id>/revoke/",
        share_views.share_revoke,
        name="share_revoke",
    ),
    path("<int:tree_id>/share/link/", share_views.share_link, name="share_link"),
    path("<int:tree_id>/undo/", views.undo, name="undo"),
    path("<int:tree_id>/redo/", views.redo, name="redo"),
    path("<int:tree_id>/write-mode/", views.write_mode, name="write_mode"),
    path("<int:tree_id>/search/", views.tree_search, name="search"),
    path("<int:tree_id>/context/", views.tree_context, name="context"),
    path("<int:tree_id>/export/<str:fmt>/", views.export, name="export"),
    path("<int:tree_id>/graph/", tree_views.graph, name="graph"),
    path("<int:tree_id>/graph/data/", tree_views.graph_data, name="graph_data"),
    path("<int:tree_id>/n/<int:node_id>/", views.node_page, name="node"),
    path("<int:tree_id>/n/<int:node_id>/generate/", views.generate, name="generate"),
    path("<int:tree_id>/n/<int:node_id>/path/", views.node_path, name="path"),
    path("<int:tree_id>/n/<int:node_id>/live/", views.node_live, name="live"),
    path("<int:tree_id>/n/<int:node_id>/code/", views.code, name="code"),
    path("<int:tree_id>/n/<int:node_id>/read/", views.read, name="read"),
    path("<int:tree_id>/n/<int:node_id>/grow/", views.grow, name="grow"),
    path("<int:tree_id>/expansions/<int:expansion_id>/", views.expansion, name="expansion"),
    path(
        "<int:tree_id>/expansions/<int:expansion_id>/cancel/",
        views.expansion_cancel,
        name="expansion_cancel",
    ),
    path("<int:tree_id>/n/<int:node_id>/write/", views.write, name="write"),
    path(
        "<int:tree_id>/n/<int:node_id>/bookmark/<str:direction>/",
        views.bookmark_step,
        name="bookmark_step",
    ),
    path("<int:tree_id>/n/<int:node_id>/order/", views.child_order, name="child_order"),
    path(
        "<int:tree_id>/n/<int:node_id>/show-archived/",
        views.show_archived,
        name="show_archived",
    ),
    path(
        "<int:tree_id>/n/<int:node_id>/outline/",
        tree_views.outline_children,
        name="outline_children",
    ),
    path("<int:tree_id>/n/<int:node_id>/<str:action>/", views.node_action, name="action"),
]
