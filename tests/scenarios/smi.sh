# SPDX-License-Identifier: GPL-2.0
#
# Scenario "smi": nvrs-smi against the live module. A process holds GPU memory
# (4 MiB on GPU0, 2 MiB of it pinned for edu, 2 MiB exported as a dma-buf);
# while it does, every view of nvrs-smi must show what the ioctls report, the
# JSON must parse (nvrs-smi renders it back) and match NVRS_IOCTL_GPU_STATS,
# topo -m must be the matrix of debugfs topology, bad arguments must give one
# line and status 2, and without nvrs loaded it must say so in one line.
# NVRS_IOCTL_PROCESS_STATS (what pmon reads) must count the process's
# allocations, pins and dma-bufs, in entries of any valid size.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
GPU0=$(nvrs_bound | sed -n 1p)
SMI="nvrs-smi"

tool "nvrs-smi while a process holds, pins and exports GPU memory" \
	alloc A 0 4M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; export A 0x200000 2M \; \
	alloc B 0 64K \; alloc C 0 64K \; free B \; stats 0 \; \
	sh "$SMI >/tmp/smi-summary.txt" \; sh "$SMI -q >/tmp/smi-q.txt" \; \
	sh "$SMI --json >/tmp/smi.json" \; sh "$SMI topo -m >/tmp/smi-topo.txt" \; \
	sh "$SMI nvlink -s >/tmp/smi-nvlink.txt" \; \
	sh "$SMI --query-gpu=index,pci.bus_id,memory.used,bar1.used,p2p.dmabufs --format=csv >/tmp/smi.csv" \; \
	sh "$SMI pmm -i 0 --no-color --output /tmp/pmm.svg >/tmp/smi-pmm.txt" \; \
	sh "$SMI pmm -i 0 --json >/tmp/smi-pmm.json" \; \
	sh "$SMI -i $GPU0 --query-gpu=index --format=csv,noheader >/tmp/smi-i.txt" \; \
	pstats \; pstats 16 \; pstats 24 \; pstats 4096 \; !EINVAL pstats 12 \; \
	!EINVAL pstats 20 \; !EINVAL pstats 4104 \; \
	sh "$SMI pmon -c 1 >/tmp/smi-pmon.txt" \; sh "$SMI pmon -c 1 --json >/tmp/smi-pmon.json" \; \
	ctl put 0 \; close A \; free A \; pstats
while IFS= read -r l; do diag "  $l"; done </tmp/smi-summary.txt
check "  the summary shows both GPUs" sh -c "grep -c '00000000:0' /tmp/smi-summary.txt | grep -qx 2"
check "  GPU0: 4 MiB + 64 KiB used of its memory, 2 MiB of BAR1 pinned" \
	grep -qE "^\|[ ]+2MiB / 256MiB \|$|2MiB / 256MiB" /tmp/smi-summary.txt
check "  the process that holds the memory is listed with its name" \
	grep -qE "^\|[ ]+0[ ]+[0-9]+   nvrs-tool[ ]+4MiB" /tmp/smi-summary.txt
check "  -q has the FB Memory Usage block" sh -c \
	"grep -A4 '^    FB Memory Usage' /tmp/smi-q.txt | grep -qE '^        Used +: 4 MiB'"
check "  -q has the BAR1 Memory Usage block" sh -c \
	"grep -A3 '^    BAR1 Memory Usage' /tmp/smi-q.txt | grep -qE '^        Used +: 2 MiB'"
check "  --json parses: nvrs-smi renders it back to the same summary" sh -c \
	"$SMI --snapshot /tmp/smi.json | tail -n +2 >/tmp/a.txt && tail -n +2 /tmp/smi-summary.txt >/tmp/b.txt && cmp /tmp/a.txt /tmp/b.txt"
used=$(sed -n 's/^stats gpu 0 version 4 fb_total [0-9]* fb_used \([0-9]*\) .*/\1/p' /tmp/tool.out)
check "  --json's memory.used is NVRS_IOCTL_GPU_STATS's fb_used ($used)" \
	grep -q "\"used\": $used," /tmp/smi.json
check "  topo -m is the matrix debugfs topology prints" sh -c \
	"sed '/^P2P (GPU memory/,\$d' $D/topology | sed '\$d' >/tmp/dbg-topo.txt && cmp /tmp/dbg-topo.txt /tmp/smi-topo.txt"
