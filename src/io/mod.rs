//! Video readers for the CLI: y4m and raw `.yuv`.
//!
//! Both formats store planes back to back, chroma planes at their rounded-up size
//! (`(w + 1) / 2` for an odd 4:2:0 width). Pictures use libvmaf's rounded-down chroma size, so a
//! reader consumes the file's planes in full and keeps the part the picture has room for.

#![forbid(unsafe_code)]

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::picture::{Picture, PictureData, PixelFormat};

pub mod y4m;
pub mod yuv;

pub use y4m::Y4mReader;
pub use yuv::YuvReader;

/// A raw input's bit depth: 8, 10, 12 or 16.
pub fn raw_bitdepth(bpc: u32) -> Result<u32> {
    match bpc {
        8 | 10 | 12 | 16 => Ok(bpc),
        _ => Err(Error::inval(format!(
            "bitdepth {bpc}: should be 8, 10, 12 or 16"
        ))),
    }
}

/// A raw input's pixel format: `420`, `422`, `444`, `400`, or FFmpeg's `yuv420p`, `yuv422p`,
/// `yuv444p`, `gray`/`yuv400p`.
pub fn raw_pixel_format(s: &str) -> Result<PixelFormat> {
    Ok(match s {
        "420" | "yuv420p" => PixelFormat::Yuv420p,
        "422" | "yuv422p" => PixelFormat::Yuv422p,
        "444" | "yuv444p" => PixelFormat::Yuv444p,
        "400" | "gray" | "yuv400p" => PixelFormat::Yuv400p,
        _ => {
            return Err(Error::inval(format!(
                "pixel_format {s:?}: should be 420, 422, 444 or 400"
            )))
        }
    })
}

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
    /// A raw `.yuv` input's geometry from its four settings (the CLI's `-w -h -p -b`, Python's
    /// `width`, `height`, `pixel_format`, `bitdepth`): None when none is given (y4m input),
    /// else all four, the bit depth 8, 10, 12 or 16. `names` lists the settings for the error
    /// when only some are given.
    pub fn raw(
        width: Option<u32>,
        height: Option<u32>,
        pix_fmt: Option<PixelFormat>,
        bpc: Option<u32>,
        names: &str,
    ) -> Result<Option<Self>> {
        match (width, height, pix_fmt, bpc) {
            (None, None, None, None) => Ok(None),
            (Some(w), Some(h), Some(pix_fmt), Some(bpc)) => Ok(Some(VideoInfo {
                width: w as usize,
                height: h as usize,
                pix_fmt,
                bpc: raw_bitdepth(bpc)?,
            })),
            _ => Err(Error::inval(format!("raw .yuv input needs all of {names}"))),
        }
    }

    /// Bytes one frame's samples take in the file (excluding any per-frame header).
    pub fn frame_bytes(&self) -> usize {
        file_plane_dims(self.pix_fmt, self.width, self.height)
            .iter()
            .map(|&(w, h)| w * h)
            .sum::<usize>()
            * bytes_per_sample(self.bpc)
    }

    /// [`Self::frame_bytes`], or `None` where it does not fit a `usize`.
    pub fn checked_frame_bytes(&self) -> Option<usize> {
        let mut total = 0usize;
        for (w, h) in file_plane_dims(self.pix_fmt, self.width, self.height) {
            total = total.checked_add(w.checked_mul(h)?)?;
        }
        total.checked_mul(bytes_per_sample(self.bpc))
    }
}

/// A source of pictures, read in order.
pub trait VideoReader: Send {
    /// Stream parameters.
    fn info(&self) -> VideoInfo;

    /// Reads the next frame into a picture from `get` (of [`Self::info`]'s size and format:
    /// from a pool, say), called only once a frame is known to follow where the format tells;
    /// `None` at a clean end of stream. A partial frame is an error.
    fn read_frame_with(
        &mut self,
        get: &mut dyn FnMut() -> Result<PictureData>,
    ) -> Result<Option<PictureData>>;

    /// The next frame in a picture of its own, or `None` at a clean end of stream.
    fn read_frame(&mut self) -> Result<Option<Picture>> {
        let i = self.info();
        let mut get = || PictureData::for_writing(i.pix_fmt, i.bpc, i.width, i.height);
        Ok(self.read_frame_with(&mut get)?.map(Arc::new))
    }

