"""The shared charts (core/charts.py + static/weft/charts.js) drawing 10,000 points in
Chromium, against uPlot's own bare draw of the same data.

    .venv/bin/python bench/charts.py [--points 10000] [--repeat 15]

No server: the kit partial (templates/kit/_chart.html) is rendered by Django's
template engine into a file with the vendored scripts, opened in Debian's Chromium
(tests/support.py's launch arguments). Each case, p50 / p95 over --repeat fresh draws:

  * bare: `new uPlot(opts, data, el)` with the same series and axes, no labels, no
    legend, nothing around it — the library's own cost;
  * ours: weft.charts.draw(figure) — reading the spec from its json_script, token tick
    labels, hatchings and dashes, the legend, the readout, the resize observer;
  * both timed from the call to the end of the first draw (uPlot commits in a
    microtask; its draw hook notes the time), and to the next frame (on screen);
  * the small multiples: 16 `new uPlot` against weft.charts.init over the 16 figures
    (as a page's swap brings them), to the last chart's draw;
  * hover: moving the cursor to a point and outlining its chip among --points chips
    (a chip's hover, the other way, costs the same lookup).

Cases: Inspect's surprisal chart (3 series: surprisal, cumulative, entropy, over
--points tokens) and the Workbench's 16 small multiples of --points / 16 tokens each.
Target: ours ≤ 200 ms for --points = 10,000. Report `uptime` beside the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BARE = """
async ([spec, parent]) => {
  const el = document.createElement('div');
  el.style.width = '1200px';
  document.getElementById(parent).append(el);
  const opts = {
    width: 1200, height: spec.height, legend: {show: false},
    scales: {x: {time: false}},
    axes: [{}, {scale: 'y'}, {scale: 'y2', side: 1}],
    series: [{}, ...spec.series.map(s => ({scale: s.axis, stroke: '#3b5bdb', width: 1.6}))],
    hooks: {draw: [() => { drawnAt = drawnAt || performance.now(); }]},
  };
  const data = [spec.x, ...spec.series.map(s => s.values)];
  let drawnAt = 0;
  const t0 = performance.now();
  const u = new uPlot(opts, data, el);
  await new Promise(r => setTimeout(r, 0));
  const drawn = drawnAt - t0;
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const frame = performance.now() - t0;
  u.destroy(); el.remove();
  return [drawn, frame];
}
"""

BARE_MANY = """
async ([specs, parent]) => {
  const box = document.getElementById(parent);
  const els = specs.map(() => { const el = document.createElement('div'); box.append(el); return el; });
  let drawnAt = 0;
  const t0 = performance.now();
  const plots = specs.map((spec, k) => new uPlot({
    width: 1200, height: spec.height, legend: {show: false}, scales: {x: {time: false}},
    series: [{}, ...spec.series.map(s => ({stroke: '#3b5bdb', width: 1.6}))],
    hooks: {draw: [() => { drawnAt = Math.max(drawnAt, performance.now()); }]},
  }, [spec.x, ...spec.series.map(s => s.values)], els[k]));
  await new Promise(r => setTimeout(r, 0));
  const drawn = drawnAt - t0;
  plots.forEach(u => u.destroy());
  box.replaceChildren();
  return drawn;
}
"""

OURS_MANY = """
async ([htmls, parent]) => {
  const box = document.getElementById(parent);
  box.replaceChildren();
  weft.charts.init(document);
  box.insertAdjacentHTML('beforeend', htmls.join(''));
  const t0 = performance.now();
  weft.charts.init(box);
  await new Promise(r => setTimeout(r, 0));
  const ids = [...box.querySelectorAll('figure[data-chart]')].map(f => f.id);
  return Math.max(...ids.map(id => weft.charts.entry(id).drawnAt)) - t0;
}
"""

OURS = """
async ([html, parent]) => {
  const box = document.getElementById(parent);
  box.insertAdjacentHTML('beforeend', html);
  const fig = box.lastElementChild;
  const t0 = performance.now();
  const entry = weft.charts.draw(fig);
  await new Promise(r => setTimeout(r, 0));
  const drawn = entry.drawnAt - t0;
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const frame = performance.now() - t0;
  return [drawn, frame];
}
"""

HOVER = """
([id, n]) => {
  const entry = weft.charts.entry(id);
  const times = [];
  for (let k = 0; k < 50; k++) {
    const i = Math.floor((k * 7919) % n);
    const t0 = performance.now();
    const u = entry.u;
    u.setCursor({left: u.valToPos(entry.spec.x[i], 'x'), top: 10});
    times.push(performance.now() - t0);
    if (!document.querySelector(`#tokens [data-pos="${entry.spec.x[u.cursor.idx]}"].chart-hit`)) throw new Error('no chip');
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def setup_django() -> None:
    import django
    from django.conf import settings

    settings.configure(
        TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates",
                    "DIRS": [ROOT / "templates"], "OPTIONS": {"builtins": []}}],
        INSTALLED_APPS=["django.contrib.staticfiles"],
        STATIC_URL="static/",  # the page file sits beside a link to static/
    )  # fmt: skip
    django.setup()


