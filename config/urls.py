from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from core import views as core_views

urlpatterns = [
    path("", core_views.home, name="home"),
    path("health", core_views.health, name="health"),
    path("health/ready", core_views.ready, name="ready"),
    path("metrics", core_views.metrics_view, name="metrics"),
    path("preferences/plain-view/", core_views.plain_view, name="plain_view"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("workbench.urls")),
    path("", include("completions.urls")),
    path("", include("usage.urls")),
    path("", include("inspector.urls")),
    path("loom/", include("loom.urls")),
    path("batch/", include("batch.urls")),
    path("", include("api.page_urls")),
    path("", include("feedback.urls")),
]

handler403 = core_views.forbidden
# The database or Redis away: the "back in a moment" page (503), else the 500 page.
handler500 = "core.middleware.server_error"
