// SPDX-License-Identifier: GPL-2.0

//! `pmm`: a picture of a GPU's memory. One cell per 2 MiB root, coloured by what the memory
//! manager holds there (free, one 2 MiB allocation, split into smaller chunks and how full,
//! part of a contiguous run, being moved), pinned roots marked; then a histogram of how free the
//! roots are, which is what fragmentation is. In the terminal and as an SVG file.

use std::fmt::Write;

use owo_colors::{OwoColorize, Rgb};
use svg::node::element::{Rectangle, Text};
use svg::Document;

use crate::model::Gpu;

/// Roots per row.
const WIDTH: usize = 64;

use crate::uapi::{
    root_kind, root_used, ROOT_ALLOCATED as ALLOCATED, ROOT_CONTIG as CONTIG, ROOT_FREE as FREE,
    ROOT_PINNED as PINNED, ROOT_SPLIT as SPLIT, ROOT_TEMP as TEMP,
};

/// What a root byte says.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Root {
    pub kind: u8,
    pub pinned: bool,
    /// Sixteenths in use (split roots; whole roots are 0 or 16).
    pub used: u8,
}

impl Root {
    pub fn from_byte(b: u8) -> Self {
        let kind = root_kind(b);
        let used = match kind {
            FREE => 0,
            SPLIT => root_used(b).max(1),
            _ => 16,
        };
        Self {
            kind,
            pinned: b & PINNED != 0,
            used,
        }
    }

    /// Fill colour.
    fn colour(&self) -> (u8, u8, u8) {
        match self.kind {
            FREE => (0xe6, 0xe6, 0xe6),
            ALLOCATED => (0x1f, 0x77, 0xb4),
            CONTIG => (0x2c, 0xa0, 0x2c),
            TEMP => (0xd6, 0x27, 0x28),
            // Split: light to dark orange as it fills up.
            _ => {
                let f = i32::from(self.used.min(16));
                let lerp = |a: u8, b: u8| {
                    u8::try_from(i32::from(a) + (i32::from(b) - i32::from(a)) * f / 16).unwrap_or(b)
                };
                (lerp(0xfd, 0xe6), lerp(0xd0, 0x55), lerp(0xa2, 0x0d))
            }
        }
    }

    /// Terminal glyph.
    fn glyph(&self) -> char {
        match (self.kind, self.pinned) {
            (_, true) => 'P',
            (FREE, _) => '.',
            (ALLOCATED, _) => 'A',
            (CONTIG, _) => 'C',
            (TEMP, _) => 'T',
            _ => char::from_digit(u32::from(self.used.min(15)), 16).unwrap_or('S'),
        }
    }
}

/// Histogram buckets of free space per root: `(label, count)`.
pub fn histogram(g: &Gpu) -> Vec<(&'static str, usize)> {
    let mut b = [0usize; 6];
    for &r in &g.roots {
        let r = Root::from_byte(r);
        let free16 = 16 - r.used.min(16);
        let i = match free16 {
            16 => 0,
            12..=15 => 1,
            8..=11 => 2,
            4..=7 => 3,
            1..=3 => 4,
            _ => 5,
        };
        b[i] += 1;
    }
    vec![
        ("all free", b[0]),
        ("75-99% free", b[1]),
        ("50-74% free", b[2]),
        ("25-49% free", b[3]),
        ("1-24% free", b[4]),
        ("full", b[5]),
    ]
}

/// The line above a map: the GPU and how fragmented its memory is.
fn title(g: &Gpu) -> String {
    let f = g.pmm.fragmentation_permille;
    format!(
        "GPU {} {} ({}): {} roots of 2 MiB, {} MiB free, largest free block {}, fragmentation {}.{} %",
        g.index,
        g.name,
        g.bus_id,
        g.roots.len(),
        g.fb.free >> 20,
        crate::render::size(g.pmm.largest_free),
        f / 10,
        f % 10
    )
}

/// The map in the terminal: coloured cells if `colour`, glyphs otherwise.
pub fn terminal(g: &Gpu, colour: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}", title(g));
    for (row, chunk) in g.roots.chunks(WIDTH).enumerate() {
        let _ = write!(o, "{:>8} ", format!("{}M", row * WIDTH * 2));
        for &b in chunk {
            let r = Root::from_byte(b);
            if colour {
                let (red, green, blue) = r.colour();
                let cell = if r.pinned { "▪" } else { "█" };
                let _ = write!(o, "{}", cell.color(Rgb(red, green, blue)));
            } else {
                o.push(r.glyph());
            }
        }
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "legend: {} free  {} 2 MiB allocation  {} split (0-f: sixteenths used)  {} contiguous run  {} being moved  {} pinned",
        if colour { "█".color(Rgb(0xe6, 0xe6, 0xe6)).to_string() } else { ".".into() },
        if colour { "█".color(Rgb(0x1f, 0x77, 0xb4)).to_string() } else { "A".into() },
        if colour { "█".color(Rgb(0xf0, 0x90, 0x50)).to_string() } else { "0-f".into() },
        if colour { "█".color(Rgb(0x2c, 0xa0, 0x2c)).to_string() } else { "C".into() },
        if colour { "█".color(Rgb(0xd6, 0x27, 0x28)).to_string() } else { "T".into() },
        if colour { "▪".to_string() } else { "P".into() },
    );
    let _ = writeln!(o, "roots by free space:");
    let hist = histogram(g);
    let max = hist.iter().map(|h| h.1).max().unwrap_or(0).max(1);
    for (label, n) in hist {
        let bar = "#".repeat(n * 50 / max + usize::from(n > 0 && n * 50 / max == 0));
        let _ = writeln!(o, "  {label:>12} {n:>6} {bar}");
    }
    o
}

