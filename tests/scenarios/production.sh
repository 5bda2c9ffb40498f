# SPDX-License-Identifier: GPL-2.0
#
# Scenario "production": the module is a production build (DKMS, a plain
# make): none of the test-only code is in it. The kernel knows none of the
# fault-control or delay-point parameters (nvrs's parameters have no sysfs
# files, so it is asked at insmod: it names each unknown one), no GPU has a
# debugfs "faults" file, and the module still binds and serves its GPUs. Run
# on the module `dkms build` made.

. /scenarios/lib.sh
M=/lib/modules
TEST_PARAMS="test_delay_points test_delay_ms fault_bar1_mib fault_callback_delay_us
	fault_callback_workqueue fault_revoke_every_ms test_tombs_max"

dmesg_mark
# p2p_topology=1: the VM this runs in puts the GPUs and edu on the root bus,
# a path the topology gate refuses (PHB) and the test is not about.
check "insmod nvrs emulated=1 p2pdma=1 peer_device=0x123411e8 p2p_topology=1" \
	insmod $M/nvrs.ko emulated=1 p2pdma=1 peer_device=0x123411e8 p2p_topology=1
expect_eq "  the kernel knows every one of those parameters" 0 \
	"$(dmesg_new | grep -c 'nvrs: unknown parameter')"
expect_eq "every emulated GPU bound" "$NVRS_GPUS" "$(nvrs_bound | wc -l)"
n=0
for bdf in $(nvrs_bound); do
	check "$bdf: debugfs info exists" test -r /sys/kernel/debug/nvrs/$bdf/info
	check "$bdf: no debugfs faults file" test ! -e /sys/kernel/debug/nvrs/$bdf/faults
	n=$((n + 1))
done
expect_eq "every bound GPU looked at" "$NVRS_GPUS" "$n"
check "insmod nvrs_consumer" insmod $M/nvrs_consumer.ko
tool "a pin and a DMA mapping work as in a test build" \
	alloc A 0 2M \; ctl pin 0 @A 0x10000 \; ctl map 0 \; ctl put 0 \; free A
check "rmmod nvrs_consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
args=""
for p in $TEST_PARAMS; do args="$args $p=1"; done
dmesg_mark
check "insmod with every test parameter set" insmod $M/nvrs.ko emulated=1 $args
for p in $TEST_PARAMS; do
	expect_eq "  $p: unknown to the kernel, ignored" 1 \
		"$(dmesg_new | grep -c "nvrs: unknown parameter '$p' ignored")"
done
check "rmmod nvrs" rmmod nvrs
done_testing