    /// Frames left to read, when the input size makes that knowable (for progress display).
    fn frames_left_hint(&self) -> Option<u64> {
        None
    }

    /// Where the frames not read yet lie, when all have the same size at a fixed distance in a
    /// regular file (raw input; y4m whose frame headers are all a bare `FRAME`): then threads
    /// can read different frames at once ([`FrameReaderAt`]).
    fn layout(&self) -> Option<FrameLayout> {
        None
    }

    /// Things about the input a user should hear of (e.g. bytes that will be ignored).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Largest picture accepted (luma samples), so a corrupt header cannot request a huge buffer.
pub const MAX_PIXELS: usize = 1 << 28;

/// Largest width or height accepted.
pub const MAX_SIDE: usize = 1 << 16;

/// Validates a picture size from a header or the command line.
fn check_size(w: usize, h: usize) -> std::result::Result<(), String> {
    if w == 0
        || h == 0
        || w > MAX_SIDE
        || h > MAX_SIDE
        || w.checked_mul(h).is_none_or(|n| n > MAX_PIXELS)
    {
        return Err(format!(
            "bad picture size {w}x{h} (each side must be 1 to {MAX_SIDE}, and width x height at \
             most {MAX_PIXELS})"
        ));
    }
    Ok(())
}

/// Checks, before anything is allocated, that `left` bytes of a regular file can hold a frame
/// of `frame` bytes (`what` describes where its size comes from). No bytes at all is a clean
/// end of stream, not an error.
fn check_fits(
    name: &str,
    what: &str,
    info: &VideoInfo,
    frame: Option<usize>,
    left: u64,
) -> Result<()> {
    let fits = frame.is_some_and(|f| left >= f as u64);
    if left == 0 || fits {
        return Ok(());
    }
    let size = frame.map_or_else(|| "more than 2^64".to_string(), |f| f.to_string());
    Err(Error::inval(format!(
        "{name}: truncated: {what} {}x{} ({size} bytes a frame) but the file holds {left} bytes",
        info.width, info.height
    )))
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

/// Opens `path` as y4m, or as raw planar video when `raw` gives its parameters. A file that
/// starts with the y4m signature is read as y4m even when `raw` is given (raw parameters would
/// read its headers as samples): it must then agree with them, and a warning says they were
/// not needed.
/// Checks that the inputs at `ref_path` (`a`) and `dist_path` (`b`) can be scored together:
/// same size and pixel format, and the same bit depth unless `common_bitdepth` (the caller
/// converts both to one). The error names both files and every difference.
pub fn check_compatible(
    ref_path: &Path,
    a: &VideoInfo,
    dist_path: &Path,
    b: &VideoInfo,
    common_bitdepth: bool,
) -> Result<()> {
    let sampling = |f: PixelFormat| match f {
        PixelFormat::Yuv420p => "4:2:0",
        PixelFormat::Yuv422p => "4:2:2",
        PixelFormat::Yuv444p => "4:4:4",
        PixelFormat::Yuv400p => "4:0:0",
        PixelFormat::Unknown => "unknown",
    };
    let mut problems = Vec::new();
    if (a.width, a.height) != (b.width, b.height) {
        problems.push(format!(
            "dimensions differ ({}x{} vs {}x{})",
            a.width, a.height, b.width, b.height
        ));
    }
    if a.pix_fmt != b.pix_fmt {
        problems.push(format!(
            "pixel formats differ ({} vs {})",
            sampling(a.pix_fmt),
            sampling(b.pix_fmt)
        ));
    }
    if a.bpc != b.bpc && !common_bitdepth {
        problems.push(format!("bit depths differ ({} vs {})", a.bpc, b.bpc));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::inval(format!(
        "{} and {} are incompatible: {}",
        ref_path.display(),
        dist_path.display(),
        problems.join(", ")
    )))
}

pub fn open(path: &Path, raw: Option<VideoInfo>) -> Result<Box<dyn VideoReader>> {
    let Some(info) = raw else {
        return Ok(Box::new(Y4mReader::open(path)?));
    };
    if !starts_like_y4m(path) {
        return Ok(Box::new(YuvReader::open(path, info)?));
    }
    let mut r = Y4mReader::open(path)?;
    let have = r.info();
    if have != info {
        return Err(Error::inval(format!(
            "{}: a y4m file of {}x{} {:?} {}-bit, but -w/-h/-p/-b say {}x{} {:?} {}-bit (y4m inputs need no -w/-h/-p/-b)",
            path.display(),
            have.width,
            have.height,
            have.pix_fmt,
            have.bpc,
            info.width,
            info.height,
            info.pix_fmt,
            info.bpc
        )));
    }
    r.add_warning(format!(
        "{} is a y4m file: read with its own header (-w/-h/-p/-b agree and are not needed)",
        path.display()
    ));
    Ok(Box::new(r))
}

/// Whether the file at `path` begins with the y4m signature (false when unreadable: the
/// reader that opens it reports why).
fn starts_like_y4m(path: &Path) -> bool {
    let mut head = [0u8; 10];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"YUV4MPEG2 ")
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

/// Frames at fixed offsets of a file (see [`VideoReader::layout`]).
#[derive(Debug, Clone)]
pub struct FrameLayout {
    pub info: VideoInfo,
    /// Offset of the next frame (its header, if any).
    pub first: u64,
    /// Distance from one frame to the next.
    pub pitch: u64,
    /// The header every frame starts with (`FRAME\n`, or nothing).
    pub header: &'static [u8],
    /// Sample bytes after the planes that are skipped (a y4m alpha plane).
    pub extra: usize,
    /// Frames left.
    pub frames: u64,
    /// Index of the next frame in the input, for messages.
    pub index: usize,
}

/// Reads frames of a [`FrameLayout`] by position, from any number of threads at once.
pub struct FrameReaderAt {
    file: std::fs::File,
    name: String,
    layout: FrameLayout,
}

/// A [`Read`] at a moving offset of a shared file.
struct At<'a> {
    file: &'a std::fs::File,
    pos: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl FrameReaderAt {
    /// Opens `path` again for the frames `layout` describes; `None` when the first or the
    /// last frame does not start with the expected header (frame parameters whose lengths add
    /// up by chance): such inputs are read in order.
    pub fn open(path: &Path, layout: FrameLayout) -> Result<Option<Self>> {
        let name = path.display().to_string();
        let file =
            std::fs::File::open(path).map_err(|e| Error::io(format!("cannot open {name}"), e))?;
        let r = FrameReaderAt { file, name, layout };
        if r.layout.frames > 0 {
            for k in [0, r.layout.frames - 1] {
                let mut at = r.at(k);
                let whole = r.header_at(&mut at).map_err(|e| r.io_err(k, e))?;
                if !whole {
                    return Ok(None);
                }
            }
        }
        Ok(Some(r))
    }

    /// A reader at frame `k`'s first byte.
    fn at(&self, k: u64) -> At<'_> {
        At {
            file: &self.file,
            pos: self.layout.first + k * self.layout.pitch,
        }
    }

    /// Reads a frame's header at `at`; whether it is the expected one.
    fn header_at(&self, at: &mut At<'_>) -> std::io::Result<bool> {
        let want = self.layout.header;
        let mut head = [0u8; 8];
        let head = &mut head[..want.len()];
        Ok(read_full(at, head)? == head.len() && head == want)
    }

    fn io_err(&self, k: u64, e: std::io::Error) -> Error {
        Error::io(
            format!("{}: frame {}", self.name, self.layout.index as u64 + k),
            e,
        )
    }

    /// Frames it holds.
    pub fn frames(&self) -> u64 {
        self.layout.frames
    }

    /// Frame `k` (counted from the layout's first) in a picture from `get`, or `None` past
    /// the last; `scratch` is the calling thread's row buffer.
    pub fn read(
        &self,
        k: u64,
        get: &mut dyn FnMut() -> Result<PictureData>,
        scratch: &mut Vec<u8>,
    ) -> Result<Option<PictureData>> {
        let l = &self.layout;
        if k >= l.frames {
            return Ok(None);
        }
        let index = l.index as u64 + k;
        let fail = |msg: String| Error::inval(format!("{}: frame {index}: {msg}", self.name));
        let mut at = self.at(k);
        if !self.header_at(&mut at).map_err(|e| self.io_err(k, e))? {
            return Err(fail("bad frame header (expected a bare FRAME line)".into()));
        }
        let mut pic = get()?;
        check_target(&l.info, &pic).map_err(|e| fail(e.to_string()))?;
        match read_into(&mut at, &l.info, l.extra, &mut pic, scratch) {
            Ok(Filled::Whole) => Ok(Some(pic)),
            Ok(Filled::Short(n)) => Err(fail(format!("truncated after {n} bytes"))),
            Err(FrameError::Io(e)) => Err(self.io_err(k, e)),
            Err(FrameError::Bad(e)) => Err(fail(e.to_string())),
        }
    }
}

/// How reading one frame into a picture ended.
enum Filled {
    /// Every byte of the frame was read.
    Whole,
    /// The input ended after this many bytes of the frame (0: a clean end).
    Short(usize),
}

/// Why a frame could not be read.
enum FrameError {
    Io(std::io::Error),
    /// Bad content (a sample out of range) or no memory for a row buffer.
    Bad(Error),
}

/// Reads one frame, `info.frame_bytes()` bytes plus `extra` bytes that are discarded, from
/// `src` into `pic` (whose size and format are `info`'s). Planes whose file rows are the
/// picture's rows are read straight into the picture; the others (odd sizes, padded strides)
/// go through `scratch` row by row.
fn read_into(
    src: &mut dyn Read,
    info: &VideoInfo,
    extra: usize,
    pic: &mut PictureData,
    scratch: &mut Vec<u8>,
) -> std::result::Result<Filled, FrameError> {
    let bps = bytes_per_sample(info.bpc);
    let max = (1u32 << info.bpc) - 1;
    let mut total = 0;
    for (p, &(fw, fh)) in file_plane_dims(info.pix_fmt, info.width, info.height)
        .iter()
        .enumerate()
    {
        let (pw, ph, stride) = (pic.w[p], pic.h[p], pic.stride[p]);
        let len = fw * fh * bps;
        let n = if (fw, fh) == (pw, ph) && (stride == pw || ph == 1) {
            let n = if bps == 1 {
                read_full(src, &mut pic.plane_u8_mut(p)[..len])
            } else {
                read_full(
                    src,
                    bytemuck::cast_slice_mut(&mut pic.plane_u16_mut(p)[..fw * fh]),
                )
            }
            .map_err(FrameError::Io)?;
            if bps == 2 && n == len {
                // The file's samples are little endian; the picture's are native.
                let plane = &mut pic.plane_u16_mut(p)[..fw * fh];
                for v in plane.iter_mut() {
                    *v = u16::from_le(*v);
                }
                check_range(plane, max).map_err(FrameError::Bad)?;
            }
            n
        } else {
            let buf = scratch_of(scratch, len).map_err(FrameError::Bad)?;
            let n = read_full(src, buf).map_err(FrameError::Io)?;
            if n == len {
                rows_into(pic, p, buf, fw * bps, max).map_err(FrameError::Bad)?;
            }
            n
        };
        total += n;
        if n < len {
            return Ok(Filled::Short(total));
        }
    }
    if extra > 0 {
        let buf = scratch_of(scratch, extra).map_err(FrameError::Bad)?;
        let n = read_full(src, buf).map_err(FrameError::Io)?;
        if n < extra {
            return Ok(Filled::Short(total + n));
        }
    }
    Ok(Filled::Whole)
}

/// The first `len` bytes of `scratch`, grown fallibly.
fn scratch_of(scratch: &mut Vec<u8>, len: usize) -> Result<&mut [u8]> {
    if scratch.len() < len {
        scratch
            .try_reserve_exact(len - scratch.len())
            .map_err(|_| Error::NoMem(format!("cannot allocate {len} bytes for a plane")))?;
        scratch.resize(len, 0);
    }
    Ok(&mut scratch[..len])
}

/// Out-of-range samples would index past extractor lookup tables.
fn check_range(samples: &[u16], max: u32) -> Result<()> {
    // A branch-free maximum over the plane vectorises; the offending value is looked up only
    // when there is one.
    let top = samples.iter().fold(0u16, |m, &v| m.max(v));
    if u32::from(top) <= max {
        return Ok(());
    }
    let v = samples
        .iter()
        .find(|&&v| u32::from(v) > max)
        .unwrap_or(&top);
    Err(Error::inval(format!(
        "sample value {v} exceeds {}-bit range",
        max.count_ones()
    )))
}

/// Copies plane `p`'s file rows (`row` bytes each) from `bytes` into `pic`, keeping the part
/// the picture has room for.
fn rows_into(pic: &mut PictureData, p: usize, bytes: &[u8], row: usize, max: u32) -> Result<()> {
    let (pw, ph, stride) = (pic.w[p], pic.h[p], pic.stride[p]);
    let rows = bytes.chunks_exact(row).take(ph);
    if pic.bpc == 8 {
        let dst = pic.plane_u8_mut(p);
        for (y, src) in rows.enumerate() {
            dst[y * stride..y * stride + pw].copy_from_slice(&src[..pw]);
        }
    } else {
        let dst = pic.plane_u16_mut(p);
        for (y, src) in rows.enumerate() {
            let out = &mut dst[y * stride..y * stride + pw];
            for (d, s) in out.iter_mut().zip(src.chunks_exact(2)) {
                *d = u16::from_le_bytes([s[0], s[1]]);
            }
            check_range(out, max)?;
        }
    }
    Ok(())
}

/// Checks that `pic` can take frames of `info`.
fn check_target(info: &VideoInfo, pic: &PictureData) -> Result<()> {
    if (pic.w[0], pic.h[0], pic.pix_fmt, pic.bpc)
        != (info.width, info.height, info.pix_fmt, info.bpc)
    {
        return Err(Error::inval(format!(
            "a {}x{} {:?} {}-bit picture cannot take a {}x{} {:?} {}-bit frame",
            pic.w[0],
            pic.h[0],
            pic.pix_fmt,
            pic.bpc,
            info.width,
            info.height,
            info.pix_fmt,
            info.bpc
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_settings_all_or_none() {
        let names = "w, h, p and b";
        assert_eq!(VideoInfo::raw(None, None, None, None, names).unwrap(), None);
        let fmt = raw_pixel_format("yuv422p").unwrap();
        assert_eq!(fmt, raw_pixel_format("422").unwrap());
        assert_eq!(
            VideoInfo::raw(Some(64), Some(48), Some(fmt), Some(10), names).unwrap(),
            Some(VideoInfo {
                width: 64,
                height: 48,
                pix_fmt: PixelFormat::Yuv422p,
                bpc: 10
            })
        );
        let err = |r: Result<Option<VideoInfo>>| match r {
            Err(Error::Invalid(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(err(VideoInfo::raw(Some(64), None, None, None, names)).contains(names));
        assert!(err(VideoInfo::raw(
            Some(64),
            Some(48),
            Some(fmt),
            Some(9),
            names
        ))
        .contains("9"));
        assert!(matches!(raw_pixel_format("nv12"), Err(Error::Invalid(_))));
    }

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

    #[test]
    fn sizes_are_checked() {
        assert!(check_size(65536, 4096).is_ok());
        assert!(check_size(1, 65536).is_ok());
        let e = check_size(65537, 1).unwrap_err();
        assert!(e.contains("65537x1") && e.contains("1 to 65536"), "{e}");
        assert!(check_size(1, 0).is_err());
        assert!(check_size(65536, 65536).unwrap_err().contains("268435456"));
        let info = |w, h| VideoInfo {
            width: w,
            height: h,
            pix_fmt: PixelFormat::Yuv420p,
            bpc: 10,
        };
        assert_eq!(info(5, 3).checked_frame_bytes(), Some(2 * (15 + 2 * 6)));
        assert_eq!(info(usize::MAX, 2).checked_frame_bytes(), None);
        assert!(check_fits("a", "says", &info(2, 2), Some(12), 0).is_ok());
        assert!(check_fits("a", "says", &info(2, 2), Some(12), 12).is_ok());
        let e = check_fits("a.y4m", "the header says", &info(2, 2), Some(12), 11)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a.y4m: truncated: the header says 2x2 (12 bytes a frame) but the file holds 11 bytes"),
            "{e}"
        );
        let e = check_fits("a", "says", &info(usize::MAX, 2), None, 5).unwrap_err();
        assert!(e.to_string().contains("more than 2^64"), "{e}");
    }

    #[test]
    fn row_buffer_allocation_is_fallible() {
        let mut v = Vec::new();
        assert_eq!(scratch_of(&mut v, 3).unwrap(), [0, 0, 0]);
        let e = scratch_of(&mut v, usize::MAX / 2).unwrap_err();
        assert!(matches!(e, Error::NoMem(_)), "{e}");
        assert!(e.to_string().contains("cannot allocate"), "{e}");
    }
}
