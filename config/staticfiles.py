"""Production's static files storage (STATIC_ROOT set): WhiteNoise's hashed, compressed
files, with the import statements of our ES modules (static/weft/*.js) rewritten to
the hashed names too. Without that, a page's `{% static 'weft/weft.js' %}` (hashed)
and another module's `import … from "./weft.js"` (not) would be two URLs, and the
browser would run the module twice."""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    support_js_module_import_aggregation = True