/// The map as an SVG document.
pub fn svg(g: &Gpu) -> String {
    let cell = 10usize;
    let rows = g.roots.len().div_ceil(WIDTH);
    let top = 40;
    let map_h = rows * cell;
    let hist = histogram(g);
    let hist_top = top + map_h + 50;
    let height = hist_top + hist.len() * 18 + 20;
    let width = 90 + WIDTH * cell + 90;
    let mut doc = Document::new()
        .set("viewBox", (0, 0, width, height))
        .set("width", width)
        .set("height", height)
        .set("font-family", "monospace")
        .set("font-size", 11)
        .add(
            Rectangle::new()
                .set("width", width)
                .set("height", height)
                .set("fill", "white"),
        )
        .add(Text::new(title(g)).set("x", 10).set("y", 20));
    for (i, &b) in g.roots.iter().enumerate() {
        let r = Root::from_byte(b);
        let (red, green, blue) = r.colour();
        let (x, y) = (90 + (i % WIDTH) * cell, top + (i / WIDTH) * cell);
        let mut rect = Rectangle::new()
            .set("x", x)
            .set("y", y)
            .set("width", cell - 1)
            .set("height", cell - 1)
            .set("fill", format!("#{red:02x}{green:02x}{blue:02x}"));
        if r.pinned {
            rect = rect.set("stroke", "black").set("stroke-width", 2);
        }
        doc = doc.add(rect);
        if i % WIDTH == 0 {
            doc = doc.add(
                Text::new(format!("{} MiB", i * 2))
                    .set("x", 10)
                    .set("y", y + cell - 1),
            );
        }
    }
    let legend = [
        ("free", "#e6e6e6"),
        ("2 MiB allocation", "#1f77b4"),
        ("split (darker: fuller)", "#f09050"),
        ("contiguous run", "#2ca02c"),
        ("being moved", "#d62728"),
    ];
    let ly = top + map_h + 20;
    let mut lx = 90;
    let swatch = |x: usize| {
        Rectangle::new()
            .set("x", x)
            .set("y", ly - 9)
            .set("width", 9)
            .set("height", 9)
    };
    for (label, colour) in legend {
        doc = doc
            .add(swatch(lx).set("fill", colour))
            .add(Text::new(label).set("x", lx + 12).set("y", ly));
        lx += 12 + label.len() * 7 + 14;
    }
    doc = doc
        .add(
            swatch(lx)
                .set("fill", "white")
                .set("stroke", "black")
                .set("stroke-width", 2),
        )
        .add(Text::new("pinned").set("x", lx + 12).set("y", ly));
    let max = hist.iter().map(|h| h.1).max().unwrap_or(0).max(1);
    doc = doc.add(
        Text::new("roots by free space")
            .set("x", 10)
            .set("y", hist_top - 8),
    );
    for (k, (label, n)) in hist.iter().enumerate() {
        let y = hist_top + k * 18;
        doc = doc
            .add(Text::new(*label).set("x", 10).set("y", y + 11))
            .add(
                Rectangle::new()
                    .set("x", 110)
                    .set("y", y)
                    .set(
                        "width",
                        (n * (WIDTH * cell - 60) / max).max(usize::from(*n > 0)),
                    )
                    .set("height", 13)
                    .set("fill", "#888888"),
            )
            .add(
                Text::new(n.to_string())
                    .set("x", 110 + n * (WIDTH * cell - 60) / max + 6)
                    .set("y", y + 11),
            );
    }
    doc.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_bytes_decode() {
        assert_eq!(
            Root::from_byte(0),
            Root {
                kind: FREE,
                pinned: false,
                used: 0
            }
        );
        assert_eq!(
            Root::from_byte(0x82),
            Root {
                kind: SPLIT,
                pinned: false,
                used: 8
            }
        );
        assert_eq!(
            Root::from_byte(0x0a),
            Root {
                kind: SPLIT,
                pinned: true,
                used: 1
            }
        );
        assert_eq!(Root::from_byte(0x01).used, 16);
        assert_eq!(Root::from_byte(0x82).glyph(), '8');
        assert_eq!(Root::from_byte(0x09).glyph(), 'P');
    }
}
