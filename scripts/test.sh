#!/usr/bin/env bash
# Build cft (Release, -Werror) and run the test suite. Fresh Debian 12, as root.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
bash scripts/fetch-digits.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCFT_WERROR=ON
cmake --build build -j2
cd build && ctest --output-on-failure -j2
