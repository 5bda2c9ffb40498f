// SPDX-License-Identifier: GPL-2.0

//! Views rendered from a snapshot recorded in the test VM (`tests/fixtures/two-gpus.json`:
//! `nvrs-smi --json` while a process held 4 MiB and 64 KiB of GPU0, 2 MiB of it pinned for edu
//! and 2 MiB exported as a dma-buf).

use super::*;
use crate::model::Snapshot;

fn fixture() -> Snapshot {
    serde_json::from_str(include_str!("../tests/fixtures/two-gpus.json")).unwrap()
}

#[test]
fn json_round_trips() {
    let s = fixture();
    let again: Snapshot = serde_json::from_str(&json(&s)).unwrap();
    assert_eq!(s, again);
}

#[test]
fn summary_has_every_gpu_its_memory_and_the_process() {
    let s = fixture();
    let gpus: Vec<_> = s.gpus.iter().collect();
    let out = render::summary(&s, &gpus);
    assert!(out.contains("|   0  GH100"), "{out}");
    assert!(out.contains("| 00000000:03:00.0 "), "{out}");
    assert!(out.contains("2MiB / 256MiB |"), "BAR1 of GPU0: {out}");
    assert!(out.contains("4MiB / 254MiB |"), "memory of GPU0: {out}");
    assert!(out.contains("|   1  GA100"), "{out}");
    assert!(out.contains("nvrs-tool"), "{out}");
    // Every line of the table has the same width.
    let widths: Vec<_> = out
        .lines()
        .skip(1)
        .filter(|l| l.starts_with(['|', '+']))
        .map(|l| l.chars().count())
        .collect();
    assert!(widths.windows(2).all(|w| w[0] == w[1]), "{widths:?}");
}

#[test]
fn query_has_nvidia_smi_memory_blocks() {
    let s = fixture();
    let out = render::query(&s, &[&s.gpus[0]]);
    let fb = out.split("    FB Memory Usage\n").nth(1).unwrap();
    let lines: Vec<_> = fb.lines().take(4).collect();
    assert_eq!(lines[0], format!("        {:<34}: 254 MiB", "Total"));
    assert_eq!(lines[2], format!("        {:<34}: 4 MiB", "Used"));
    let bar1 = out.split("    BAR1 Memory Usage\n").nth(1).unwrap();
    assert!(bar1.lines().nth(1).unwrap().ends_with(": 2 MiB"), "{bar1}");
    assert!(out.contains("dma-bufs"), "{out}");
    assert!(out.starts_with("==============NVRS-SMI LOG=============="));
}

#[test]
fn csv_with_and_without_header_and_units() {
    let s = fixture();
    let gpus: Vec<_> = s.gpus.iter().collect();
    let f = render::check_fields("index, memory.used,p2p.dmabufs").unwrap();
    assert_eq!(
        render::csv(&gpus, &f, true, true),
        "index, memory.used [MiB], p2p.dmabufs\n0, 4 MiB, 1\n1, 0 MiB, 0\n"
    );
    assert_eq!(render::csv(&gpus, &f, false, false), "0, 4, 1\n1, 0, 0\n");
    assert_eq!(
        render::check_fields("index,bogus").unwrap_err(),
        "Field \"bogus\" is not a valid field to query."
    );
}

#[test]
fn topo_matrix_layout() {
    let s = fixture();
    let out = topo::matrix(&s);
    let mut lines = out.lines();
    let header = lines.next().unwrap();
    assert_eq!(
        header,
        format!(
            "{:8}{:<8}{:<8}{:<8}{:<16}{:<16}GPU NUMA ID",
            "", "GPU0", "GPU1", "NIC0", "CPU Affinity", "NUMA Affinity"
        )
    );
    let gpu0 = lines.next().unwrap();
    assert!(gpu0.starts_with("GPU0    X       "), "{gpu0}");
    assert!(out.contains("  NV#  = Connection traversing a bonded set of # NVLinks"));
    assert!(out.contains("NIC Legend:"));
}

#[test]
fn nvlink_status_lists_the_chip_links() {
    let s = fixture();
    let out = topo::nvlink(&s, &[&s.gpus[0]]);
    assert!(out.starts_with("GPU 0: GH100 (UUID: GPU-"), "{out}");
    assert_eq!(out.matches("<inactive>").count(), 18, "{out}");
}

