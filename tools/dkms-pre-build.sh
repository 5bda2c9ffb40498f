#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# DKMS pre-build check (dkms.conf): the kernel tree can build a Rust module.
#   tools/dkms-pre-build.sh KERNEL_BUILD_DIR
# Prints one line and fails if the tree has no Rust metadata, was built by
# another rustc than the one on PATH, or bindgen (BINDGEN, or on PATH) is
# missing.

kdir=$1
if [ ! -e "$kdir/rust/kernel.rmeta" ] && [ ! -e "$kdir/rust/libkernel.rmeta" ]; then
	echo "nvrs: $kdir has no compiled Rust metadata (rust/*.rmeta): nvrs needs a full CONFIG_RUST=y kernel build tree" >&2
	exit 1
fi
want=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$kdir/include/config/auto.conf" 2>/dev/null)
have=$(rustc --version 2>/dev/null)
if [ -n "$want" ] && [ "$want" != "$have" ]; then
	echo "nvrs: the kernel was built with '$want' but rustc is '${have:-missing}'" >&2
	exit 1
fi
bindgen=${BINDGEN:-bindgen}
if ! command -v "$bindgen" >/dev/null 2>&1; then
	echo "nvrs: '$bindgen' not found: nvrs generates the Rust declarations of rust/helpers.h with bindgen at build time (set BINDGEN)" >&2
	exit 1
fi
exit 0