check "  nvlink -s: GH100 has 18 links, none declared here" sh -c \
	"grep -q '^GPU 0: GH100' /tmp/smi-nvlink.txt && test \$(grep -c 'Link [0-9]*: <inactive>' /tmp/smi-nvlink.txt) -ge 18"
check "  --query-gpu csv" grep -qE "^0, 00000000:0[0-9A-F:.]+, 4 MiB, 2 MiB, 1$" /tmp/smi.csv
check "  -i by bus id" grep -qx "0" /tmp/smi-i.txt
check "  pmm: the terminal map shows split, allocated and free roots" sh -c \
	"grep -qE '^ +0M [0-9a-fAP.]+' /tmp/smi-pmm.txt && grep -q 'roots by free space' /tmp/smi-pmm.txt"
check "  pmm: an SVG file with one cell per root" sh -c \
	"grep -q '<svg' /tmp/pmm.svg && test \$(grep -o '<rect' /tmp/pmm.svg | wc -l) -gt 127"
check "  pmm --json carries the roots and the histogram" grep -q '"histogram"' /tmp/smi-pmm.json
SELF=$(sed -n 's/^pstats self \([0-9]*\) .*/\1/p' /tmp/tool.out | sed -n 1p)
check "  PROCESS_STATS: 2 allocations (4 MiB + 64 KiB), 1 pin, 1 dma-buf" grep -qxE \
	"pstats self $SELF version 1 count 1 size 32 $SELF:0:4259840:2:1:1" /tmp/tool.out
check "  PROCESS_STATS: 16-byte entries get the usage fields only" grep -qxE \
	"pstats self $SELF version 1 count 1 size 16 $SELF:0:4259840:-:-:-" /tmp/tool.out
check "  PROCESS_STATS: 24-byte entries get the counts that fit" grep -qxE \
	"pstats self $SELF version 1 count 1 size 24 $SELF:0:4259840:2:1:-" /tmp/tool.out
check "  PROCESS_STATS: 4096-byte entries: 32 filled, the rest zeroed" grep -qxE \
	"pstats self $SELF version 1 count 1 size 32 $SELF:0:4259840:2:1:1" /tmp/tool.out
check "  PROCESS_STATS after the put, close and free: 64 KiB, no pin, no dma-buf" grep -qxE \
	"pstats self $SELF version 1 count 1 size 32 $SELF:0:65536:1:0:0" /tmp/tool.out
while IFS= read -r l; do diag "  $l"; done </tmp/smi-pmon.txt
check "  pmon: the process's row, with its pin and dma-buf" grep -qE \
	"^ +0 +$SELF +C +4\.1 +2 +1 +1 nvrs-tool$" /tmp/smi-pmon.txt
check "  pmon: GPU1 has no process, a row of '-'" grep -qE \
	"^ +1 +- +- +- +- +- +- -$" /tmp/smi-pmon.txt
check "  pmon --json: the row as JSON" grep -q \
	"\"pid\":$SELF,\"pins_count\":1,\"type\":\"C\"" /tmp/smi-pmon.json
send_file /tmp/pmm.svg pmm-map.svg
send_file /tmp/smi.json smi-snapshot.json

# Bad arguments: one line on stderr, status 2; an unknown GPU: status 6.
bad() {
	"$@" >/tmp/out.txt 2>/tmp/err.txt
	_rc=$?
	[ "$_rc" = "$EXPECT" ] && [ "$(wc -l </tmp/err.txt)" = 1 ] && [ ! -s /tmp/out.txt ]
}
EXPECT=2 check "bad option: one line, status 2" bad $SMI --bogus
EXPECT=2 check "unknown query field: one line, status 2" bad $SMI --query-gpu=nosuch --format=csv
EXPECT=2 check "bad format: one line, status 2" bad $SMI --query-gpu=index --format=xml
EXPECT=2 check "topo without -m: one line, status 2" bad $SMI topo
EXPECT=6 check "-i naming no GPU: one line, status 6" bad $SMI -i 7
EXPECT=2 check "pmon -s u (no utilisation in nvrs): one line, status 2" bad $SMI pmon -s u
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
EXPECT=9 check "without nvrs loaded: one line, status 9" bad $SMI
diag "$(cat /tmp/err.txt)"
done_testing
