"""Draw Mermaid charts as GitHub and GitLab would, in a real browser: Debian's chromium, headless, with mermaid from
the npm registry (package.json pins the version; `bash scripts/install.sh charts` installs both into the clone).
tests/test_charts.py draws every PLAN.md chart of the bundled examples and of bench/spec_sweep.py's specs with it;
`python bench/mermaid_draw.py` writes a screenshot of each chart kind to docs/charts/.

A chart counts as drawn when mermaid parses it, renders an SVG, and the SVG, placed in the page, has a non-empty
box and no NaN coordinate.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MERMAID = REPO / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
TIMEOUT_S = 300

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>body {{ margin: 16px; background: white;
font-family: sans-serif; }} .chart {{ width: {width}px; }}</style></head><body><div id="charts"></div>
<pre id="result">pending</pre>
<script src="{mermaid}"></script>
<script>
const sources = {sources};
mermaid.initialize({{startOnLoad: false, securityLevel: "strict"}});
(async () => {{
  const results = [];
  for (const [i, source] of sources.entries()) {{
    try {{
      const {{svg}} = await mermaid.render("chart" + i, source);
      const holder = document.createElement("div");
      holder.className = "chart";
      holder.innerHTML = svg;
      document.getElementById("charts").appendChild(holder);
      const box = holder.querySelector("svg").getBBox();
      results.push({{ok: box.width > 0 && box.height > 0 && !svg.includes("NaN"), width: box.width,
                     height: box.height, error: svg.includes("NaN") ? "NaN in the SVG" : null}});
    }} catch (e) {{
      results.push({{ok: false, error: String((e && e.message) || e).slice(0, 300)}});
    }}
  }}
  document.getElementById("result").textContent = "RESULT " + JSON.stringify(results) + " END";
}})();
</script></body></html>
"""


def browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def page(sources: list[str], width: int = 960) -> str:
    return PAGE.format(mermaid=MERMAID.as_uri(), sources=json.dumps(sources), width=width)


def _chromium(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless chromium with its own profile in `folder` (two runs on one machine share nothing)."""
    command = [browser() or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--allow-file-access-from-files", f"--user-data-dir={folder / 'profile'}",
               "--virtual-time-budget=60000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def draw(sources: list[str], folder: Path) -> list[dict]:
    """Each source's result, in order: {ok, width, height, error}."""
    index = folder / "charts.html"
    index.write_text(page(sources), encoding="utf-8")
    done = _chromium(folder, "--dump-dom", index.as_uri())
    found = re.search(r'<pre id="result">RESULT (.*?) END</pre>', done.stdout, re.S)
    if found is None:
        raise RuntimeError(f"chromium drew nothing (exit {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(html.unescape(found.group(1)))


def screenshot(source: str, path: Path, folder: Path, size: tuple[int, int] = (1000, 560)) -> None:
    index = folder / f"{path.stem}.html"
    index.write_text(page([source], width=size[0] - 40), encoding="utf-8")
    _chromium(folder, f"--screenshot={path}", f"--window-size={size[0]},{size[1]}", "--hide-scrollbars",
              index.as_uri())


def main() -> None:
    """One screenshot per chart kind, from the bundled examples, into docs/charts/."""
    import tempfile

    sys.path.insert(0, str(REPO))
    from generator.charts import candidates_chart
    from generator.cli import _tables
    from generator.resolve import candidate_layouts, resolve
    from generator.spec import load_spec

    tables = _tables()
    kinds: dict[str, str] = {}
    # memory per role (GRPO), the pipeline split and time against cards with the budget (Llama 70B), candidates
    for example in ("qwen3-8b-grpo-verl-snt9b", "llama3.1-70b-pretrain-budget", "qwen3-32b-full-snt9b-16c"):
        spec = load_spec(str(REPO / "examples" / f"{example}.yaml"), ())
        plan = resolve(spec, tables)
        for chart in plan.charts:
            kinds.setdefault(chart.kind, chart.source)
        if "candidates" not in kinds and example.startswith("qwen3-32b"):
            for name, rows in candidate_layouts(spec, tables, plan).items():
                chart = candidates_chart(name, rows, plan.frameworks[name].layout.usable_gb)
                if chart is not None:
                    kinds.setdefault("candidates", chart.source)
    out = REPO / "docs" / "charts"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for kind, source in sorted(kinds.items()):
            screenshot(source, out / f"{kind}.png", Path(tmp))
            print(f"{out / f'{kind}.png'}")


if __name__ == "__main__":
    main()
