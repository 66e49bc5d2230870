#!/bin/bash
# scripts/docs.sh [BUILD_DIR]: builds cft's documentation site into
# BUILD_DIR/docs/html (default build/) with Doxygen: the API reference from
# the public headers (warnings are errors: every public function, type,
# field and macro documented), the concepts and guides pages, and the
# tutorials, whose code is cut from examples/ and whose output is what the
# example tests printed in the last ctest run of BUILD_DIR (kept in
# BUILD_DIR/docs-out by scripts/capture.sh). Then, unless CFT_DOCS_CHECK=0:
# scripts/docs-check.py checks every internal link, and headless Chromium
# (scripts/docs-browse.py) loads the index, searches for cft_vmap and saves
# a screenshot as BUILD_DIR/docs/index.png. No network is used.
#   CFT_DOCS_REQUIRE_OUTPUT=1  fail when an example's output is missing
#                              (otherwise the page says to run ctest)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$src/build}")
out=$build/docs
# Debian's doxygen (and chromium for the browser check), installed as the
# other scripts install their dependencies: when missing and run as root
if { ! command -v doxygen || ! command -v chromium; } >/dev/null && [ "$(id -u)" = 0 ] &&
    [ "${CFT_DOCS_NO_INSTALL:-0}" != 1 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends doxygen chromium >/dev/null || true
fi
command -v doxygen >/dev/null || { echo "docs.sh: doxygen is not installed (apt-get install doxygen)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out/outputs"

# the examples' outputs and pictures made from them
missing=0
for f in $(grep -rhoE '\\verbinclude +[A-Za-z0-9_.-]+' "$src/docs/site" | awk '{print $2}' | sort -u); do
    if [ -s "$build/docs-out/$f" ]; then
        cp "$build/docs-out/$f" "$out/outputs/$f"
    else
        missing=$((missing + 1))
        echo "docs.sh: no output $build/docs-out/$f (run ctest in $build first)" >&2
        echo "(run ctest in the build directory to see this program's output here)" > "$out/outputs/$f"
    fi
done
if [ -s "$build/docs-out/trace.json" ]; then
    python3 "$src/scripts/trace-svg.py" "$build/docs-out/trace.json" "$out/outputs/trace.svg"
else
    missing=$((missing + 1))
    echo '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="20"><text y="14">(no trace: run ctest first)</text></svg>' > "$out/outputs/trace.svg"
fi
if [ "$missing" -gt 0 ] && [ "${CFT_DOCS_REQUIRE_OUTPUT:-0}" = 1 ]; then
    echo "docs.sh: $missing outputs missing" >&2
    exit 1
fi

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
nfun=$(grep -ho 'class="memname"' "$out"/html/group__*.html | wc -l)
echo "docs.sh: built $out/html: $(find "$out/html" -name '*.html' | wc -l) pages," \
    "$nfun documented members in the module pages, 0 Doxygen warnings"
if [ "${CFT_DOCS_CHECK:-1}" != 0 ]; then
    python3 "$src/scripts/docs-check.py" "$out/html" "$src"
    if command -v chromium >/dev/null; then
        python3 "$src/scripts/docs-browse.py" "$out/html" "$out/index.png"
    else
        echo "docs.sh: chromium is not installed; the browser check was skipped" >&2
    fi
fi
