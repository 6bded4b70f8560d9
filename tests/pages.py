"""Checks a report page as a person would see it: headless Debian chromium loads it, every
image decodes, and its screenshot is not blank (the study report and the workload report)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

# Appended to a copy of the page: records, once the page has loaded, how many images it has
# and which did not decode.
_IMAGE_CHECK = """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const broken = images.filter((i) => !(i.complete && i.naturalWidth > 0)).map((i) => i.alt);
  const out = document.createElement("pre");
  out.id = "image-check";
  out.textContent = JSON.stringify({images: images.length, broken: broken});
  document.body.appendChild(out);
});
</script></body>"""


def _chromium(*args: str, profile: Path) -> str:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"]
    flags += [f"--user-data-dir={profile}", "--virtual-time-budget=10000"]
    done = subprocess.run(
        [exe, *flags, *args], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout


def check_page_renders(reported: Path, tmp_path: Path) -> None:
    """`reported/report.html` renders, its images decode, its screenshot is not blank."""
    checked = tmp_path / "checked.html"
    checked.write_text((reported / "report.html").read_text().replace("</body>", _IMAGE_CHECK))
    dom = _chromium("--dump-dom", checked.as_uri(), profile=tmp_path / "profile")
    found = re.search(r"<pre id=\"image-check\">(.*?)</pre>", dom, re.S)
    assert found is not None, "the page did not finish loading"
    check = json.loads(html.unescape(found[1]))
    assert check == {"images": len(list(reported.glob("*.png"))), "broken": []}
    shot = tmp_path / "page.png"
    page = (reported / "report.html").as_uri()
    _chromium(f"--screenshot={shot}", "--window-size=1280,2000", page, profile=tmp_path / "p2")
    with Image.open(shot) as image:
        grey = np.asarray(image.convert("L"))
    assert grey.shape == (2000, 1280)
    assert (grey < 200).mean() > 0.02 and grey.std() > 20, "the screenshot is blank"
