// While a batch runs, the socket brings its progress; the results table below it is
// re-read (at most every 2 s, and once more when the batch ends) so finished rows
// fill in without reloading the page.
let last = 0, timer = null, seen = null;
function refresh() {
  timer = null;
  last = Date.now();
  const table = document.getElementById("batch-results");
  if (table) htmx.trigger(table, "batch-refresh");
}
document.addEventListener("htmx:wsAfterMessage", function () {
  const bar = document.querySelector(".batch-progress");
  if (!bar) return;
  const finished = bar.dataset.finished + "/" + bar.dataset.state;
  if (finished === seen) return;
  const first = seen === null;
  seen = finished;
  if (first) return;
  if (timer) return;
  timer = setTimeout(refresh, Math.max(0, 2000 - (Date.now() - last)));
});
