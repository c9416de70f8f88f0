"""/swagger is public and uses the vendored Swagger UI (no CDN) over /openapi.json."""

import re

import pytest

pytestmark = pytest.mark.django_db


def test_it_serves_the_ui_and_its_files_locally(client):
    response = client.get("/swagger")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-spec-url="/openapi.json"' in html
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources and all(s.startswith("/static/") for s in sources), sources
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in sources
    for source in sources:
        assert client.get(source).status_code == 200, source
