// ESLint for Weft's own scripts (static/weft/*.js, ES modules in the browser) and their
// unit tests (tests/js/, node's test runner). `make test` runs it in its lint step
// (launch/checks.py). The vendored libraries are not ours to lint.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["static/vendor/**", "node_modules/**", ".venv/**", "staticfiles/**", ".artifacts/**"] },
  js.configs.recommended,
  {
    files: ["static/weft/**/*.js"],
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: "module",
      // The vendored classic scripts' globals: htmx (and its ws extension), uPlot,
      // Swagger UI. Everything of ours is imported, never a global.
      globals: { ...globals.browser, htmx: "readonly", uPlot: "readonly", SwaggerUIBundle: "readonly" },
    },
    rules: {
      "no-unused-vars": ["error", { args: "none", caughtErrors: "none" }],
      eqeqeq: ["error", "smart"],
      "no-implicit-globals": "error",
      "no-restricted-globals": ["error", { name: "weft", message: "import what you need; window.weft holds test hooks only" }],
      "prefer-const": "error",
      "no-var": "error",
    },
  },
  {
    files: ["tests/js/**/*.js", "eslint.config.js"],
    languageOptions: { ecmaVersion: 2024, sourceType: "module", globals: { ...globals.node } },
  },
];
