"""report.html in a real browser (headless Chromium): it renders, its plots decode,
its script runs without error, and the page asks the network for nothing.

The input is a real quick mbrc run on an embedded PostgreSQL, made here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import blocklab_bin
from markupsafe import escape

pytestmark = [pytest.mark.browser, pytest.mark.engine]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
PLOT_IDS = ("mbrc-rows-per-s", "mbrc-mb-per-s")


@pytest.fixture(scope="module")
def report(cache_dir, tmp_path_factory) -> Path:
    """`blocklab run mbrc` (small) then `blocklab report`: the path of report.html."""
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: run `make test` (it installs it as root) or `sudo apt-get install chromium`")
    out = tmp_path_factory.mktemp("browser") / "mbrc"
    env = dict(os.environ)
    env["BLOCKLAB_CACHE"] = str(cache_dir / "report-browser")
    env.pop("FORCE_COLOR", None)
    run = subprocess.run(
        [blocklab_bin(), "run", "mbrc", "--quick", "--rows", "100000", "--set", "multiblock_read=1,8,64",
         "--repeats", "2", "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    rendered = subprocess.run([blocklab_bin(), "report", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    printed = rendered.stdout.split()
    assert printed[0] == str(out / "report.html")
    assert sorted(Path(p).name for p in printed[1:]) == sorted(f"{i}.png" for i in PLOT_IDS)
    return out / "report.html"


def chromium(page: Path, *extra: str) -> subprocess.CompletedProcess:
    """Headless Chromium on a file:// page, a fresh profile, no way out to the network
    (every host name resolves to nothing), console messages on stderr."""
    with tempfile.TemporaryDirectory(prefix="blocklab-chromium-") as profile:
        args = [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
            f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr", "--v=0", *extra, page.resolve().as_uri(),
        ]
        return subprocess.run(args, capture_output=True, text=True, timeout=120)


def page_console_lines(stderr: str) -> list[str]:
    """Console messages (and uncaught errors) of pages loaded from file://."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line and "file://" in line]


def page_requests(netlog: Path) -> list[str]:
    """URLs the page itself asked for over the network (not the browser's own housekeeping,
    whose requests carry the initiator 'not an origin')."""
    log = json.loads(netlog.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        if (event["type"] == start_job and "url" in params and params.get("initiator") != "not an origin"
                and not str(params["url"]).startswith(("data:", "file:"))):
            urls.append(str(params["url"]))
    return urls


def test_report_renders_to_a_non_blank_page(report, tmp_path):
    import matplotlib.image

    shot = tmp_path / "report.png"
    result = chromium(report, f"--screenshot={shot}", "--window-size=1280,4000", "--hide-scrollbars")
    assert shot.exists(), result.stderr[-2000:]
    pixels = np.asarray(matplotlib.image.imread(shot))[..., :3]
    assert pixels.shape[:2] == (4000, 1280)
    assert float(pixels.std()) > 0.05  # text, tables and plots, not an empty page
    # the plots: a band of the page with many distinct colours, not just black text on white
    top_half = pixels[:2000].reshape(-1, 3)
    colours = {tuple(c) for c in (top_half[:: 97] * 255).astype(int)}
    assert len(colours) > 30
    assert page_console_lines(result.stderr) == []


def test_plots_decode_the_script_runs_and_nothing_goes_out(report, tmp_path):
    netlog = tmp_path / "netlog.json"
    result = chromium(report, "--dump-dom", "--virtual-time-budget=5000", f"--log-net-log={netlog}")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    # the inline script ran to its end: every plot image decoded
    assert f'data-plots-rendered="{len(PLOT_IDS)}/{len(PLOT_IDS)}"' in dom
    for plot_id in PLOT_IDS:
        assert re.search(rf'<img[^>]*id="plot-{plot_id}"', dom)
    assert page_console_lines(result.stderr) == []  # no console message, no uncaught error
    assert "net::ERR_" not in "\n".join(page_console_lines(result.stderr))
    assert page_requests(netlog) == []


def test_the_request_check_would_catch_a_page_that_reaches_out(tmp_path):
    """The checks above are not vacuous: a page with a CDN script and a broken
    script is caught by each of them."""
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: run `make test` (it installs it as root) or `sudo apt-get install chromium`")
    page = tmp_path / "bad.html"
    page.write_text('<!doctype html><img src="https://cdn.example.com/x.png"><script>missing();</script>')
    netlog = tmp_path / "netlog.json"
    result = chromium(page, "--dump-dom", "--virtual-time-budget=3000", f"--log-net-log={netlog}")
    assert page_requests(netlog) == ["https://cdn.example.com/x.png"]
    assert any("Uncaught ReferenceError" in line for line in page_console_lines(result.stderr))


def test_the_html_names_no_external_resource(report):
    html = report.read_text()
    experiment = (report.parent / "experiment.toml").read_text()
    outside_experiment = html.replace(str(escape(experiment)), "")
    assert re.findall(r"https?://[^\s\"'<>]+", outside_experiment) == []
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", html)  # everything inline
    assert "<svg" not in html or "xmlns" not in html  # plots are data: images, not inline SVG with namespaces
    for plot_id in PLOT_IDS:
        assert f'id="plot-{plot_id}" src="data:image/svg+xml;base64,' in html
