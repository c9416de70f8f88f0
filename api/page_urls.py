from django.urls import path

from api import pages

urlpatterns = [
    path("openapi.json", pages.openapi_json, name="openapi_json"),
    path("swagger", pages.swagger, name="swagger"),
    path("keys/", pages.keys, name="api_keys"),
    path("keys/<int:key_id>/revoke/", pages.revoke, name="api_key_revoke"),
]
