// SPDX-License-Identifier: GPL-2.0

//! Text in and out of nvrs: binary sizes and GPU UUIDs as nvrs prints them (kernel log,
//! debugfs), and the text user space writes to a debugfs control file.
//!
//! A leaf module: it names no other nvrs module, so any layer may use it (`tests/layering.py`).

use core::fmt;

use kernel::prelude::*;

/// Binary (IEC) size formatting: `256 MiB`, `2 GiB`, `640 KiB`.
pub(crate) struct Size(pub(crate) u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
        let mut v = self.0;
        let mut unit = 0;
        while v >= 1024 && v % 1024 == 0 && unit + 1 < UNITS.len() {
            v /= 1024;
            unit += 1;
        }
        write!(f, "{} {}", v, UNITS[unit])
    }
}

impl kernel::fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A GPU UUID in NVIDIA's `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` form.
pub(crate) struct Uuid<'a>(pub(crate) &'a [u8; 16]);

impl fmt::Display for Uuid<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GPU-")?;
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The text written to a debugfs file, trimmed: at most `buf.len()` bytes of it are read into
/// `buf` (the rest is ignored); `-EINVAL` if they are not UTF-8.
pub(crate) fn written_text<'a>(
    reader: &mut kernel::uaccess::UserSliceReader,
    buf: &'a mut [u8],
) -> Result<&'a str> {
    let n = reader.len().min(buf.len());
    let bytes = buf.get_mut(..n).ok_or(EINVAL)?;
    reader.read_slice(bytes)?;
    let text = core::str::from_utf8(bytes).map_err(|_| EINVAL)?;
    Ok(text.trim())
}