def inspect_chart(points: int):
    from inspector.charts import surprisal_chart
    from inspector.scoring import TokenRow

    rng = random.Random(1)
    words = ["·the", "·owl", "·sang", "·to", "·moon", ",", "·and", "·river"]
    rows = [
        TokenRow(position=i, id=i, text=rng.choice(words),
                 logprob=None if i == 0 else -rng.expovariate(0.4),
                 entropy_bits=rng.uniform(0.5, 9.0))
        for i in range(points)
    ]  # fmt: skip
    return surprisal_chart(rows, full_vocab=True, key="bench"), rows


def multiples(points: int):
    from core.charts import Chart, Mark, Series

    rng = random.Random(2)
    per = max(1, points // 16)
    return [
        Chart(id=f"chart-m-{k}", title=f"Sample #{k}", x=list(range(per)),
              x_names=[f"t{i}" for i in range(per)], x_label="token", y_label="p",
              series=[Series("p", [math.exp(-rng.expovariate(1)) for _ in range(per)], decimals=3)],
              marks=[Mark(per // 3, "leaves the others")], sync="bench", y_range=(0.0, 1.0), height=150)
        for k in range(16)
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    setup_django()
    from django.template.loader import render_to_string
    from playwright.sync_api import sync_playwright

    from core.tokens import Chip, chips_html
    from tests.support import CHROMIUM, CHROMIUM_ARGS

    chart, rows = inspect_chart(args.points)
    chart_html = render_to_string("kit/_chart.html#chart", {"chart": chart})
    small = multiples(args.points)
    small_html = [render_to_string("kit/_chart.html#chart", {"chart": c}) for c in small]
    chips = chips_html(
        Chip(r.text, r.logprob, index=r.position, attrs={"pos": str(r.position)}) for r in rows
    )
    # Django roots a relative STATIC_URL at "/": the file page reads static/ beside it.
    assets = render_to_string("kit/_chart.html#assets").replace('"/static/', '"static/')
    scratch = Path(tempfile.mkdtemp(prefix="weft-bench-charts-"))
    (scratch / "static").symlink_to(ROOT / "static")
    page_file = scratch / "charts.html"
    page_file.write_text(
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<link rel='stylesheet' href='static/weft/weft.css'>{assets}</head>"
        f"<body style='width:1240px'><div id='tokens'>{chips}</div><div id='bare'></div><div id='ours'></div>"
        "<div id='small'></div></body></html>"
    )
    spec = chart.spec()
    results: dict[str, list[float]] = {k: [] for k in
               ("bare", "bare_frame", "ours", "ours_frame", "small_bare", "small_ours", "hover")}  # fmt: skip
    with sync_playwright() as pw:
        # The scripts are ES modules: a file:// page may load them only with this flag.
        args = [*CHROMIUM_ARGS, "--allow-file-access-from-files"]
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=args)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(page_file.as_uri())
        page.wait_for_function("window.uPlot && window.weft?.charts")
        for r in range(args.repeat + 1):  # the first round warms the JIT and the fonts: dropped
            bare, bare_frame = page.evaluate(BARE, [spec, "bare"])
            page.evaluate(
                "() => { document.getElementById('ours').replaceChildren(); weft.charts.init(document); }"
            )
            ours, ours_frame = page.evaluate(OURS, [chart_html, "ours"])
            hover = page.evaluate(HOVER, [chart.id, args.points])
            t_bare = page.evaluate(BARE_MANY, [[c.spec() for c in small], "bare"])
            t_ours = page.evaluate(OURS_MANY, [small_html, "small"])
            if r:
                for key, value in zip(results, (bare, bare_frame, ours, ours_frame, t_bare, t_ours, hover),
                                      strict=True):  # fmt: skip
                    results[key].append(value)
        page.screenshot(path=str(scratch / "charts.png"), full_page=False)
        browser.close()

    def line(name: str, key: str, base: str | None = None) -> str:
        p50, p95 = percentile(results[key], 0.5), percentile(results[key], 0.95)
        ratio = f"   × {p50 / percentile(results[base], 0.5):.2f} of bare" if base else ""
        return f"  {name:<50} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms{ratio}"

    n = args.points
    print(
        f"charts in Chromium, {n:,} points, {args.repeat} draws (JSON spec {len(json.dumps(spec)):,} bytes)"
    )
    print(f"Inspect surprisal chart: 3 series × {n:,} points")
    print(line("bare uPlot, to the end of its draw", "bare"))
    print(line("ours (weft.charts.draw), to the end of its draw", "ours", "bare"))
    print(line("bare uPlot, to the next frame", "bare_frame"))
    print(line("ours, to the next frame", "ours_frame", "bare_frame"))
    print(line(f"hover: cursor to a point + its chip of {n:,}", "hover"))
    print(f"Workbench small multiples: 16 charts × {n // 16:,} points")
    print(line("bare uPlot, 16 new uPlot(), to the last draw", "small_bare"))
    print(line("ours, weft.charts.init of the 16, to the last draw", "small_ours", "small_bare"))
    worst = percentile(results["ours"], 0.95)
    print(
        f"target: the draw of 10,000 points ≤ 200 ms: {'met' if worst <= 200 else 'NOT met'}"
        f" (ours, p95 to the end of the draw: {worst:.1f} ms)"
    )
    print("load average: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"screenshot: {scratch / 'charts.png'}")


if __name__ == "__main__":
    main()
