#!/usr/bin/env python3
"""scripts/docs-browse.py HTML_DIR SCREENSHOT.png: opens the built site in
headless Chromium (Debian's chromium; no network): the index page loads
and shows its tutorials and reference links and the search box; the search
finds cft_vmap (the results page Doxygen's search box opens, run by its own
JavaScript in the browser) and its link leads to cft_vmap's documentation;
a screenshot of the index page is saved. Exits 1 on a failure."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse


def chromium(*args):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as prof:
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                            "--no-first-run", "--virtual-time-budget=5000", f"--user-data-dir={prof}",
                            *args],
                           capture_output=True, text=True, timeout=120)
    return r.stdout


def main():
    root, shot = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2])
    fails = []
    index = "file://" + os.path.join(root, "index.html")
    dom = chromium("--dump-dom", index)
    for want in ("MSearchField", "Tutorials", "Concepts", "distributed training"):
        if want not in dom:
            fails.append(f"index.html: '{want}' not in the page the browser built")
    # the page the search box opens for a query: search.js picks it by the
    # query's first letter from searchdata.js
    data = open(os.path.join(root, "search", "searchdata.js")).read()
    letters = re.search(r'0: "([^"]*)"', data).group(1)
    page = os.path.join(root, "search", "all_%x.html" % letters.index("c"))
    dom = chromium("--dump-dom", "file://" + page + "?cft_vmap")
    m = re.search(r'<div id="SR_cft_5fvmap(?:_\d+)?" class="SRResult"[^>]*display: block[^>]*>'
                  r'.*?<a [^>]*href="([^"]+)"', dom, re.S)
    if not m:
        fails.append("search: cft_vmap not among the displayed results")
    else:
        u = urllib.parse.urlsplit(m.group(1).replace("&amp;", "&"))
        target = os.path.normpath(os.path.join(os.path.dirname(page), u.path))
        if not os.path.isfile(target) or u.fragment not in open(target).read():
            fails.append(f"search: cft_vmap's result links to {m.group(1)}, which is not there")
        else:
            print(f"docs-browse: the search finds cft_vmap -> {os.path.relpath(target, root)}"
                  f"#{u.fragment}")
    chromium(f"--screenshot={shot}", "--window-size=1280,1000", "--hide-scrollbars", index)
    if not os.path.isfile(shot) or os.path.getsize(shot) < 10000:
        fails.append(f"no screenshot at {shot}")
    else:
        print(f"docs-browse: screenshot of the index page: {shot}")
    for f in fails:
        print("docs-browse:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
