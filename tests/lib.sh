# SPDX-License-Identifier: GPL-2.0
#
# Shared by tests/check.sh, tests/demo.sh and tests/bench.sh: bootstrap the
# machine and build the module and the C consumer against the test kernel.

set -euo pipefail

TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$TESTS")
OUT=$ROOT/tests/out
mkdir -p "$OUT"

# nvrs_bootstrap [check|bench|sanitize|qemu]: bring up the toolchain and the
# cached kernel (or the QEMU with the GPU model), then load its paths.
nvrs_bootstrap() {
	local env
	env=$("$TESTS/bootstrap.sh" "${1:-check}")
	# shellcheck disable=SC1090
	. "$env"
}

# Build nvrs.ko and tests/consumer/nvrs_consumer.ko against $KDIR. The
# module is a test build (NVRS_TESTING=1: fault controls, delay points and
# their parameters), which every VM suite needs; the DKMS package in
# `make check` is the production build, and is checked to have none of it.
nvrs_build() {
	# Lint with clippy when the toolchain has it (the kernel's own lint set).
	local clippy=
	command -v clippy-driver >/dev/null && clippy=CLIPPY=1
	make -s -C "$ROOT" KDIR="$KDIR" NVRS_BENCH="${NVRS_BENCH:-0}" NVRS_TESTING=1 $clippy modules \
		>"$OUT/build.log" 2>&1 || {
		cat "$OUT/build.log"
		echo "error: building nvrs.ko failed" >&2
		return 1
	}
	make -s -C "$ROOT/tests/consumer" KDIR="$KDIR" \
		NVRS_SYMVERS="$ROOT/Module.symvers" >>"$OUT/build.log" 2>&1 || {
		cat "$OUT/build.log"
		echo "error: building nvrs_consumer.ko failed" >&2
		return 1
	}
	# nvrs-smi, static (it runs in the VM's busybox initramfs).
	CARGO_TARGET_DIR="$OUT/smi-target" RUSTFLAGS="-C target-feature=+crt-static" \
		cargo build --release --locked --target x86_64-unknown-linux-gnu \
		--manifest-path "$ROOT/tools/nvrs-smi/Cargo.toml" >>"$OUT/build.log" 2>&1 &&
		cp "$OUT/smi-target/x86_64-unknown-linux-gnu/release/nvrs-smi" "$OUT/nvrs-smi" || {
		cat "$OUT/build.log"
		echo "error: building nvrs-smi failed" >&2
		return 1
	}
	for t in nvrs-tool nvrs-fuzz nvrs-model-test; do
		gcc -static -O2 -Wall -Wextra -Werror -pthread -I "$ROOT/include/uapi" \
			-o "$OUT/$t" "$ROOT/tests/tools/$t.c" >>"$OUT/build.log" 2>&1 || {
			cat "$OUT/build.log"
			echo "error: building $t failed" >&2
			return 1
		}
	done
	if grep -qE '(^|: )(warning|error)' "$OUT/build.log"; then
		cat "$OUT/build.log"
		echo "error: the build is not warning-free" >&2
		return 1
	fi
}

# The modules every VM run loads.
VM_MODULES=(--module "$ROOT/nvrs.ko" --module "$ROOT/tests/consumer/nvrs_consumer.ko"
	--bin "$OUT/nvrs-tool" --bin "$OUT/nvrs-fuzz" --bin "$OUT/nvrs-smi"
	--bin "$OUT/nvrs-model-test")

# nvrs_build_copy DIR MAKEVARS...: build nvrs.ko against $KDIR in a copy of
# the tree at DIR (so the tree's own build stays as it is), with MAKEVARS.
nvrs_build_copy() {
	local dir=$1
	shift
	rm -rf "$dir" &&
		mkdir -p "$dir" &&
		tar -C "$ROOT" --exclude=./tests/out --exclude=./tests/host/target --exclude=./.git \
			-cf - . | tar -C "$dir" -xf - &&
		{ make -s -C "$dir" KDIR="$KDIR" "$@" clean >/dev/null 2>&1 || true; } &&
		make -s -C "$dir" KDIR="$KDIR" "$@" modules
}

# nvrs_build_sanitize: build nvrs.ko and the test consumer against the
# sanitizer kernel (clang-built: KASAN with Rust needs it), in a copy of the
# tree ($OUT/sanitize) so the check build stays as it is. Sets SAN_ENV (the
# sanitizer kernel's environment file) and SAN; the kernel image's path is in
# $SAN/bzimage.
nvrs_build_sanitize() {
	SAN=$OUT/sanitize
	SAN_ENV=$("$TESTS/bootstrap.sh" sanitize) || return 1
	# Explicit &&: `set -e` does not apply in a function called as an `if` condition.
	(
		# shellcheck disable=SC1090
		. "$SAN_ENV" &&
			nvrs_build_copy "$SAN" LLVM="$KLLVM" NVRS_TESTING=1 >"$OUT/build-sanitize.log" 2>&1 &&
			make -s -C "$SAN/tests/consumer" KDIR="$KDIR" LLVM="$KLLVM" \
				NVRS_SYMVERS="$SAN/Module.symvers" >>"$OUT/build-sanitize.log" 2>&1 &&
			echo "$BZIMAGE" >"$SAN/bzimage"
	)
}
