# SPDX-License-Identifier: GPL-2.0
#
# nvrs: build the module against a Rust-enabled kernel build tree, and the
# project's own test, demo and benchmark entry points.
#
#   make                      build nvrs.ko against KDIR
#   make KDIR=<tree>          ... against another (Rust-enabled, fully built) tree
#   make NVRS_TESTING=1       ... with the test-only code: fault controls, delay
#                             points and their parameters (check, bench and
#                             consumer build this; DKMS and a plain make do not)
#   make modules_install      install into /lib/modules/<kernel>/updates
#   make clean
#   make demo                 VM with two emulated GPUs showing nvrs at work
#   make check                every test: host cargo tests, then the VM suites
#   make bench                benchmarks against their anchors (not tests)
#   make soak                 a 60-second race in a VM (not part of check)
#   make consumer M=<dir> SCRIPT=<file> [TOPOLOGY= IOMMU= KERNEL= MODEL= NVRS_PARAMS=]
#                             build your own consumer module against nvrs and
#                             run your script with it in the test VM
#   make dkms-source DESTDIR=<root>
#                             the DKMS source tree in <root>/usr/src/nvrs-<version>
#   make dkms-install         ... in /usr/src, then dkms add + install (root)
#
# `demo` and `check` install what they need (tests/bootstrap.sh) and use the
# cached test kernel, whatever KDIR says.

KDIR ?= /lib/modules/$(shell uname -r)/build
# The bindgen that generates the Rust declarations of rust/helpers.h (Kbuild):
# the kernel's own variable, which its Makefile sets to plain `bindgen`, so it
# is passed on explicitly (tests/bootstrap.sh's bindgen is not on PATH).
BINDGEN ?= bindgen
PWD := $(CURDIR)
# Kept in step with dkms.conf.
NVRS_VERSION := 0.1.0
DKMS_SRC = $(DESTDIR)/usr/src/nvrs-$(NVRS_VERSION)
DKMS_FILES := Kbuild Makefile dkms.conf LICENSE README.md rust src include hwref \
	tools/dkms-pre-build.sh

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(PWD) BINDGEN=$(BINDGEN) modules

modules_install:
	$(MAKE) -C $(KDIR) M=$(PWD) INSTALL_MOD_DIR=updates modules_install

# Without a kernel tree at KDIR, remove Kbuild's outputs directly.
clean:
ifneq ($(wildcard $(KDIR)/Makefile),)
	$(MAKE) -C $(KDIR) M=$(PWD) clean
	$(MAKE) -C $(PWD)/tests/consumer KDIR=$(KDIR) clean
else
	find $(PWD) -path $(PWD)/tests/host/target -prune -o \( -name '*.o' -o -name '*.ko' \
		-o -name '*.mod' -o -name '*.mod.c' -o -name '.*.cmd' -o -name '*.d' \
		-o -name modules.order -o -name Module.symvers \) -type f -print0 | xargs -0 rm -f
	rm -f $(PWD)/rust/helpers_generated.rs
endif
	rm -rf $(PWD)/tests/out

demo:
	@tests/demo.sh

check:
	@tests/check.sh

bench:
	@tests/bench.sh

# A consumer author's module and script in the test VM (tests/consumer-run.sh).
consumer:
	@M="$(M)" SCRIPT="$(SCRIPT)" TOPOLOGY="$(TOPOLOGY)" IOMMU="$(IOMMU)" KERNEL="$(KERNEL)" \
		MODEL="$(MODEL)" NVRS_PARAMS="$(NVRS_PARAMS)" TIMEOUT="$(TIMEOUT)" tests/consumer-run.sh

soak:
	@tests/soak.sh

dkms-source:
	rm -rf $(DKMS_SRC)
	install -d $(DKMS_SRC)/tools
	cd $(PWD) && cp -r $(filter-out tools/%,$(DKMS_FILES)) $(DKMS_SRC)/
	install -m 0755 $(PWD)/tools/dkms-pre-build.sh $(DKMS_SRC)/tools/
	rm -f $(DKMS_SRC)/rust/helpers_generated.rs
	grep -q '^PACKAGE_VERSION="$(NVRS_VERSION)"$$' $(DKMS_SRC)/dkms.conf

dkms-install: dkms-source
	dkms add -m nvrs -v $(NVRS_VERSION)
	dkms install -m nvrs -v $(NVRS_VERSION)

.PHONY: all modules modules_install clean demo check bench consumer soak dkms-source dkms-install
