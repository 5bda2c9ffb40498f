# SPDX-License-Identifier: GPL-2.0
#
# TAP helpers for scenario scripts running in the test VM. Every result line
# is prefixed with "nvrs-tap:" so the runner can tell it from kernel output.

_n=0

ok() {
	_n=$((_n + 1))
	echo "nvrs-tap: ok $_n - $*"
}

not_ok() {
	_n=$((_n + 1))
	echo "nvrs-tap: not ok $_n - $*"
}

# check DESCRIPTION COMMAND...: ok if COMMAND succeeds.
check() {
	_d=$1
	shift
	if "$@" >/dev/null 2>&1; then ok "$_d"; else not_ok "$_d"; fi
}

# expect_eq DESCRIPTION EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1 (expected '$2', got '$3')"
	fi
}

# done_testing: the last line of every scenario. A scenario that stops early
# (a shell error, a killed process) never prints it, and the runner fails it.
done_testing() {
	echo "nvrs-tap: done $_n"
}

diag() {
	echo "nvrs-tap: # $*"
}

# demo TEXT: a line the demo shows the user.
demo() {
	echo "nvrs-demo: $*"
}

# The PCI functions of vendor:device ($1 $2).
pci_functions() {
	for d in /sys/bus/pci/devices/*; do
		if [ "$(cat $d/vendor)" = "$1" ] && [ "$(cat $d/device)" = "$2" ]; then
			basename $d
		fi
	done
}

# model_fields SPEC: sets chip boot0 boot42 dev vram bar1 mmu from one entry of
# $NVRS_MODEL_GPUS (CHIP:BOOT0:BOOT42:DEVICE:VRAM_MIB:BAR1_MIB:MMU, tests/vm/run.py).
model_fields() {
	IFS=: read -r chip boot0 boot42 dev vram bar1 mmu <<EOF
$1
EOF
}

# Functions bound to the nvrs driver.
nvrs_bound() {
	ls /sys/bus/pci/drivers/nvrs 2>/dev/null | grep '^0000:' || true
}

# Tells the runner where each GPU's aperture is, so that it can check the
# bytes edu wrote by DMA in the GPUs' backing files after the VM has stopped.
announce_apertures() {
	for _b in $(nvrs_bound); do
		_i=$(sed -n 's/^emulated_index: //p' /sys/kernel/debug/nvrs/$_b/info)
		_p=$(sed -n 's/^aperture: BAR resource [0-9]* at \(0x[0-9a-f]*\),.*/\1/p' \
			/sys/kernel/debug/nvrs/$_b/info)
		echo "nvrs-hostcheck: gpu $_i $_p"
	done
}

# dmesg lines since the last call of dmesg_mark. The mark is a unique line
# written to the kernel log, not a line count: once the log buffer is full, old
# lines fall out and a count would skip new ones. A mark that fell out itself
# (more than a buffer of messages since) gives no lines, so a check that
# expects one fails rather than passing.
dmesg_mark() {
	_dmesg_tag="scenario mark $$ $(date +%s%N)"
	echo "$_dmesg_tag" >/dev/kmsg
}

dmesg_new() {
	dmesg | awk -v tag="$_dmesg_tag" 'seen { print } index($0, tag) { seen = 1 }'
}

# tool DESCRIPTION ARGS...: one nvrs-tool run (one process) as one test; its
# output is shown as diagnostics and left in /tmp/tool.out.
tool() {
	_d=$1
	shift
	if nvrs-tool "$@" >/tmp/tool.out 2>&1; then
		ok "$_d"
	else
		not_ok "$_d"
	fi
	while IFS= read -r l; do diag "  $l"; done </tmp/tool.out
}

# In an nvrs-tool command list: have the VM runner check the bytes peers
# wrote by DMA while the memory is still allocated.
HOSTSYNC="sh /scenarios/hostsync.sh"

# Bytes of GPU memory nvrs manages on the GPU at PCI address $1.
fb_total() {
	sed -n "s/^total_bytes: \([0-9]*\).*/\1/p" /sys/kernel/debug/nvrs/$1/pmm/stats
}

# check_all_returned: no pin is left and every bound GPU's memory is free.
# Every GPU must be bound: with none, the loop would check nothing. The
# emulated GPUs, and the GPU models too where the scenario loaded nvrs to bind
# them (it sets NVRS_BOUND to the number it expects).
check_all_returned() {
	_bound=${NVRS_BOUND:-$NVRS_GPUS}
	check "no pins left" grep -qx "pins: 0" /sys/kernel/debug/nvrs/p2p
	expect_eq "all $_bound GPUs bound, to check their memory" "$_bound" "$(nvrs_bound | wc -l)"
	for _g in $(nvrs_bound); do
		check "$_g memory all free again" sh -c \
			"grep -q \"^free_bytes: $(fb_total $_g)\$\" /sys/kernel/debug/nvrs/$_g/pmm/stats"
	done
}

# send_file PATH NAME: sends a file out of the VM; the runner writes it as NAME
# in its --files directory (tests/out/files for make check and make demo).
send_file() {
	base64 "$1" | while IFS= read -r _l; do echo "nvrs-file: $2 $_l"; done
}

# storage_setup: the NVMe controllers of run.py --nvme (tests/vm/storage.py):
# sets DISK (the ext4 disk of pattern files, mounted on /mnt) and SLOW (the
# throttled raw disk of the 64 MiB pattern). With the IOMMU on, each gets an
# identity IOMMU domain first: QEMU sends every DMA through its IOMMU, even
# between two ports of one switch, where hardware routes it in the switch
# (the kernel's bus-address P2PDMA path), so translated it would fault.
# Returns non-zero if a disk is missing or the mount fails.
storage_setup() {
	DISK=/dev/$(nvme_disk nvrs0)
	SLOW=/dev/$(nvme_disk nvrs-slow)
	test -b "$DISK" -a -b "$SLOW" || return 1
	if [ "$NVRS_IOMMU" = on ] && [ "$NVRS_NVME" = switch ]; then
		for _d in $DISK $SLOW; do
			_nv=$(basename "$(readlink /sys/block/${_d#/dev/}/device/device)")
			_g=$(basename "$(readlink /sys/bus/pci/devices/$_nv/iommu_group)")
			echo "$_nv" >/sys/bus/pci/drivers/nvme/unbind
			echo identity >/sys/kernel/iommu_groups/$_g/type
			echo "$_nv" >/sys/bus/pci/drivers/nvme/bind
			[ "$(cat /sys/kernel/iommu_groups/$_g/type)" = identity ] || return 1
		done
		for _i in $(seq 50); do
			DISK=/dev/$(nvme_disk nvrs0)
			SLOW=/dev/$(nvme_disk nvrs-slow)
			test -b "$DISK" -a -b "$SLOW" && break
			sleep 0.1
		done
	fi
	mkdir -p /mnt
	mount -t ext4 "$DISK" /mnt
}

# nvme_disk SERIAL: the namespace of the NVMe controller with that serial.
nvme_disk() {
	for _c in /sys/class/nvme/nvme*; do
		[ "$(tr -d ' ' <$_c/serial 2>/dev/null)" = "$1" ] && ls $_c | grep -m1 '^nvme[0-9]*n1$'
	done
}
