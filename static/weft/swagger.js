// Swagger UI (vendored from npm's swagger-ui-dist) over this server's own spec.
document.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("swagger-ui");
  SwaggerUIBundle({
    url: root.dataset.specUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    tryItOutEnabled: false,
    persistAuthorization: false,
    validatorUrl: null,  // never ask validator.swagger.io: nothing leaves this server
  });
});
