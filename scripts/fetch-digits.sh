#!/usr/bin/env bash
# Fetch the real sklearn "digits" data set (1797 8x8 images) into data/digits.csv
# without Python: Debian 12's python3-sklearn package (arch: all) ships it as
# /usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz.
# Format: 1797 lines, 65 comma-separated integers: 64 pixels (0..16), then the label (0..9).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=data/digits.csv
PKG=python3-sklearn
MEMBER=usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz

if [ -f "$OUT" ]; then
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Let apt's unprivileged _apt user write into the download dir (avoids a sandbox warning).
if id _apt >/dev/null 2>&1; then
    chown _apt "$tmp" 2>/dev/null || true
fi

echo "fetch-digits: downloading $PKG"
if ! (cd "$tmp" && apt-get download "$PKG"); then
    echo "fetch-digits: download failed; running apt-get update and retrying"
    apt-get update
    (cd "$tmp" && apt-get download "$PKG")
fi

deb="$(ls "$tmp"/"$PKG"_*.deb | head -n 1)"
mkdir -p "$tmp/x"
dpkg-deb -x "$deb" "$tmp/x"
if [ ! -f "$tmp/x/$MEMBER" ]; then
    echo "fetch-digits: $MEMBER not found in $deb" >&2
    exit 1
fi
cp "$tmp/x/$MEMBER" "$tmp/digits.csv.gz"

mkdir -p data
gunzip -c "$tmp/digits.csv.gz" > "$OUT.tmp.$$"
lines="$(wc -l < "$OUT.tmp.$$")"
if [ "$lines" -ne 1797 ]; then
    rm -f "$OUT.tmp.$$"
    echo "fetch-digits: unexpected line count $lines (want 1797)" >&2
    exit 1
fi
mv "$OUT.tmp.$$" "$OUT"
echo "fetch-digits: wrote $OUT ($lines rows x 65 columns: 64 pixels 0..16, label 0..9)"
