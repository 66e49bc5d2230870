#!/bin/sh
# scripts/capture.sh OUT CMD [ARGS...]: runs CMD, shows its stdout and
# stderr, and when it succeeds keeps them in OUT as well: the example tests
# run through it so that the tutorials (scripts/docs.sh) show the output
# the programs printed in the last test run, never text written by hand.
out=$1
shift
mkdir -p "$(dirname "$out")"
"$@" > "$out.part" 2>&1
rc=$?
cat "$out.part"
if [ $rc -eq 0 ]; then mv "$out.part" "$out"; else rm -f "$out.part"; fi
exit $rc
