#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Bring a Debian 12 (bookworm) x86_64 machine to the point where nvrs can be
# built and tested: Debian packages, the Linux 7.3 source, a rust-src that
# matches `rustc --version`, bindgen, and our own Rust-enabled test kernel.
#
# Usage: tests/bootstrap.sh [check|bench|sanitize|qemu]
#
# Three kernels can be built: "check" (the default: tests/kernel.config plus the
# debugging options of tests/kernel-debug.config, lockdep and kmemleak) for
# tests and the demo, "bench" (tests/kernel.config plus
# tests/kernel-bench.config, optimised for speed) for benchmarks, and
# "sanitize" (the check kernel plus tests/kernel-sanitize.config: KASAN,
# UBSAN, SLUB debugging, debug objects, fault injection; built with clang,
# which KASAN with Rust requires) for the sanitizer VM of `make check`.
#
# "qemu" builds, instead of a kernel, the QEMU that carries the GPU model
# (tests/model/nvrs-gpu.c): Debian's own source of the qemu-system-x86 this
# machine has (bookworm's 7.2), with the model added, for x86_64-softmmu only
# (about 2 minutes on 2 cores). It writes env-qemu.sh with NVRS_QEMU.
#
# Idempotent: every step checks whether its result already exists. The result
# is cached outside the repository, in $NVRS_CACHE (default
# ~/.cache/nvrs); each kernel build directory is keyed by the kernel package
# version, its config fragments and the rustc and bindgen versions, so a warm
# run costs seconds.
#
# On success it writes $NVRS_CACHE/env-<kernel>.sh (sourced by the other
# scripts) and prints its path. Every failure is one line starting with
# "bootstrap: error:".
#
# Environment:
#   NVRS_CACHE           cache directory (default ~/.cache/nvrs)
#   NVRS_DEBIAN_MIRROR   Debian mirror URI for the private apt configuration
#                        (default: the first one in this machine's apt sources)
#   NVRS_JOBS            parallel jobs for the kernel build (default: nproc)

set -euo pipefail

KVER_SERIES=7.3
LINUX_PKG=linux-source-$KVER_SERIES
BINDGEN_VERSION=0.73.2
LLVM_VERSION=19
SUITE=trixie-backports

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROFILE=${1:-check}
# KLLVM: the kernel's LLVM= setting; empty for a GCC-built kernel.
KLLVM=
case "$PROFILE" in
check) FRAGMENTS=("$HERE/kernel.config" "$HERE/kernel-debug.config") ;;
bench) FRAGMENTS=("$HERE/kernel.config" "$HERE/kernel-bench.config") ;;
sanitize)
	FRAGMENTS=("$HERE/kernel.config" "$HERE/kernel-debug.config" "$HERE/kernel-sanitize.config")
	KLLVM=-$LLVM_VERSION
	;;
qemu) FRAGMENTS=() ;;
*) echo "bootstrap: error: unknown kernel '$PROFILE' (check, bench, sanitize or qemu)" >&2; exit 1 ;;
esac
CACHE=${NVRS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvrs}
JOBS=${NVRS_JOBS:-$(nproc)}

die() { echo "bootstrap: error: $*" >&2; exit 1; }
say() { echo "bootstrap: $*" >&2; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

mkdir -p "$CACHE"

# --- 1. Debian packages --------------------------------------------------
APT_PKGS="build-essential flex bison bc libelf-dev libssl-dev cpio kmod
	busybox-static qemu-system-x86 libclang-$LLVM_VERSION-dev python3 libc6-dev
	dpkg-dev xz-utils ca-certificates dkms"
# The sanitizer kernel is built with clang (KASAN with Rust needs it).
if [ -n "$KLLVM" ]; then
	APT_PKGS="$APT_PKGS clang-$LLVM_VERSION lld-$LLVM_VERSION llvm-$LLVM_VERSION"
fi
# QEMU's own build dependencies, for the features the test-bed uses.
if [ "$PROFILE" = qemu ]; then
	APT_PKGS="$APT_PKGS ninja-build meson pkg-config libglib2.0-dev libpixman-1-dev
		zlib1g-dev libfdt-dev"
fi
missing=""
for p in $APT_PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	say "installing Debian packages:$missing"
	as_root apt-get update -qq >/dev/null ||
		die "apt-get update failed (are the Debian mirrors reachable?)"
	# shellcheck disable=SC2086
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends $missing >/dev/null ||
		die "apt-get install of$missing failed"
fi
LIBCLANG_PATH=/usr/lib/llvm-$LLVM_VERSION/lib
[ -e "$LIBCLANG_PATH/libclang.so" ] || [ -e "$LIBCLANG_PATH/libclang.so.1" ] ||
	die "libclang $LLVM_VERSION not found in $LIBCLANG_PATH"

# --- 2. Private apt configuration for trixie-backports --------------------
# The machine's own sources stay untouched: we point apt at our own source
# list and list directory, and only ever `apt-get download` + `dpkg -x`.
mirror() {
	if [ -n "${NVRS_DEBIAN_MIRROR:-}" ]; then
		echo "$NVRS_DEBIAN_MIRROR"
		return
	fi
	local uri
	uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '{print $2}' | grep -v -- '-security' | head -n1 || true)
	if [ -z "$uri" ]; then
		uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null |
			awk '{print $2}' | grep -v -- '-security' | head -n1 || true)
	fi
	[ -n "$uri" ] || die "no Debian mirror in /etc/apt; set NVRS_DEBIAN_MIRROR"
	echo "$uri"
}

