# SPDX-License-Identifier: GPL-2.0
#
# Scenario "consumer": the VM side of `make consumer`. Loads nvrs with the
# emulated GPUs, the GPU model if there is one, and edu as the peer, runs each of a consumer author's scripts
# (run.py --script; in /consumer, as /bin/sh programs) and judges each by its
# exit status, its output shown as diagnostics. Then what any consumer must
# leave behind: its modules unload, no pin is left, every byte of GPU memory
# is back, and nvrs unloads. The runner adds its own verdicts (no oops, WARN,
# lockdep, KASAN or kmemleak report).

. /scenarios/lib.sh
M=/lib/modules

# A GPU model (make consumer MODEL=...) is an NVIDIA GPU: nvrs binds it too.
models=
[ -n "$NVRS_MODEL_GPUS" ] && models=bind_nvidia=1
# shellcheck disable=SC2086 # the parameters are words
check "insmod nvrs emulated=1 $models peer_device=0x123411e8 $NVRS_CONSUMER_PARAMS" \
	insmod $M/nvrs.ko emulated=1 $models peer_device=0x123411e8 $NVRS_CONSUMER_PARAMS
set -- $NVRS_MODEL_GPUS
NVRS_BOUND=$((NVRS_GPUS + $#))
expect_eq "every GPU bound: $NVRS_GPUS emulated, $# models" $NVRS_BOUND "$(nvrs_bound | wc -l)"
expect_eq "consumer scripts given" yes "$([ -n "$NVRS_CONSUMER_SCRIPTS" ] && echo yes)"
for s in $NVRS_CONSUMER_SCRIPTS; do
	diag "running $s"
	{
		sh "/consumer/$s" 2>&1
		echo $? >/tmp/consumer.rc
	} | while IFS= read -r l; do diag "  $s: $l"; done
	expect_eq "$s exited with status 0" 0 "$(cat /tmp/consumer.rc 2>/dev/null)"
done
for m in $NVRS_CONSUMER_MODULES; do
	if grep -q "^$m " /proc/modules; then
		check "rmmod $m (the scripts left it loaded)" rmmod "$m"
	fi
done
check_all_returned
check "rmmod nvrs (no consumer holds it)" rmmod nvrs
done_testing
