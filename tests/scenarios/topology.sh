# SPDX-License-Identifier: GPL-2.0
#
# Scenario "topology": debugfs/nvrs/topology names the links between the
# emulated GPUs and the edu peer as nvidia-smi topo -m would, and the P2P
# gate follows the path and the p2p_topology override. Removing and rescanning
# the edu peer empties the remembered P2PDMA distances: the pairs are asked of
# the kernel again, and nothing is remembered for a function that is gone.

. /scenarios/lib.sh
M=/lib/modules
T=/sys/kernel/debug/nvrs/topology
EDU=0x123411e8

# cstat FILE FIELD: a counter of the "distance cache:" line of a copy of the
# topology file, or "none" without one (so arithmetic on it never runs).
cstat() {
	_v=$(sed -n "s/^distance cache: .*$2 \([0-9][0-9]*\).*/\1/p" "$1")
	echo "${_v:-none}"
}

# delta FIELD OLD NEW: how much counter FIELD rose from copy OLD to NEW.
delta() {
	_a=$(cstat "$2" "$1")
	_b=$(cstat "$3" "$1")
	case "$_a$_b" in
	*none*) echo none ;;
	*) echo $((_b - _a)) ;;
	esac
}

# row NAME: the link cells of matrix row NAME (GPU0, NIC0, ...).
row() {
	grep "^$1 " $T | awk -v n=$((NVRS_GPUS + 1)) '{ s = $2; for (i = 3; i <= n + 1; i++) s = s " " $i; print s }'
}

check "insmod nvrs emulated=1 peer_device=edu" insmod $M/nvrs.ko emulated=1 peer_device=$EDU
check "topology file exists" test -r $T
while IFS= read -r l; do diag "$l"; done <$T

case "$NVRS_TOPOLOGY" in
switch) pcie=PIX ;;
root) pcie=PHB ;;
esac
if [ "$NVRS_NVLINK" = 1 ]; then gg=NV4; else gg=$pcie; fi

expect_eq "header names GPUs and the edu peer" "GPU0 GPU1 NIC0" \
	"$(sed -n 1p $T | awk '{print $1, $2, $3}')"
expect_eq "GPU0 row" "X $gg $pcie" "$(row GPU0)"
expect_eq "GPU1 row" "$gg X $pcie" "$(row GPU1)"
expect_eq "NIC0 row" "$pcie $pcie X" "$(row NIC0)"
check "NIC legend names edu" sh -c "grep -q 'NIC0: $(pci_functions 0x1234 0x11e8)' $T"

edu_gate=$(grep "GPU0 -> NIC0" $T)
if [ "$pcie" = PIX ]; then
	check "switch path to edu is allowed" sh -c "echo '$edu_gate' | grep -q 'PCIe switch.*allowed'"
else
	# q35's host bridge is not on the kernel's P2PDMA allow-list.
	check "host-bridge path to edu is refused" sh -c "echo '$edu_gate' | grep -q 'host bridge, kernel p2pdma distance -[0-9]*: refused'"
fi
if [ "$NVRS_NVLINK" = 1 ]; then
	check "GPU0 -> GPU1 over NVLink allowed" sh -c "grep 'GPU0 -> GPU1' $T | grep -q 'NV4, NVLink.*allowed'"
fi

# Hotplug on the path: the remembered distances go with it.
EDU_BDF=$(pci_functions 0x1234 0x11e8)
check "edu present before the hotplug" test -n "$EDU_BDF"
cat $T >/tmp/topo.1
cat $T >/tmp/topo.2
check "distance cache counters shown" \
	grep -qE '^distance cache: hits [0-9]+ misses [0-9]+ invalidations [0-9]+ ' /tmp/topo.1
expect_eq "a second read asks the kernel nothing" 0 "$(delta misses /tmp/topo.1 /tmp/topo.2)"
expect_eq "each GPU's distance to edu remembered" "$NVRS_GPUS" \
	"$(grep -c "^  remembered: provider .* client $EDU_BDF distance " /tmp/topo.2)"
