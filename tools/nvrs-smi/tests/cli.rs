// SPDX-License-Identifier: GPL-2.0

//! The command line as a user meets it: exit statuses and one-line errors.

use std::process::Command;

fn smi(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nvrs-smi"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/two-gpus.json");

#[test]
fn bad_arguments_give_one_line_and_status_2() {
    for args in [
        &["--bogus"][..],
        &["topo"],
        &["--query-gpu=nosuch", "--format=csv", "--snapshot", FIXTURE],
        &["--query-gpu=index", "--format=xml", "--snapshot", FIXTURE],
        &["--format=csv", "--snapshot", FIXTURE],
        &["dmon", "-s", "x", "--snapshot", FIXTURE],
        &["dmon", "-s", "", "--snapshot", FIXTURE],
        &["dmon", "--format", "xml", "--snapshot", FIXTURE],
        &["--json", "dmon", "--format", "xml", "--snapshot", FIXTURE],
        &["-q", "dmon", "--snapshot", FIXTURE],
        &["pmon", "-s", "u", "--snapshot", FIXTURE],
        &["pmon", "--format", "json", "--snapshot", FIXTURE],
        &["pmon", "-d", "0"],
        // The device is never polled without a pause.
        &["dmon", "-d", "0"],
    ] {
        let (code, out, err) = smi(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("nvrs-smi: "), "{err}");
        assert!(out.is_empty());
    }
}

#[test]
fn no_driver_says_so_in_one_line() {
    let (code, out, err) = smi(&["--device", "/nonexistent/nvrs"]);
    assert_eq!(code, 9);
    assert_eq!(err, "nvrs-smi: cannot open /nonexistent/nvrs (No such file or directory (os error 2)): is the nvrs module loaded?\n");
    assert!(out.is_empty());
}

#[test]
fn unknown_gpu_is_status_6() {
    let (code, _, err) = smi(&["-i", "9", "--snapshot", FIXTURE]);
    assert_eq!(code, 6);
    assert_eq!(err, "nvrs-smi: no GPU matches \"9\"\n");
}

#[test]
fn every_view_has_json() {
    for args in [
        &[][..],
        &["-q"],
        &["topo", "-m"],
        &["nvlink", "-s"],
        &["--query-gpu=index,name", "--format=csv"],
    ] {
        let mut a = args.to_vec();
        a.extend(["--json", "--snapshot", FIXTURE]);
        let (code, out, err) = smi(&a);
        assert_eq!(code, 0, "{a:?}: {err}");
        serde_json::from_str::<serde_json::Value>(&out)
            .unwrap_or_else(|e| panic!("{a:?}: {e}: {out}"));
    }
}

#[test]
fn svg_file_is_written() {
    let path = std::env::temp_dir().join(format!("nvrs-smi-test-{}.svg", std::process::id()));
    let p = path.to_str().unwrap();
    let (code, out, err) = smi(&[
        "pmm",
        "-i",
        "0",
        "--no-color",
        "--output",
        p,
        "--snapshot",
        FIXTURE,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("wrote the memory map of GPU 0"), "{out}");
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"));
    std::fs::remove_file(path).unwrap();
}

#[test]
fn dmon_prints_a_row_per_gpu_and_interval() {
    // Two samples of a recorded snapshot, no wait: rates are zero, levels as recorded.
    let (code, out, err) = smi(&["dmon", "-c", "2", "-d", "0", "--snapshot", FIXTURE]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2 + 2 * 2, "{out}");
    assert!(
        lines[0].starts_with("# gpu") && lines[0].contains("rxpci"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("# Idx") && lines[1].contains("MB/s"),
        "{out}"
    );
    // The recording has no copy engine: its two columns print '-'.
    assert!(lines[0].ends_with("     ce   cemov"), "{out}");
    assert!(lines[2].ends_with("       -       -"), "{out}");
    // GPU 0 of the fixture has one pin; its snapshot has no PCIe counters ("-").
    let row: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(row[..3], ["0", "-", "-"], "{out}");
    assert_eq!(row[5], "1", "{out}");
    let (code, out, _) = smi(&[
        "dmon",
        "-c",
        "1",
        "-d",
        "0",
        "-s",
        "p",
        "--format",
        "csv",
        "-i",
        "1",
        "--snapshot",
        FIXTURE,
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "#gpu, pins, maps, dmabuf, p2pdma\n#Idx, #, #, #, MiB\n1, 0, 0, 0, 0\n"
    );
    let (code, out, _) = smi(&[
        "dmon",
        "-c",
        "1",
        "-d",
        "0",
        "--json",
        "--snapshot",
        FIXTURE,
    ]);
    assert_eq!(code, 0);
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!(rows[0]["gpu"], 0);
    assert_eq!(rows[0]["pins_count"], 1);
    assert!(rows[0]["rxpci_mbps"].is_null());
}

#[test]
fn pmon_prints_a_row_per_process_and_sample() {
    let (code, out, err) = smi(&["pmon", "-c", "2", "-d", "0", "--snapshot", FIXTURE]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    // The header, then per sample GPU0's process and GPU1's row of '-'.
    assert_eq!(lines.len(), 2 + 2 * 2, "{out}");
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["#", "gpu", "pid", "type", "fb", "allocs", "pins", "dmabuf", "command"]
    );
    assert!(
        lines[1].starts_with("# Idx") && lines[1].contains("C/G"),
        "{out}"
    );
    assert!(lines[2].starts_with("    0      100    C"), "{out}");
    assert!(lines[2].ends_with(" nvrs-tool"), "{out}");
    assert!(lines[3].starts_with("    1        -    -"), "{out}");
    let (code, out, _) = smi(&[
        "pmon",
        "-c",
        "1",
        "-d",
        "0",
        "-s",
        "m",
        "--format",
        "csv",
        "-i",
        "0",
        "--snapshot",
        FIXTURE,
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "#gpu, pid, type, fb, allocs, command\n#Idx, #, C/G, MB, #, name\n0, 100, C, 4.1, -, nvrs-tool\n"
    );
}
