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
echo
# Acceptance 3 of issue 15: SGEMM 512^3 and resnet50's convolutions against the
# measured FMA peak, built as a generated project builds (-O3 -march=native).
cc -O3 -march=native -std=c99 -Wall -Wextra -Werror -pedantic -D_POSIX_C_SOURCE=200809L -Iruntime \
  bench/sgemm_peak.c runtime/sgemm.c runtime/conv.c runtime/common.c -lm -o "$BUILD/sgemm_peak"
uptime
taskset -c "${BENCH_CORES:-1}" "$BUILD/sgemm_peak" resnet50
echo
# Issue 17 acceptance 2: int8 resnet50 against fp32 on one thread, side by side.
bash bench/int8_speed.sh "$BUILD"