check "remove edu" sh -c "echo 1 > /sys/bus/pci/devices/$EDU_BDF/remove"
check "edu gone" test ! -e /sys/bus/pci/devices/$EDU_BDF
cat $T >/tmp/topo.3
while IFS= read -r l; do diag "$l"; done </tmp/topo.3
check "the removal invalidated the cache" test "$(delta invalidations /tmp/topo.2 /tmp/topo.3)" -gt 0
expect_eq "nothing remembered for the removed edu" 0 "$(grep -c "client $EDU_BDF " /tmp/topo.3)"
expect_eq "no gate answer for the removed edu" 0 "$(grep -c "($EDU_BDF)" /tmp/topo.3)"
expect_eq "after the removal every path is asked again" "$(grep -c 'GPU[0-9]* -> ' /tmp/topo.3)" \
	"$(delta misses /tmp/topo.2 /tmp/topo.3)"
expect_eq "none answered from before the removal" 0 "$(delta hits /tmp/topo.2 /tmp/topo.3)"
check "rescan" sh -c "echo 1 > /sys/bus/pci/rescan"
EDU_NEW=$(pci_functions 0x1234 0x11e8)
check "rescan brings edu back" test -n "$EDU_NEW"
cat $T >/tmp/topo.4
while IFS= read -r l; do diag "$l"; done </tmp/topo.4
check "the rescan invalidated the cache" test "$(delta invalidations /tmp/topo.3 /tmp/topo.4)" -gt 0
expect_eq "after the rescan every path is asked again" "$(grep -c 'GPU[0-9]* -> ' /tmp/topo.4)" \
	"$(delta misses /tmp/topo.3 /tmp/topo.4)"
expect_eq "none answered from before the rescan" 0 "$(delta hits /tmp/topo.3 /tmp/topo.4)"
expect_eq "GPU0 -> NIC0 after the rescan as before, at edu's address now" \
	"$(echo "$edu_gate" | sed "s/$EDU_BDF/$EDU_NEW/")" "$(grep 'GPU0 -> NIC0' /tmp/topo.4)"
expect_eq "each GPU's distance to the new edu remembered" "$NVRS_GPUS" \
	"$(grep -c "^  remembered: provider .* client $EDU_NEW distance " /tmp/topo.4)"

# The gate in action: nvidia_p2p_dma_map_pages() for edu.
check "insmod consumer" insmod $M/nvrs_consumer.ko
if [ "$pcie" = PIX ]; then want=""; else want="!ENOTSUPP"; fi
check "dma_map_pages for edu: ${want:-allowed}" nvrs-tool alloc A 0 2M \; ctl pin 0 @A 0x10000 \; \
	$want ctl map 0 \; ctl put 0 \; free A
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs

check "insmod with p2p_topology=2 (deny all)" insmod $M/nvrs.ko emulated=1 peer_device=$EDU p2p_topology=2
paths=$((NVRS_GPUS * NVRS_GPUS))	# each GPU to the other GPUs and the edu peer
expect_eq "one gate line per GPU and device" $paths "$(grep -c -- '->' $T)"
# Counted, not "no line allowed": that holds for an empty file too.
expect_eq "every path refused" $paths "$(grep -- '->' $T | grep -c 'refused$')"
check "rmmod nvrs" rmmod nvrs
check "insmod with p2p_topology=1 (allow all)" insmod $M/nvrs.ko emulated=1 peer_device=$EDU p2p_topology=1
expect_eq "one gate line per GPU and device (override)" $paths "$(grep -c -- '->' $T)"
expect_eq "every path allowed" $paths "$(grep -- '->' $T | grep -c 'allowed$')"
check "insmod consumer" insmod $M/nvrs_consumer.ko
check "dma_map_pages for edu allowed by the override" nvrs-tool alloc A 0 2M \; ctl pin 0 @A 0x10000 \; \
	ctl map 0 \; ctl put 0 \; free A
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
done_testing
