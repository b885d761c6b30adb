#!/usr/bin/env bash
# gpu-check.sh: verify Switchyard's NVML support on a machine with an
# NVIDIA GPU, in a few minutes, with one command (from the repository or
# anywhere):
#
#   scripts/gpu-check.sh
#
# It needs Go 1.26 and the NVIDIA driver; a C compiler is installed with
# apt when missing (NVML needs cgo). Node is not needed: the binary embeds
# frontend/dist as it is, built or not. It
#   1. builds switchyard with cgo, so with NVML;
#   2. runs the NVML tests that need a real device (backend/gpu/nvml_real_test.go);
#   3. starts `switchyard serve` in front of the demo fleet's simulated
#      servers with a candidate mapped to GPU 0, prints what status and
#      /metrics report for each GPU (names, memory, processes), and checks
#      that a demotion threshold above GPU 0's free memory demotes that
#      candidate (scripts/gpucheck).
# It exits 0 when all of it holds, 1 when anything is wrong, saying what.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf 'gpu-check: %s\n' "$*"; }
die() {
	printf 'gpu-check: FAIL: %s\n' "$*" >&2
	exit 1
}

[ "$(uname -s)" = Linux ] || die "NVML is read on Linux only; this is $(uname -s)"
command -v go >/dev/null || die "no go on PATH: install Go 1.26"

# The driver: NVML is its libnvidia-ml.so.1, loaded at run time.
has_nvml() {
	ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1' && return 0
	local d
	for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib /usr/local/nvidia/lib64 /usr/local/cuda/lib64 ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }}; do
		[ -e "$d/libnvidia-ml.so.1" ] && return 0
	done
	return 1
}
has_nvml || die "no NVIDIA driver here (libnvidia-ml.so.1 not found): run this on a machine with an NVIDIA GPU and its driver"
if command -v nvidia-smi >/dev/null; then
	say "the driver sees: $(nvidia-smi -L 2>&1 | head -n 8 | tr '\n' ';')"
fi

# cgo: without a C compiler Go builds the NVML stub.
if [ "$(go env CGO_ENABLED)" != 1 ]; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	if command -v apt-get >/dev/null && { [ -z "$sudo" ] || command -v sudo >/dev/null; }; then
		say "no C compiler: installing gcc and libc6-dev (NVML needs cgo)"
		$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null
	fi
	[ "$(go env CGO_ENABLED)" = 1 ] || die "no C compiler, so no cgo and no NVML: install gcc"
fi

# go:embed needs frontend/dist to hold a file; a checkout has its .gitkeep.
if [ -z "$(ls -A frontend/dist 2>/dev/null)" ]; then
	mkdir -p frontend/dist && touch frontend/dist/.gitkeep
fi
[ -e frontend/dist/index.html ] || say "the UI is not built (no Node needed): the API is all this check uses"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

say "1/3 building switchyard with NVML"
go build -o "$work/switchyard" . || die "the build failed"
go version -m "$work/switchyard" | grep -q 'CGO_ENABLED=1' || die "the binary was built without cgo, so without NVML"

say "2/3 the NVML tests on the real device"
if ! out="$(go test -count=1 -v -run 'TestRealNVML' ./backend/gpu/ 2>&1)"; then
	printf '%s\n' "$out"
	die "the NVML tests failed"
fi
printf '%s\n' "$out" | grep -E '^\s+nvml_real_test' || true
if printf '%s\n' "$out" | grep -q 'no driver:'; then
	die "NVML found no GPU although the driver is here: $(printf '%s\n' "$out" | grep -m1 'no driver:')"
fi

say "3/3 switchyard serve in front of the demo fleet, a candidate on GPU 0"
go build -o "$work/gpucheck" ./scripts/gpucheck || die "the check's build failed"
"$work/gpucheck" -bin "$work/switchyard" -dir "$work" || die "switchyard does not read or use the GPU as it should (above)"
say "every check passed: NVML reads this machine's GPUs and demotes by them"
