"""nginx refuses a body exactly where Weft would (deploy/nginx/weft.conf against
deploy/weft.env, and both against Weft's own defaults): larger, nginx would refuse
what Weft takes; smaller, Weft's own 413 (the API's JSON envelope) would never be
reached for bodies nginx passes. Every import path of the settings has its location."""

from django.conf import settings

from tests.deploy.files import body_limits, environment


def test_it_uses_weft_s_sizes():
    limits, env = body_limits(), environment()
    assert limits["server"] == int(env["WEFT_MAX_REQUEST_BYTES"]) == settings.WEFT_MAX_REQUEST_BYTES
    assert limits["/v1/"] == int(env["WEFT_API_MAX_BODY_BYTES"]) == settings.WEFT_API_MAX_BODY_BYTES
    for path in settings.WEFT_IMPORT_PATHS:
        assert limits[path] == int(env["WEFT_MAX_IMPORT_BYTES"]) == settings.WEFT_MAX_IMPORT_BYTES
    assert set(limits) == {"server", "/v1/", *settings.WEFT_IMPORT_PATHS}
