# SPDX-License-Identifier: GPL-2.0
#
# Scenario "demo": show nvrs at work on the emulated GPUs. Lines prefixed
# with "nvrs-demo:" are what `make demo` prints.

. /scenarios/lib.sh

show() {
	while IFS= read -r l; do demo "  $l"; done
}

demo "== PCI functions (vendor:device class) =="
for d in /sys/bus/pci/devices/*; do
	echo "$(basename $d) $(cat $d/vendor | cut -c3-):$(cat $d/device | cut -c3-) class $(cat $d/class)"
done | grep -E '1af4:1110|1234:11e8' | show
demo "== IOMMU =="
dmesg | grep -E 'DMAR: IOMMU enabled' | sed 's/^\[[ 0-9.]*\] //' | show

dmesg_mark
demo "== insmod nvrs.ko emulated=1 =="
insmod /lib/modules/nvrs.ko emulated=1
dmesg_new | grep -E '^\[[ 0-9.]*\] nvrs' | sed 's/^\[[ 0-9.]*\] //' | show
n=$(nvrs_bound | wc -l)
demo "== $n GPUs bound; /sys/kernel/debug/nvrs/<device>/info =="
for bdf in $(nvrs_bound); do
	demo "-- $bdf --"
	show </sys/kernel/debug/nvrs/$bdf/info
done
check "demo: $n GPUs bound" test "$n" -ge 1
demo "== rmmod nvrs =="
check "demo: rmmod nvrs" rmmod nvrs
demo "  nvrs unloaded; debugfs entries left: $(ls /sys/kernel/debug/nvrs 2>/dev/null | wc -l)"
done_testing
