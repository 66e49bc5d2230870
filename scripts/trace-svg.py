#!/usr/bin/env python3
"""scripts/trace-svg.py TRACE.json OUT.svg [MS]: draws a Chrome trace
written by cft_profile_stop as an SVG timeline, for the docs (the same file
opens interactively in Perfetto or chrome://tracing): one lane per thread,
one box per complete event ("X"), nested events one row below their
caller; the first MS milliseconds (default all). Colours are by event name; the longest names are labelled."""
import colorsys
import hashlib
import html
import json
import sys


def colour(name):
    h = int(hashlib.md5(name.encode()).hexdigest()[:6], 16) / 0xFFFFFF
    r, g, b = colorsys.hls_to_rgb(h, 0.72, 0.55)
    return "#%02x%02x%02x" % (int(r * 255), int(g * 255), int(b * 255))


def main():
    ev = json.load(open(sys.argv[1]))["traceEvents"]
    limit = float(sys.argv[3]) * 1e3 if len(sys.argv) > 3 else None
    xs = [e for e in ev if e.get("ph") == "X"]
    if not xs:
        sys.exit("trace-svg: no complete events")
    t0 = min(e["ts"] for e in xs)
    t1 = max(e["ts"] + e["dur"] for e in xs)
    if limit:
        t1 = min(t1, t0 + limit)
        xs = [e for e in xs if e["ts"] < t1]
    tids = sorted({e["tid"] for e in xs}, key=lambda t: min(e["ts"] for e in xs if e["tid"] == t))
    W, left, rowh = 1200, 90, 16
    scale = (W - left - 10) / (t1 - t0)
    # depth of each event within its thread: the number of open enclosing events
    depth, lanes = {}, {}
    for t in tids:
        stack, mx = [], 0
        for e in sorted((e for e in xs if e["tid"] == t), key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            depth[id(e)] = len(stack)
            mx = max(mx, len(stack))
            stack.append(e["ts"] + e["dur"])
        lanes[t] = mx + 1
    y, top, out = 30, {}, []
    for t in tids:
        top[t] = y
        y += lanes[t] * rowh + 14
    H = y + 30
    out.append(f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
               f'font-family="sans-serif" font-size="10">')
    out.append(f'<rect width="{W}" height="{H}" fill="white"/>')
    out.append(f'<text x="{left}" y="16" font-size="12">{len(xs)} events, '
               f'{(t1 - t0) / 1e3:.2f} ms (cft_profile_stop trace)</text>')
    for i, t in enumerate(tids):
        out.append(f'<text x="4" y="{top[t] + 11}">thread {i}</text>')
        out.append(f'<line x1="{left}" x2="{W - 10}" y1="{top[t] - 4}" y2="{top[t] - 4}" '
                   'stroke="#ddd"/>')
    for e in xs:
        x = left + (e["ts"] - t0) * scale
        w = max(e["dur"] * scale, 0.5)
        yy = top[e["tid"]] + depth[id(e)] * rowh
        name = html.escape(e["name"])
        out.append(f'<rect x="{x:.1f}" y="{yy}" width="{w:.1f}" height="{rowh - 2}" '
                   f'fill="{colour(e["name"])}" stroke="#555" stroke-width="0.3">'
                   f'<title>{name} {e["dur"]:.1f} us</title></rect>')
        if w > 6 * len(e["name"]):
            out.append(f'<text x="{x + 2:.1f}" y="{yy + 11}">{name}</text>')
    for k in range(6):  # a time axis
        x = left + k * (W - left - 10) / 5
        out.append(f'<text x="{x:.0f}" y="{H - 10}">{k * (t1 - t0) / 5e3:.2f} ms</text>')
    out.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(out))


if __name__ == "__main__":
    main()