APTDIR=$CACHE/apt
APT_OPTS=(-o "Dir::Etc::SourceList=$APTDIR/sources.list"
	-o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::State::Lists=$APTDIR/lists"
	-o "Dir::Cache=$APTDIR/cache"
	-o "APT::Get::List-Cleanup=0")
apt_private_update() {
	mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(mirror) $SUITE main" \
		>"$APTDIR/sources.list"
	if [ -z "$(find "$APTDIR/lists" -name "*${SUITE}*Packages*" -mmin -1440 2>/dev/null)" ]; then
		say "refreshing the private $SUITE package list"
		apt-get "${APT_OPTS[@]}" update -qq >/dev/null 2>&1 ||
			die "apt-get update of $SUITE failed (private list in $APTDIR)"
	fi
}

# fetch PKG VERSION DEST: download one .deb and unpack it into DEST.
fetch_deb() {
	local pkg=$1 ver=$2 dest=$3
	[ -e "$dest/.done" ] && return
	say "fetching $pkg $ver"
	rm -rf "$dest" "$dest.tmp"
	mkdir -p "$dest.tmp"
	(cd "$dest.tmp" && apt-get "${APT_OPTS[@]}" download -qq "$pkg=$ver" >/dev/null 2>&1) ||
		die "could not download $pkg=$ver from $SUITE"
	dpkg -x "$dest.tmp"/*.deb "$dest.tmp/root" ||
		die "could not unpack $pkg"
	mkdir -p "$dest"
	mv "$dest.tmp/root"/* "$dest/"
	rm -rf "$dest.tmp"
	touch "$dest/.done"
}

# Version of PKG in the private lists whose upstream part starts with PREFIX.
pkg_version() {
	apt-cache "${APT_OPTS[@]}" madison "$1" 2>/dev/null |
		awk -F'|' '{gsub(/ /, "", $2); print $2}' |
		grep -E "^(1:)?$2" | head -n1 || true
}

# --- 2b. The QEMU with the GPU model (profile "qemu" only) -----------------
# Built from Debian's source of the qemu-system-x86 the other VMs run (so both
# QEMUs are the same code and patches), plus tests/model/nvrs-gpu.c. Keyed by
# that version, the configure flags, the model's source and the compiler.
if [ "$PROFILE" = qemu ]; then
	QAPT=$CACHE/apt-src
	QAPT_OPTS=(-o "Dir::Etc::SourceList=$QAPT/sources.list"
		-o "Dir::Etc::SourceParts=/dev/null"
		-o "Dir::State::Lists=$QAPT/lists"
		-o "Dir::Cache=$QAPT/cache"
		-o "APT::Get::List-Cleanup=0")
	QVER=$(dpkg-query -W -f='${source:Version}' qemu-system-x86)
	[ -n "$QVER" ] || die "qemu-system-x86 is not installed"
	# The model is written against QEMU 7.2's device API (Debian 12's QEMU).
	case "$QVER" in
	1:7.2+*) ;;
	*) die "the GPU model needs Debian 12's QEMU 7.2; qemu-system-x86 is $QVER" ;;
	esac
	# The firmware path is Debian's: the BIOS and option ROMs of its packages.
	QFLAGS=(--target-list=x86_64-softmmu --without-default-features --enable-tcg
		--enable-kvm --enable-fdt=system --disable-docs --disable-tools
		--disable-user --disable-werror
		--firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu)
	QKEY=$( (echo "$QVER"; echo "${QFLAGS[*]}"; cat "$HERE/model/nvrs-gpu.c";
		gcc --version | head -n1) | sha256sum | cut -c1-16)
	QDIR=$CACHE/qemu-$QKEY
	QSRC=$CACHE/qemu-source-${QVER#*:}
	if [ ! -e "$QSRC/.done" ]; then
		say "fetching Debian's qemu $QVER source"
		rm -rf "$QSRC" "$QSRC.tmp"
		mkdir -p "$QAPT/lists/partial" "$QAPT/cache/archives/partial" "$QSRC.tmp"
		codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
		# The security suite too: the installed version may come from it.
		security=$(grep -hE '^URIs:.*-security' /etc/apt/sources.list.d/*.sources 2>/dev/null |
			awk '{print $2}' | head -n1 || true)
		[ -n "$security" ] || security=$(grep -hE '^deb .*-security' /etc/apt/sources.list \
			2>/dev/null | awk '{print $2}' | head -n1 || true)
		{
			for suite in "$codename" "$codename-updates"; do
				echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(mirror) $suite main"
			done
			if [ -n "$security" ]; then
				echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $security $codename-security main"
			fi
		} >"$QAPT/sources.list"
		apt-get "${QAPT_OPTS[@]}" update -qq >/dev/null 2>&1 ||
			die "apt-get update of the $codename source lists failed"
		(cd "$QSRC.tmp" && apt-get "${QAPT_OPTS[@]}" source -qq --download-only \
			"qemu=$QVER" >/dev/null 2>&1) ||
			die "could not download the source of qemu $QVER"
		dpkg-source -x -q "$QSRC.tmp"/qemu_*.dsc "$QSRC.tmp/src" >/dev/null 2>&1 ||
			die "could not unpack the qemu source"
		mv "$QSRC.tmp/src" "$QSRC"
		rm -rf "$QSRC.tmp"
		touch "$QSRC/.done"
	fi
	if [ ! -e "$QDIR/.done" ]; then
		say "building QEMU with the GPU model in $QDIR (about 2 minutes on 2 cores)"
		rm -rf "$QDIR"
		mkdir -p "$QDIR"
		log=$QDIR/build.log
		# A copy of the source per key: the model is added to hw/misc.
		cp -a "$QSRC" "$QDIR/src"
		cp "$HERE/model/nvrs-gpu.c" "$QDIR/src/hw/misc/nvrs-gpu.c"
		echo "softmmu_ss.add(when: 'CONFIG_PCI', if_true: files('nvrs-gpu.c'))" \
			>>"$QDIR/src/hw/misc/meson.build"
		mkdir -p "$QDIR/src/build"
		{
			(cd "$QDIR/src/build" && ../configure "${QFLAGS[@]}") &&
			ninja -C "$QDIR/src/build" -j"$JOBS" qemu-system-x86_64
		} >"$log" 2>&1 || die "QEMU build failed (log: $log)"
		cp "$QDIR/src/build/qemu-system-x86_64" "$QDIR/qemu-system-x86_64"
		"$QDIR/qemu-system-x86_64" -device help 2>/dev/null | grep -q '"nvrs-gpu"' ||
			die "the QEMU built in $QDIR has no nvrs-gpu device"
		# The build tree is not needed once the binary works.
		rm -rf "$QDIR/src"
		touch "$QDIR/.done"
	fi
	cat >"$CACHE/env-qemu.sh" <<EOF
# Written by nvrs tests/bootstrap.sh; sourced by the test scripts.
export NVRS_CACHE='$CACHE'
export NVRS_QEMU='$QDIR/qemu-system-x86_64'
export NVRS_QEMU_SRC='$QSRC'
EOF
	echo "$CACHE/env-qemu.sh"
	exit 0
fi

RUSTC_VERSION=$(rustc --version | awk '{print $2}')
[ -n "$RUSTC_VERSION" ] || die "rustc not found"

LINUX_VER_FILE=$CACHE/linux-source.version
RUSTSRC_DIR=$CACHE/rust-src-$RUSTC_VERSION
if [ ! -s "$LINUX_VER_FILE" ] || [ ! -e "$RUSTSRC_DIR/.done" ] ||
	[ ! -e "$CACHE/linux-source-$(cat "$LINUX_VER_FILE" 2>/dev/null)/.done" ]; then
	apt_private_update
	lv=$(pkg_version "$LINUX_PKG" "$KVER_SERIES")
	[ -n "$lv" ] || die "$LINUX_PKG is not in $SUITE"
	fetch_deb "$LINUX_PKG" "$lv" "$CACHE/linux-source-$lv"
	echo "$lv" >"$LINUX_VER_FILE"
	rv=$(pkg_version rust-src "$RUSTC_VERSION+")
	[ -n "$rv" ] || die "no rust-src $RUSTC_VERSION in $SUITE (rustc is $RUSTC_VERSION)"
	fetch_deb rust-src "$rv" "$RUSTSRC_DIR"
fi
LINUX_DEB_VERSION=$(cat "$LINUX_VER_FILE")
RUST_LIB_SRC=$RUSTSRC_DIR/usr/lib/rustlib/src/rust/library
[ -d "$RUST_LIB_SRC/core" ] || die "rust-src unpacked without library/core"

# --- 3. bindgen ------------------------------------------------------------
BINDGEN=$CACHE/tools/bin/bindgen
if [ ! -x "$BINDGEN" ] || ! "$BINDGEN" --version | grep -q "$BINDGEN_VERSION"; then
	say "building bindgen-cli $BINDGEN_VERSION (about 2 minutes)"
	cargo install -q --locked bindgen-cli --version "$BINDGEN_VERSION" \
		--root "$CACHE/tools" >"$CACHE/bindgen-install.log" 2>&1 ||
		die "cargo install bindgen-cli failed (log: $CACHE/bindgen-install.log)"
fi

# --- 4. The test kernel --------------------------------------------------
SRC=$CACHE/linux-$LINUX_DEB_VERSION
if [ ! -e "$SRC/.done" ]; then
	say "unpacking the kernel source"
	rm -rf "$SRC" "$SRC.tmp"
	mkdir -p "$SRC.tmp"
	tar -C "$SRC.tmp" -xf "$CACHE/linux-source-$LINUX_DEB_VERSION/usr/src/$LINUX_PKG.tar.xz" ||
		die "could not unpack the kernel source"
	mv "$SRC.tmp/$LINUX_PKG" "$SRC"
	rmdir "$SRC.tmp"
	touch "$SRC/.done"
fi

KEY=$( (echo "$LINUX_DEB_VERSION"; cat "${FRAGMENTS[@]}"; rustc -vV;
	"$BINDGEN" --version; echo "llvm $LLVM_VERSION"; echo "kernel LLVM=$KLLVM") |
	sha256sum | cut -c1-16)
KDIR=$CACHE/build-$KVER_SERIES-$KEY
KMAKE=(make -C "$SRC" O="$KDIR" RUST_LIB_SRC="$RUST_LIB_SRC"
	BINDGEN="$BINDGEN")
if [ -n "$KLLVM" ]; then
	KMAKE+=(LLVM="$KLLVM")
fi
export LIBCLANG_PATH

if [ ! -e "$KDIR/.done" ]; then
	say "building the $PROFILE kernel in $KDIR (about 8 minutes on 2 cores)"
	mkdir -p "$KDIR"
	log=$KDIR/build.log
	{
		"${KMAKE[@]}" tinyconfig &&
		"$SRC/scripts/kconfig/merge_config.sh" -m -O "$KDIR" \
			"$KDIR/.config" "${FRAGMENTS[@]}" &&
		"${KMAKE[@]}" olddefconfig &&
		"${KMAKE[@]}" rustavailable
	} >"$log" 2>&1 || die "kernel configuration failed (log: $log)"
	# Every option the fragments ask for must have survived olddefconfig.
	cat "${FRAGMENTS[@]}" | grep -E '^CONFIG_[A-Z0-9_]+=[ym]$' | while read -r want; do
		grep -qx "$want" "$KDIR/.config" ||
			die "kernel option lost in olddefconfig: $want"
	done
	# ... and every option they turn off must be off.
	cat "${FRAGMENTS[@]}" | sed -n 's/^# \(CONFIG_[A-Z0-9_]*\) is not set$/\1/p' |
		while read -r off; do
			! grep -qE "^$off=[ym]$" "$KDIR/.config" ||
				die "kernel option still set after olddefconfig: $off"
		done
	"${KMAKE[@]}" -j"$JOBS" bzImage modules >>"$log" 2>&1 ||
		die "kernel build failed (log: $log)"
	touch "$KDIR/.done"
fi

cat >"$CACHE/env-$PROFILE.sh" <<EOF
# Written by nvrs tests/bootstrap.sh; sourced by the test scripts.
export NVRS_CACHE='$CACHE'
export KDIR='$KDIR'
export KSRC='$SRC'
export BZIMAGE='$KDIR/arch/x86/boot/bzImage'
export RUST_LIB_SRC='$RUST_LIB_SRC'
export BINDGEN='$BINDGEN'
export LIBCLANG_PATH='$LIBCLANG_PATH'
export KLLVM='$KLLVM'
EOF
echo "$CACHE/env-$PROFILE.sh"
