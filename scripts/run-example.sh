#!/usr/bin/env bash
# Build cft and run the per-sample-gradient (DP-SGD) example on the digits data.
# Extra arguments are passed to the example (e.g. --quick).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
bash scripts/fetch-digits.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j2
exec build/examples/per_sample_grads "$@"
