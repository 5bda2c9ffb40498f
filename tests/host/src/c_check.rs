// SPDX-License-Identifier: GPL-2.0

//! Cross-checks of a C header against its Rust mirror: a C program, generated from a list of
//! [`Check`]s, is compiled against the header with the host C compiler (`$CC`, default `gcc`)
//! and prints the value of each check's C expression, which is compared with the value Rust
//! computes for it. Used for `include/nv-p2p.h` (`p2p_abi_tests.rs`) and
//! `include/uapi/nvrs.h` (`uapi_tests.rs`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Size of the type of the field that `f` projects to (`f` is never called).
pub(crate) fn field_size<T, F>(_f: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// One line the C program prints: a C expression and the value Rust expects for it.
pub(crate) struct Check {
    pub(crate) c_expr: String,
    pub(crate) rust: u64,
}

/// `sizeof` and `_Alignof` of a structure, then `offsetof` and `sizeof` of each listed field, in
/// C and in Rust. Fields may be nested (`registers.fermi.rreqmb_0`).
macro_rules! layout {
    ($checks:ident, $rust:ty, $c:literal, [$($($f:ident).+),* $(,)?]) => {
        $checks.push($crate::c_check::Check {
            c_expr: format!("sizeof({})", $c),
            rust: ::core::mem::size_of::<$rust>() as u64,
        });
        $checks.push($crate::c_check::Check {
            c_expr: format!("_Alignof({})", $c),
            rust: ::core::mem::align_of::<$rust>() as u64,
        });
        $(
            let name = stringify!($($f).+).replace(' ', "");
            $checks.push($crate::c_check::Check {
                c_expr: format!("offsetof({}, {})", $c, name),
                rust: ::core::mem::offset_of!($rust, $($f).+) as u64,
            });
            #[allow(unused_unsafe)]
            let size = $crate::c_check::field_size::<$rust, _>(|s| unsafe { &s.$($f).+ });
            $checks.push($crate::c_check::Check {
                c_expr: format!("sizeof((({} *)0)->{})", $c, name),
                rust: size as u64,
            });
        )*
    };
}
pub(crate) use layout;

/// Compiles `head` (includes and declarations) followed by a `main` that prints every check's C
/// expression, with `stubs` (relative path, contents) written to a scratch directory that is
/// searched first, then `include`; `-Werror` and the extra `flags`. Returns the checks, each with
/// the value C printed for it. `name` names the scratch directory.
pub(crate) fn run(
    name: &str,
    head: &str,
    include: &Path,
    stubs: &[(&str, &str)],
    flags: &[&str],
    checks: Vec<Check>,
) -> Vec<(Check, u64)> {
    let mut program = String::from(head);
    program += "\nint main(void)\n{\n";
    for c in &checks {
        program += &format!(
            "\tprintf(\"%llu\\n\", (unsigned long long)({}));\n",
            c.c_expr
        );
    }
    program += "\treturn 0;\n}\n";
    let dir = std::env::temp_dir().join(format!("nvrs-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (path, text) in stubs {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::write(dir.join("check.c"), program).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".into());
    let out = Command::new(&cc)
        .args([
            "-std=gnu11",
            "-O0",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
        ])
        .args(flags)
        .arg("-I")
        .arg(&dir)
        .arg("-I")
        .arg(include)
        .arg(dir.join("check.c"))
        .arg("-o")
        .arg(dir.join("check"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(
        out.status.success(),
        "{cc} rejected the header or the check program ({}):\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(dir.join("check")).output().unwrap();
    assert!(run.status.success());
    let stdout = String::from_utf8(run.stdout).unwrap();
    let values: Vec<u64> = stdout.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), checks.len(), "one line per check");
    let _ = std::fs::remove_dir_all(&dir);
    checks.into_iter().zip(values).collect()
}

/// Asserts that C and Rust agree on every check of `results` whose C expression satisfies
/// `pick`, and that there is at least one.
pub(crate) fn assert_matches(results: &[(Check, u64)], pick: impl Fn(&str) -> bool) {
    let mut n = 0;
    let mut diffs = BTreeMap::new();
    for (check, c) in results.iter().filter(|(k, _)| pick(&k.c_expr)) {
        n += 1;
        if *c != check.rust {
            diffs.insert(check.c_expr.clone(), (*c, check.rust));
        }
    }
    assert!(n > 0, "nothing checked");
    assert!(
        diffs.is_empty(),
        "C and Rust differ (expr: (C, Rust)): {diffs:#?}"
    );
}
