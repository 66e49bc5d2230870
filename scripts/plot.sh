#!/usr/bin/env bash
# Draw a training curve from an example's --log CSV with gnuplot (Debian's
# gnuplot-nox):
#   scripts/plot.sh LOG.csv OUT.png XCOL YCOL [GROUPCOL] [TITLE]
# XCOL / YCOL / GROUPCOL are column names of the CSV header; with
# GROUPCOL, one line per value of that column (e.g. the method). OUT ending
# in .svg gives SVG, else PNG.
#   build/examples/dp_sgd_digits --log dp.csv && scripts/plot.sh dp.csv dp.png epsilon test_accuracy
#   build/examples/maml_sinusoid --quick --log maml.csv && \
#       scripts/plot.sh maml.csv maml.png meta_step query_loss method
set -euo pipefail
if [ $# -lt 4 ]; then
    sed -n '2,10p' "$0" >&2
    exit 2
fi
log=$1 out=$2 xcol=$3 ycol=$4 group=${5:-} title=${6:-}
command -v gnuplot >/dev/null || {
    echo "plot.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2
    exit 1
}
header=$(head -1 "$log")
col() { # the 1-based index of column $1 in the header
    local i=1 c
    IFS=, read -ra cols <<<"$header"
    for c in "${cols[@]}"; do
        [ "$c" = "$1" ] && { echo "$i"; return; }
        i=$((i + 1))
    done
    echo "plot.sh: no column '$1' in $log ($header)" >&2
    exit 1
}
xi=$(col "$xcol")
yi=$(col "$ycol")
case "$out" in
*.svg) term="svg size 720,440 dynamic" ;;
*) term="pngcairo size 720,440" ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plots=()
if [ -n "$group" ]; then
    gi=$(col "$group")
    # one data file per group value, rows in order
    while read -r g; do
        awk -F, -v gi="$gi" -v g="$g" -v xi="$xi" -v yi="$yi" \
            'NR > 1 && $gi == g { print $xi, $yi }' "$log" >"$tmp/$g.dat"
        plots+=("'$tmp/$g.dat' using 1:2 with lines lw 2 title '$g'")
    done < <(awk -F, -v gi="$gi" 'NR > 1 && !seen[$gi]++ { print $gi }' "$log")
else
    awk -F, -v xi="$xi" -v yi="$yi" 'NR > 1 { print $xi, $yi }' "$log" >"$tmp/all.dat"
    plots+=("'$tmp/all.dat' using 1:2 with linespoints lw 2 pt 7 ps 0.6 title '$ycol'")
fi
joined=$(printf '%s, ' "${plots[@]}")
gnuplot <<GP
set terminal $term
set output '$out'
set title '${title:-$ycol against $xcol}' noenhanced
set xlabel '$xcol' noenhanced
set ylabel '$ycol' noenhanced
set grid
set key below noenhanced
plot ${joined%, }
GP
echo "plot.sh: wrote $out"
