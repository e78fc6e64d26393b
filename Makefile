# Thin wrapper over CMake. `make test` and `make demo` are the README's commands.
SHELL := /bin/bash
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 600

# Every Debian package the build, the tests, the fixtures and the demo use.
# docs/dependencies.md says why each one is here.
DEB_PACKAGES := build-essential cmake pkg-config clang libclang-rt-14-dev \
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev \
  libxml2-dev libzip-dev libjansson-dev libcmocka-dev \
  python3-torch python3-torchvision python3-onnx python3-numpy python3-protobuf \
  jq time chromium hyperfine strace pyflakes3 python3-jsonschema \
  libc6-dev-arm64-cross libgcc-12-dev-arm64-cross qemu-user lld ccache libxml2-utils

.PHONY: all setup build build-asan test test-unit test-e2e test-asan test-zoo demo fuzz fuzz-smoke bench clean

all: build

setup:
	@tools/setup.sh $(DEB_PACKAGES)

$(BUILD)/Makefile: CMakeLists.txt
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: $(BUILD)/Makefile
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

build-asan:
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-O1 -g" -DMIGC_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) -- --no-print-directory

test: setup build build-asan
	@tests/run_all.sh $(BUILD) $(ASAN_BUILD)

test-zoo: setup build
	@tests/e2e/zoo.sh $(BUILD)
	@tests/e2e/mindspore_zoo.sh $(BUILD)
	@MIGC_AMP_SAMPLES=200 tests/e2e/mindspore_amp.sh $(BUILD)
	@MIGC_PRECISION_ZOO=1 tests/e2e/precision_profile.sh $(BUILD)
	@MIGC_INT8_ZOO=1 MIGC_INT8_CALIB=100 MIGC_INT8_EVAL=500 tests/e2e/int8.sh $(BUILD)
	@MIGC_CPU16_SAMPLES=200 MIGC_CPU16_ZOO=1 tests/e2e/cpu_precision.sh $(BUILD)
	@tests/e2e/batch_zoo.sh $(BUILD)
	@tests/e2e/batch_speed.sh $(BUILD)
	@MIGC_THREADS_MODELS="resnet50 vit_b_16" tests/e2e/cpu_threads.sh $(BUILD)

demo: setup build
	@tools/demo.sh $(BUILD)

fuzz: setup
	@tests/fuzz/run.sh $(FUZZ_SECONDS) all

fuzz-smoke: setup
	@tests/fuzz/run.sh 60

bench: setup build
	@bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
