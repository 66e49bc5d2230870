#!/usr/bin/env bash
# ctest: the training-curve path end to end: an example writes its --log
# CSV, scripts/plot.sh draws it with gnuplot into a PNG, which must exist
# and be a PNG. Skipped (77) where gnuplot is not installed (.ci/run
# installs it).
#   scripts/test-plot.sh BUILD_DIR
set -euo pipefail
build=$1
command -v gnuplot >/dev/null || { echo "gnuplot not installed: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$build/examples/dp_sgd_digits" --quick --log "$dir/dp.csv" >/dev/null
bash "$(dirname "$0")/plot.sh" "$dir/dp.csv" "$dir/dp.png" epsilon test_accuracy
[ "$(head -c 4 "$dir/dp.png" | od -An -c | tr -d ' ')" = "211PNG" ]
[ "$(wc -l <"$dir/dp.csv")" -eq 11 ] # the header and 10 epochs
echo "test-plot: the curve of $(($(wc -l <"$dir/dp.csv") - 1)) epochs drawn"
