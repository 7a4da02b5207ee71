"""`dvc plots show/diff` render offline: the repository's DVC config names `.dvc/plots_template.html`,
a copy of dvc-render's default page with Vega, Vega-Lite and Vega-Embed inlined instead of loaded
from a CDN (docs/metrics-and-plots.md)."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DVC_DIR = ROOT / ".dvc"
TEMPLATE = DVC_DIR / "plots_template.html"

SCRIPT_TAG = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)
SRC_ATTR = re.compile(r"""\bsrc\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)


def _repo_config_template():
    from dvc.config import Config

    repo_level = Config(dvc_dir=str(DVC_DIR), validate=True).load_one("repo")
    return repo_level.get("plots", {}).get("html_template")


def test_dvc_config_names_the_template_and_it_exists():
    name = _repo_config_template()
    assert name == "plots_template.html"
    # DVC resolves a relative plots.html_template against the .dvc/ folder
    assert (DVC_DIR / name).is_file()
    # and git must keep it: it is not ignored by .dvc/.gitignore
    ignored = (DVC_DIR / ".gitignore").read_text().split()
    assert not any(pattern.strip("/") == TEMPLATE.name for pattern in ignored)


def test_template_has_placeholder_no_remote_scripts_and_inlines_vega():
    html = TEMPLATE.read_text(encoding="utf8")
    assert "{plot_divs}" in html
    # dvc-render's {scripts} placeholder would bring back the CDN <script src> tags
    assert "{scripts}" not in html
    tags = SCRIPT_TAG.findall(re.sub(r"(?s)<!--.*?-->", "", html))
    assert len(tags) == 3, tags
    for attrs in tags:
        src = SRC_ATTR.search(attrs)
        assert src is None or not re.match(r"(?i)(https?:)?//", src.group(1)), attrs
    assert not re.search(r"""(?i)<script[^>]*\bsrc\s*=\s*["']?(https?:)?//""", html)
    # the three libraries' UMD builds register these globals
    for global_name in (").vega={}", ").vegaLite={}", ").vegaEmbed="):
        assert global_name in html, global_name
    assert "vega-lite@5" in html and "vega-embed@6" in html


def _screenshot(chromium, html_file, png_file):
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            # no name resolves: a page that needs a CDN stays blank, in any environment
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--virtual-time-budget=10000",
            "--window-size=800,600",
            f"--screenshot={png_file}",
            html_file.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    from PIL import Image

    with Image.open(png_file) as image:
        histogram = image.convert("L").histogram()
    return sum(histogram[:200])  # pixels clearly darker than the white page


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs headless chromium")
def test_dvc_render_page_from_the_template_draws_offline(tmp_path):
    from dvc_render.html import render_html
    from dvc_render.vega import VegaRenderer

    datapoints = [
        {"epoch": epoch, "loss": scale / epoch, "rev": rev}
        for rev, scale in (("seed0", 1.0), ("seed1", 1.5))
        for epoch in range(1, 8)
    ]
    renderer = VegaRenderer(datapoints, "loss.tsv", x="epoch", y="loss", template="simple")
    chromium = shutil.which("chromium")

    ours = render_html([renderer], tmp_path / "ours" / "index.html", html_template=TEMPLATE)
    default = render_html([renderer], tmp_path / "default" / "index.html")
    remote_script = re.compile(r"""(?i)<script[^>]*\bsrc\s*=\s*["']?(https?:)?//""")
    assert not remote_script.search(Path(ours).read_text(encoding="utf8"))
    assert remote_script.search(Path(default).read_text(encoding="utf8"))

    dark_ours = _screenshot(chromium, Path(ours), tmp_path / "ours.png")
    dark_default = _screenshot(chromium, Path(default), tmp_path / "default.png")
    # axes, labels and two curves; the CDN page draws nothing without network
    assert dark_ours > 1500, dark_ours
    assert dark_default < 100, dark_default
