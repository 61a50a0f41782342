//! Video readers for the CLI: y4m and raw `.yuv`.
//!
//! Both formats store planes back to back, chroma planes at their rounded-up size
//! (`(w + 1) / 2` for an odd 4:2:0 width). Pictures use libvmaf's rounded-down chroma size, so a
//! reader consumes the file's planes in full and keeps the part the picture has room for.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::picture::{Picture, PictureData, PixelFormat};

pub mod y4m;
pub mod yuv;

pub use y4m::Y4mReader;
pub use yuv::YuvReader;

/// Stream parameters shared by every frame of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VideoInfo {
    pub width: usize,
    pub height: usize,
    pub pix_fmt: PixelFormat,
    /// Bits per sample, 8..=16; samples deeper than 8 bits are stored as 16-bit little endian.
    pub bpc: u32,
}

impl VideoInfo {
    /// Bytes one frame's samples take in the file (excluding any per-frame header).
    pub fn frame_bytes(&self) -> usize {
        file_plane_dims(self.pix_fmt, self.width, self.height)
            .iter()
            .map(|&(w, h)| w * h)
            .sum::<usize>()
            * bytes_per_sample(self.bpc)
    }
}

/// A source of pictures, read in order.
pub trait VideoReader {
    /// Stream parameters.
    fn info(&self) -> VideoInfo;

    /// The next frame, or `None` at a clean end of stream. A partial frame is an error.
    fn read_frame(&mut self) -> Result<Option<Picture>>;

    /// Frames left to read, when the input size makes that knowable (for progress display).
    fn frames_left_hint(&self) -> Option<u64> {
        None
    }
}

/// Largest picture accepted (luma samples), so a corrupt header cannot request a huge buffer.
const MAX_PIXELS: usize = 1 << 28;

/// Validates a picture size from a header or the command line.
fn check_size(w: usize, h: usize) -> std::result::Result<(), String> {
    if w == 0 || h == 0 || w.checked_mul(h).is_none_or(|n| n > MAX_PIXELS) {
        return Err(format!("bad picture size {w}x{h}"));
    }
    Ok(())
}

fn bytes_per_sample(bpc: u32) -> usize {
    if bpc > 8 {
        2
    } else {
        1
    }
}

/// Plane sizes as stored in files: chroma rounded up.
pub fn file_plane_dims(pix_fmt: PixelFormat, w: usize, h: usize) -> Vec<(usize, usize)> {
    let (sx, sy) = pix_fmt.chroma_shift();
    let c = ((w + (1 << sx) - 1) >> sx, (h + (1 << sy) - 1) >> sy);
    match pix_fmt.plane_count() {
        1 => vec![(w, h)],
        _ => vec![(w, h), c, c],
    }
}

/// Opens `path` as y4m, or as raw planar video when `raw` gives its parameters.
pub fn open(path: &Path, raw: Option<VideoInfo>) -> Result<Box<dyn VideoReader>> {
    Ok(match raw {
        Some(info) => Box::new(YuvReader::open(path, info)?),
        None => Box::new(Y4mReader::open(path)?),
    })
}

/// Fills `buf` from `r`. Returns how many bytes were read: less than `buf.len()` only at end of
/// input.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Converts one frame's file bytes (`info.frame_bytes()` of them) into a picture.
fn picture_from_bytes(info: &VideoInfo, bytes: &[u8]) -> Result<Picture> {
    let mut pic = PictureData::new(info.pix_fmt, info.bpc, info.width, info.height)?;
    let bps = bytes_per_sample(info.bpc);
    let mut pos = 0;
    for (p, &(fw, fh)) in file_plane_dims(info.pix_fmt, info.width, info.height)
        .iter()
        .enumerate()
    {
        let (pw, ph, stride) = (pic.w[p], pic.h[p], pic.stride[p]);
        let plane = &bytes[pos..pos + fw * fh * bps];
        pos += plane.len();
        let rows = plane.chunks_exact(fw * bps).take(ph);
        if bps == 1 {
            let dst = pic.plane_u8_mut(p);
            for (y, row) in rows.enumerate() {
                dst[y * stride..y * stride + pw].copy_from_slice(&row[..pw]);
            }
        } else {
            let max = (1u32 << info.bpc) - 1;
            let dst = pic.plane_u16_mut(p);
            for (y, row) in rows.enumerate() {
                let out = &mut dst[y * stride..y * stride + pw];
                for (d, s) in out.iter_mut().zip(row.chunks_exact(2)) {
                    let v = u16::from_le_bytes([s[0], s[1]]);
                    // Out-of-range samples would index past extractor lookup tables.
                    if u32::from(v) > max {
                        return Err(Error::inval(format!(
                            "sample value {v} exceeds {}-bit range",
                            info.bpc
                        )));
                    }
                    *d = v;
                }
            }
        }
    }
    Ok(Arc::new(pic))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_dims_round_chroma_up() {
        assert_eq!(
            file_plane_dims(PixelFormat::Yuv420p, 5, 3),
            vec![(5, 3), (3, 2), (3, 2)]
        );
        assert_eq!(
            file_plane_dims(PixelFormat::Yuv422p, 5, 3),
            vec![(5, 3), (3, 3), (3, 3)]
        );
        assert_eq!(
            file_plane_dims(PixelFormat::Yuv444p, 5, 3),
            vec![(5, 3), (5, 3), (5, 3)]
        );
        assert_eq!(file_plane_dims(PixelFormat::Yuv400p, 5, 3), vec![(5, 3)]);
    }
}
