// The Feedback button (templates/feedback/_button.html): htmx loads the form into the
// dialog, this opens it once the form is there and closes it on ×, Escape (the native
// dialog's) or a click on the backdrop. Nothing from the page goes into the form but
// what htmx sends (its address).
// A swap with no target (static/weft/loomlive.js's out-of-band parts) is none of ours.
const dialog = () => document.getElementById("feedback-dialog");
document.addEventListener("htmx:afterSwap", (e) => {
  const d = dialog();
  if (!d || !e.detail.target || e.detail.target.id !== "feedback-body") return;
  if (!d.open) d.showModal();
  const message = d.querySelector("textarea");
  if (message && e.detail.requestConfig.verb === "get") message.focus();
});
document.addEventListener("click", (e) => {
  const d = dialog();
  if (!d) return;
  if (e.target.closest("[data-feedback-close]") || e.target === d) d.close();
});
