#!/usr/bin/env python3
"""scripts/docs-check.py HTML_DIR [SRC_DIR]: checks the built documentation
site (scripts/docs.sh): every internal link, image, script and stylesheet
of every page resolves to a file of the site, and every #fragment to an id
or name in that file; the README's C example is examples/quickstart.c word
for word. External links are not followed (no network). Exits 1 listing
what is broken."""
import html.parser
import os
import sys
import urllib.parse


class Refs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.refs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("id", "name"):
            if a.get(k):
                self.ids.add(a[k])
        for k in ("href", "src"):
            if a.get(k) and tag in ("a", "img", "script", "link", "iframe", "area"):
                self.refs.append(a[k])


def parse(path, cache={}):
    if path not in cache:
        p = Refs()
        with open(path, encoding="utf-8", errors="replace") as f:
            p.feed(f.read())
        cache[path] = p
    return cache[path]


def main():
    root = os.path.realpath(sys.argv[1])
    src = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..")
    bad, pages, links = [], 0, 0
    for d, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".html"):
                continue
            page = os.path.join(d, name)
            pages += 1
            for ref in parse(page).refs:
                u = urllib.parse.urlsplit(ref)
                if u.scheme in ("http", "https", "mailto", "javascript", "data") or u.netloc:
                    continue
                links += 1
                target = page if not u.path else os.path.normpath(
                    os.path.join(d, urllib.parse.unquote(u.path)))
                if not target.startswith(root) or not os.path.isfile(target):
                    bad.append(f"{os.path.relpath(page, root)}: {ref}: no such file")
                    continue
                if u.fragment and target.endswith(".html"):
                    if u.fragment not in parse(target).ids:
                        bad.append(f"{os.path.relpath(page, root)}: {ref}: no anchor")
    readme = open(os.path.join(src, "README.md"), encoding="utf-8").read()
    quick = open(os.path.join(src, "examples", "quickstart.c"), encoding="utf-8").read()
    if "```c\n" + quick + "```" not in readme:
        bad.append("README.md: its C example is not examples/quickstart.c")
    for b in bad[:200]:
        print("docs-check:", b)
    print(f"docs-check: {pages} pages, {links} internal links, {len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
