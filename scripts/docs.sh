#!/bin/bash
# scripts/docs.sh [BUILD_DIR]: builds cft's documentation site into
# BUILD_DIR/docs/html (default build/): the API reference from the public
# headers, the concepts page and the tutorials (docs/site), with Doxygen.
# Doxygen's warnings are errors (every public function, type and field
# documented). Then, unless CFT_DOCS_CHECK=0, scripts/docs-check.py checks
# every internal link of the built HTML, and headless Chromium (when
# installed) loads the index, searches for cft_vmap and saves a screenshot
# as BUILD_DIR/docs/index.png. No network is used.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$src/build}")
out=$build/docs
command -v doxygen >/dev/null || { echo "docs.sh: doxygen is not installed (apt-get install doxygen)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out"
version=$(sed -n 's/^project(cft VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
sed -e "s|@SRC@|$src|g" -e "s|@OUT@|$out|g" -e "s|@VERSION@|${version:-0}|g" \
    -e "s|@WARN_AS_ERROR@|${CFT_DOCS_WARN_AS_ERROR:-FAIL_ON_WARNINGS}|g" \
    "$src/docs/site/Doxyfile.in" > "$out/Doxyfile"
set +e
doxygen "$out/Doxyfile"
rc=$?
set -e
if [ -s "$out/warnings.log" ]; then
    echo "docs.sh: $(wc -l < "$out/warnings.log") Doxygen warnings:" >&2
    cat "$out/warnings.log" >&2
    exit 1
fi
[ $rc -eq 0 ] || { echo "docs.sh: doxygen failed ($rc)" >&2; exit $rc; }
echo "docs.sh: built $out/html ($(ls "$out/html"/*.html | wc -l) pages), 0 Doxygen warnings"
if [ "${CFT_DOCS_CHECK:-1}" != 0 ]; then
    python3 "$src/scripts/docs-check.py" "$out/html"
    if command -v chromium >/dev/null; then
        python3 "$src/scripts/docs-browse.py" "$out/html" "$out/index.png"
    else
        echo "docs.sh: chromium is not installed; the browser check was skipped" >&2
    fi
fi
