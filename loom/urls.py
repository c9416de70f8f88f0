from django.urls import path

from loom import (
    generation_views,
    manage_views,
    node_views,
    reader_views,
    share_views,
    tree_views,
)

app_name = "loom"
urlpatterns = [
    path("", manage_views.trees, name="trees"),
    path("import/", manage_views.tree_import, name="import"),
    path("recover/", generation_views.recover, name="recover"),
    path("depths/", tree_views.depths, name="depths"),
    path("link/<str:token>/", share_views.open_link, name="link"),
    path("<int:tree_id>/", manage_views.tree_open, name="tree"),
    path("<int:tree_id>/rename/", manage_views.tree_rename, name="rename"),
    path("<int:tree_id>/duplicate/", manage_views.tree_duplicate, name="duplicate"),
    path("<int:tree_id>/delete/", manage_views.tree_delete, name="delete"),
    path("<int:tree_id>/share/", share_views.share_page, name="share"),
    path("<int:tree_id>/share/add/", share_views.share_add, name="share_add"),
    path(
        "<int:tree_id>/share/<int:user_id>/revoke/",
        share_views.share_revoke,
        name="share_revoke",
    ),
    path("<int:tree_id>/share/link/", share_views.share_link, name="share_link"),
    path("<int:tree_id>/undo/", node_views.undo, name="undo"),
    path("<int:tree_id>/redo/", node_views.redo, name="redo"),
    path("<int:tree_id>/write-mode/", reader_views.write_mode, name="write_mode"),
    path("<int:tree_id>/search/", reader_views.tree_search, name="search"),
    path("<int:tree_id>/context/", generation_views.tree_context, name="context"),
    path("<int:tree_id>/export/<str:fmt>/", manage_views.export, name="export"),
    path("<int:tree_id>/graph/", tree_views.graph, name="graph"),
    path("<int:tree_id>/graph/data/", tree_views.graph_data, name="graph_data"),
    path("<int:tree_id>/n/<int:node_id>/", reader_views.node_page, name="node"),
    path("<int:tree_id>/n/<int:node_id>/generate/", generation_views.generate, name="generate"),
    path("<int:tree_id>/n/<int:node_id>/path/", reader_views.node_path, name="path"),
    path("<int:tree_id>/n/<int:node_id>/live/", reader_views.node_live, name="live"),
    path("<int:tree_id>/n/<int:node_id>/code/", generation_views.code, name="code"),
    path("<int:tree_id>/n/<int:node_id>/read/", reader_views.read, name="read"),
    path("<int:tree_id>/n/<int:node_id>/grow/", generation_views.grow, name="grow"),
    path(
        "<int:tree_id>/expansions/<int:expansion_id>/", generation_views.expansion, name="expansion"
    ),
    path(
        "<int:tree_id>/expansions/<int:expansion_id>/cancel/",
        generation_views.expansion_cancel,
        name="expansion_cancel",
    ),
    path("<int:tree_id>/n/<int:node_id>/write/", node_views.write, name="write"),
    path(
        "<int:tree_id>/n/<int:node_id>/bookmark/<str:direction>/",
        reader_views.bookmark_step,
        name="bookmark_step",
    ),
    path("<int:tree_id>/n/<int:node_id>/order/", reader_views.child_order, name="child_order"),
    path(
        "<int:tree_id>/n/<int:node_id>/show-archived/",
        reader_views.show_archived,
        name="show_archived",
    ),
    path(
        "<int:tree_id>/n/<int:node_id>/outline/",
        tree_views.outline_children,
        name="outline_children",
    ),
    path("<int:tree_id>/n/<int:node_id>/<str:action>/", node_views.node_action, name="action"),
]