#[test]
fn select_by_index_bus_id_and_uuid() {
    let s = fixture();
    let uuid = s.gpus[1].uuid.clone();
    for id in [
        "1",
        "00000000:04:00.0",
        "0000:04:00.0",
        "04:00.0",
        uuid.as_str(),
    ] {
        let g = select(&s, Some(id)).unwrap_or_else(|_| panic!("{id}"));
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].index, 1, "{id}");
    }
    assert!(matches!(select(&s, Some("7")), Err(Fail(6, _))));
    assert!(matches!(select(&s, Some("0000:09:00.0")), Err(Fail(6, _))));
}

#[test]
fn pmm_picture_of_a_checkerboard() {
    let s = fixture();
    let mut g = s.gpus[0].clone();
    // Root bytes: free, a 2 MiB allocation, split and half used, pinned split, a run.
    g.roots = vec![0x00, 0x01, 0x82, 0x8a, 0x03, 0x03, 0x00, 0xf2];
    let h = pmm::histogram(&g);
    assert_eq!(h[0], ("all free", 2));
    assert_eq!(h[2], ("50-74% free", 2));
    assert_eq!(h[4], ("1-24% free", 1));
    assert_eq!(h[5], ("full", 3));
    let t = pmm::terminal(&g, false);
    assert!(t.contains("      0M .A8PCC.f\n"), "{t}");
    let svg = pmm::svg(&g);
    assert!(svg.starts_with("<svg"), "{svg}");
    // A background, the map's cells, the legend's six swatches and the histogram's bars.
    assert_eq!(svg.matches("<rect").count(), 1 + 8 + 6 + 6, "{svg}");
}

#[test]
fn query_shows_the_p2pdma_provider() {
    let mut s = fixture();
    // A snapshot from before version 4 has no P2PDMA fields: no provider.
    let out = render::query(&s, &[&s.gpus[0]]);
    let block = out.split("    P2PDMA (storage)\n").nth(1).unwrap();
    assert!(
        block.starts_with(&format!("        {:<34}: No\n", "Provider")),
        "{block}"
    );
    s.gpus[0].p2p.p2pdma_provider = true;
    s.gpus[0].p2p.p2pdma_bytes = 64 << 20;
    let out = render::query(&s, &[&s.gpus[0]]);
    let block = out.split("    P2PDMA (storage)\n").nth(1).unwrap();
    let lines: Vec<_> = block.lines().take(2).collect();
    assert_eq!(lines[0], format!("        {:<34}: Yes", "Provider"));
    assert_eq!(lines[1], format!("        {:<34}: 64 MiB", "In Use"));
}

#[test]
fn pmon_rows_per_process_and_a_dash_row_for_an_idle_gpu() {
    let mut s = fixture();
    let ids: Vec<String> = s.gpus.iter().map(|g| g.bus_id.clone()).collect();
    assert!(pmon::check("mp").is_ok() && pmon::check("u").is_err());
    // The recording predates NVRS_IOCTL_PROCESS_STATS: only the memory is known.
    let table = pmon::rows_for_test(&s, &ids, monitor::Format::Table);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    let first: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(first, ["0", "100", "C", "4.1", "-", "-", "-", "nvrs-tool"]);
    let idle: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(idle, ["1", "-", "-", "-", "-", "-", "-", "-"]);
    // As the module reports it now: two allocations (4 MiB and 64 KiB), one pin, one dma-buf.
    s.processes[0].allocations = Some(2);
    s.processes[0].pins = Some(1);
    s.processes[0].dmabufs = Some(1);
    let csv = pmon::rows_for_test(&s, &ids, monitor::Format::Csv);
    assert_eq!(
        csv.lines().next(),
        Some("0, 100, C, 4.1, 2, 1, 1, nvrs-tool")
    );
    let json = pmon::rows_for_test(&s, &ids, monitor::Format::Json);
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[0]["pid"], 100);
    assert_eq!(rows[0]["pins_count"], 1);
    assert_eq!(rows[0]["command"], "nvrs-tool");
    assert!(rows[1]["pid"].is_null());
}
