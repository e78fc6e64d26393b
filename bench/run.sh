#!/bin/bash
# `make bench`: every benchmark, each printing a markdown table with its peers.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
bash bench/import_speed.sh "$BUILD"
echo
bash bench/interp_speed.sh "$BUILD"
echo
BENCH_THREADS="1 2" bash bench/cpu_speed.sh "$BUILD"
