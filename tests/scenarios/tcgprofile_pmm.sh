# SPDX-License-Identifier: GPL-2.0
#
# Scenario "tcgprofile_pmm" (tests/tcg-profile.sh pmm, not make check): runs
# one trace of the memory-manager benchmark, named by nvrs_profile= on the
# kernel command line, under the counting plugin.

. /scenarios/lib.sh
M=/lib/modules
trace=$(sed -n 's/.*nvrs_profile=\([^ ]*\).*/\1/p' /proc/cmdline)

check "insmod nvrs" insmod $M/nvrs.ko emulated=1
echo "tcg-profile: module nvrs $(cat /sys/module/nvrs/sections/.text)"
check "select trace $trace" sh -c "echo $trace > /sys/kernel/debug/nvrs/bench_pmm"
cat /sys/kernel/debug/nvrs/bench_pmm >/tmp/pmm.txt
check "trace ran" grep -q "^bench: $trace " /tmp/pmm.txt
cat /tmp/pmm.txt
check "rmmod nvrs" rmmod nvrs
done_testing
