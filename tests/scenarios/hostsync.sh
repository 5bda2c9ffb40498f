# SPDX-License-Identifier: GPL-2.0
#
# Run by nvrs-tool ("sh 'sh /scenarios/hostsync.sh'") while memory a peer
# wrote by DMA is still allocated: the VM runner checks those bytes in the
# GPUs' backing files, then answers on the console (tests/vm/run.py,
# BackingCheck). nvrs scrubs memory when it is freed, so later is too late.

echo "nvrs-hostcheck: sync" >"$NVRS_OUT"
read -r -t 60 _ack </dev/console
