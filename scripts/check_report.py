#!/usr/bin/env python3
"""Open a run's report.html in headless Chromium and fail if any image is broken.

    python scripts/check_report.py RUN/report.html      (or a run directory)

Two checks, exit status 1 if either fails:
1. static: the page references nothing outside itself (no http(s) URLs in src/href/url(),
   no <script src> or <link>): images must be embedded data: URIs;
2. in the browser: Debian's ``chromium`` (``apt-get update && apt-get install -y chromium``)
   loads a copy of the page with every host name unresolvable, waits for the load event, and
   reports each <img> that did not decode (``naturalWidth == 0``) and each <video> (the movies'
   MP4s) whose first frame did not decode.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = "TINYSCOPE-IMAGE-CHECK"
PROBE = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (im) { return !im.complete || im.naturalWidth === 0; })
                   .map(function (im) { return im.alt || im.src.slice(0, 60); });
  var vids = Array.prototype.slice.call(document.getElementsByTagName('video'));
  var waits = vids.map(function (v) {
    return new Promise(function (done) {
      if (v.readyState >= 2) { done(); return; }
      v.addEventListener('loadeddata', function () { done(); });
      v.addEventListener('error', function () { done(); });
      setTimeout(done, 10000);
    });
  });
  Promise.all(waits).then(function () {
    var badVideos = vids.filter(function (v) { return v.readyState < 2 || v.videoWidth === 0; })
                        .map(function (v) { return (v.parentNode && v.parentNode.id) || v.src.slice(0, 60); });
    var out = {images: imgs.length, broken: broken, videos: vids.length, broken_videos: badVideos};
    document.body.innerHTML = '<pre>' + '%s' + JSON.stringify(out) + '</pre>';
  });
});
</script>""" % MARKER
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//"""   # src="http://..." or "//host/..."
                      r"""|url\(\s*["']?\s*(?:https?:)?//"""               # CSS url(http://...)
                      r"""|<script[^>]+src=|<link\b""", re.IGNORECASE)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        exe = shutil.which(name)
        if exe:
            return exe
    return None


def static_problems(page: str) -> list[str]:
    """External references in the page (each as a short excerpt)."""
    return [page[max(0, m.start() - 20):m.end() + 40] for m in EXTERNAL.finditer(page)]


def browser_check(page: str, chromium: str, timeout: float = 120.0) -> dict:
    """Load the page in headless Chromium (no network) and return {images, broken, videos, broken_videos}."""
    probe = page.replace("</body>", PROBE + "</body>") if "</body>" in page else page + PROBE
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "report.html"
        copy.write_text(probe, encoding="utf-8")
        cmd = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp}/profile",
               "--virtual-time-budget=20000", "--dump-dom", copy.as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    match = re.search(re.escape(MARKER) + r"(\{.*?\})</pre>", proc.stdout)
    if not match:
        tail = (proc.stderr or "").strip().splitlines()[-3:]
        raise RuntimeError(f"chromium did not report (exit {proc.returncode}): {' | '.join(tail)}")
    return json.loads(match.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", help="report.html or a run directory holding one")
    args = ap.parse_args(argv)
    path = Path(args.report)
    if path.is_dir():
        path = path / "report.html"
    if not path.is_file():
        print(f"check_report: {path} does not exist", file=sys.stderr)
        return 2
    page = path.read_text(encoding="utf-8")
    problems = static_problems(page)
    for p in problems:
        print(f"check_report: external reference: {p!r}")
    chromium = find_chromium()
    if chromium is None:
        print("check_report: no chromium found; install it with `apt-get update && apt-get install -y chromium`",
              file=sys.stderr)
        return 2
    result = browser_check(page, chromium)
    for name in result["broken"]:
        print(f"check_report: broken image: {name}")
    for name in result["broken_videos"]:
        print(f"check_report: broken video: {name}")
    ok = not problems and not result["broken"] and not result["broken_videos"] and result["images"] > 0
    videos = f"{result['videos']} videos, {len(result['broken_videos'])} broken, " if result["videos"] else ""
    print(f"check_report: {path}: {result['images']} images, {len(result['broken'])} broken, {videos}"
          f"{len(problems)} external references -> {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
