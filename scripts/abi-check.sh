#!/usr/bin/env bash
# The public ABI of libcft.so against the record in abi/: every exported
# cft_ symbol recorded there must still be exported, unless the soname
# moved (then update the record). New symbols are listed, not refused.
#   scripts/abi-check.sh BUILD_DIR            # check (ctest test_abi)
#   scripts/abi-check.sh BUILD_DIR --update   # rewrite abi/ from the build
set -euo pipefail
build="$(cd "$1" && pwd)"
root="$(cd "$(dirname "$0")/.." && pwd)"
lib="$build/libcft.so"
soname="$(objdump -p "$lib" | awk '/SONAME/ {print $2}')"
now="$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRV]$/ {print $3}' | grep '^cft_' | grep -v '^cft__' | sort -u)"
if [ "${2:-}" = "--update" ]; then
    echo "$soname" >"$root/abi/soname"
    echo "$now" >"$root/abi/symbols.txt"
    echo "abi: recorded $(echo "$now" | wc -l) symbols of $soname"
    exit 0
fi
was="$(cat "$root/abi/soname")"
gone="$(comm -23 "$root/abi/symbols.txt" <(echo "$now"))"
new="$(comm -13 "$root/abi/symbols.txt" <(echo "$now"))"
if [ -n "$new" ]; then
    echo "abi: new symbols (add them with --update): $(echo "$new" | tr '\n' ' ')"
fi
if [ -n "$gone" ] && [ "$soname" = "$was" ]; then
    echo "abi: symbols removed without a new soname ($soname):"
    echo "$gone"
    exit 1
fi
echo "abi: $soname exports every recorded symbol ($(echo "$now" | wc -l) now)"
