// SPDX-License-Identifier: GPL-2.0

//! What `dmon` and `pmon` share: rows of cells printed as nvidia-smi prints its monitors (a
//! two-line `#` header of names and units, then right-aligned columns), as CSV, or as one JSON
//! object per row, and the loop that reads a snapshot every `-d` seconds and prints the rows
//! between two of them.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use crate::model::Snapshot;

/// How rows are printed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Format {
    Table,
    Csv,
    Json,
}

/// A column: its name, its unit (the header's second line) and its width in the table.
pub struct Col {
    pub name: &'static str,
    pub unit: &'static str,
    pub width: usize,
}

/// One cell of a row.
pub enum Cell {
    /// A key of the row (GPU index, process id): a plain JSON number under the column's name;
    /// `None` (a GPU with no process) prints as `-` (JSON `null`).
    Id(Option<i64>),
    /// A measure in the column's unit; `None` prints as `-` (JSON `null`).
    Num(Option<f64>),
    /// Text (a process's type or name): a JSON string; left-aligned in the last column.
    Text(String),
}

impl Cell {
    fn text(&self) -> String {
        match self {
            Cell::Id(Some(n)) => n.to_string(),
            Cell::Id(None) => "-".into(),
            Cell::Num(None) => "-".into(),
            Cell::Num(Some(x)) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
            Cell::Num(Some(x)) => format!("{x:.1}"),
            Cell::Text(s) => s.clone(),
        }
    }

    fn json(&self, col: &Col) -> (String, serde_json::Value) {
        match self {
            Cell::Id(n) => (col.name.into(), (*n).into()),
            Cell::Text(s) => (col.name.into(), s.as_str().into()),
            Cell::Num(v) => {
                let unit = match col.unit {
                    "MB/s" => "mbps",
                    "MiB" | "MB" => "mib",
                    _ => "count",
                };
                let value = match v {
                    None => serde_json::Value::Null,
                    Some(x) if unit == "count" => serde_json::Value::from(*x as u64),
                    Some(x) => serde_json::Value::from(*x),
                };
                (format!("{}_{unit}", col.name), value)
            }
        }
    }
}

/// The header of `cols` (nothing for JSON).
pub fn header(cols: &[Col], format: Format) -> String {
    let mut out = String::new();
    match format {
        Format::Json => {}
        Format::Csv => {
            let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
            let units: Vec<&str> = cols.iter().map(|c| c.unit).collect();
            let _ = writeln!(out, "#{}", names.join(", "));
            let _ = writeln!(out, "#{}", units.join(", "));
        }
        Format::Table => {
            for line in [|c: &Col| c.name, |c: &Col| c.unit] {
                out.push('#');
                for (i, c) in cols.iter().enumerate() {
                    let sep = if i == 0 { "" } else { " " };
                    let _ = write!(out, "{sep}{:>w$}", line(c), w = c.width);
                }
                out.push('\n');
            }
        }
    }
    out
}

/// One row of `cells` under `cols`.
pub fn row(cols: &[Col], cells: &[Cell], format: Format) -> String {
    match format {
        Format::Table => {
            let mut out = String::new();
            for (i, (c, v)) in cols.iter().zip(cells).enumerate() {
                match v {
                    Cell::Text(s) if i + 1 == cols.len() => {
                        let _ = write!(out, " {s:<w$}", w = c.width);
                    }
                    v => {
                        let _ = write!(out, " {:>w$}", v.text(), w = c.width);
                    }
                }
            }
            out.truncate(out.trim_end().len());
            out + "\n"
        }
        Format::Csv => {
            let texts: Vec<String> = cells.iter().map(Cell::text).collect();
            texts.join(", ") + "\n"
        }
        Format::Json => {
            let m: serde_json::Map<_, _> = cols.iter().zip(cells).map(|(c, v)| v.json(c)).collect();
            serde_json::Value::Object(m).to_string() + "\n"
        }
    }
}

/// The columns of the metric groups `s` names, in the order of `groups` (each group's columns
/// as `columns` gives them), or why `s` is not valid (the message for exit status 2).
pub fn parse_groups<C>(
    s: &str,
    groups: &str,
    columns: fn(char) -> &'static [C],
) -> Result<Vec<&'static C>, String> {
    let mut out = Vec::new();
    for g in groups.chars().filter(|g| s.contains(*g)) {
        out.extend(columns(g));
    }
    match s.chars().find(|c| !groups.contains(*c)) {
        None if !out.is_empty() => Ok(out),
        c => Err(format!(
            "-s \"{s}\": '{}' is not a metric group (groups: {groups})",
            c.unwrap_or(' ')
        )),
    }
}

/// The format `--format` and `--json` ask for, or why it is not valid.
pub fn format(format: Option<&str>, json: bool) -> Result<Format, String> {
    match (format, json) {
        (Some(f), _) if f != "csv" => Err(format!("--format=\"{f}\" is not valid (csv)")),
        (_, true) => Ok(Format::Json),
        (None, false) => Ok(Format::Table),
        (Some(_), false) => Ok(Format::Csv),
    }
}

/// A monitor: its header, and what makes its rows of two snapshots `dt` seconds apart
/// (`None`: nothing is left to monitor).
pub struct View {
    pub header: String,
    pub rows: Rows,
}

/// The rows of a [`View`] for the last two snapshots and the seconds between them.
pub type Rows = Box<dyn FnMut(&Snapshot, &Snapshot, f64) -> Option<String>>;

/// Why the monitor stopped: the exit status and a message.
pub type Stop = (u8, String);

/// Prints the view's header, then `count` samples (0: until killed) `delay` apart, reading a
/// new snapshot with `load` each time and printing the view's rows of the last two. Rows are
/// flushed as they are printed. Stops with status 6 once nothing is left, 9 when a snapshot
/// cannot be read, 1 when stdout fails (a closed pipe ends it quietly, status 0).
pub fn run(
    view: View,
    delay: Duration,
    count: u32,
    mut load: impl FnMut() -> Result<Snapshot, String>,
) -> Result<(), Stop> {
    let View { header, mut rows } = view;
    let mut out = std::io::stdout().lock();
    let mut put = |text: &str| -> Result<bool, Stop> {
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err((1, format!("writing the rows: {e}"))),
        }
    };
    if !put(&header)? {
        return Ok(());
    }
    let mut then = load().map_err(|e| (9, e))?;
    let mut at = Instant::now();
    let mut n = 0;
    while count == 0 || n < count {
        std::thread::sleep(delay);
        let now = load().map_err(|e| (9, e))?;
        let t = Instant::now();
        let dt = t.duration_since(at).as_secs_f64();
        let text = rows(&then, &now, dt).ok_or((6, "the selected GPUs are gone".to_string()))?;
        if !put(&text)? {
            return Ok(());
        }
        (then, at) = (now, t);
        n += 1;
    }
    Ok(())
}
