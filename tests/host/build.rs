// SPDX-License-Identifier: GPL-2.0

//! Builds the kernel's own GPU buddy allocator (`drivers/gpu/buddy.c`, with `tools/lib/rbtree.c`
//! and nvrs's `rust/bench_buddy.c` driving it) into the host crate, for the anchor of the host
//! benchmark (`examples/pmm_bench.rs`), from the kernel source named by `NVRS_KSRC` (the tree
//! `tests/bootstrap.sh` fetches). Without it, the benchmark says it has no anchor; the tests
//! do not need it.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(gpu_buddy)");
    println!("cargo::rerun-if-env-changed=NVRS_KSRC");
    println!("cargo::rerun-if-changed=gpu_buddy");
    println!("cargo::rerun-if-changed=../../rust/bench_buddy.c");
    let Some(ksrc) = std::env::var_os("NVRS_KSRC").map(PathBuf::from) else {
        return;
    };
    let buddy = ksrc.join("drivers/gpu/buddy.c");
    if !buddy.exists() {
        println!("cargo::warning=NVRS_KSRC has no drivers/gpu/buddy.c: no gpu_buddy anchor");
        return;
    }
    // gpu_buddy.h alone from the kernel's include/, so that the rest comes from tools/include.
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let inc = out.join("include/linux");
    std::fs::create_dir_all(&inc).expect("OUT_DIR/include/linux");
    std::fs::copy(
        ksrc.join("include/linux/gpu_buddy.h"),
        inc.join("gpu_buddy.h"),
    )
    .expect("gpu_buddy.h");
    cc::Build::new()
        .file(&buddy)
        .file(ksrc.join("tools/lib/rbtree.c"))
        .file("../../rust/bench_buddy.c")
        .file("gpu_buddy/shim.c")
        .include("gpu_buddy/include")
        .include(out.join("include"))
        .include(ksrc.join("tools/include"))
        .include("../../rust")
        .define("CONFIG_GPU_BUDDY", "1")
        .flag("-include")
        .flag("gpu_buddy/include/nvrs_buddy_shim.h")
        .flag("-Wno-format")
        .flag("-Wno-unused-parameter")
        .flag("-Wno-sign-compare")
        .opt_level(2)
        .compile("gpu_buddy");
    println!("cargo::rustc-cfg=gpu_buddy");
}
