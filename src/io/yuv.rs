//! Raw planar reader: frames of Y, U, V planes (Y only for 4:0:0) with no headers; samples
//! deeper than 8 bits are 16-bit little endian.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::{
    check_fits, check_size, check_target, read_into, Filled, FrameError, VideoInfo, VideoReader,
};
use crate::error::{Error, Result};
use crate::picture::PictureData;

/// Reads raw planar frames of known size and format.
pub struct YuvReader<R = BufReader<File>> {
    src: R,
    name: String,
    info: VideoInfo,
    frame: usize,
    /// Bytes of one frame.
    frame_len: usize,
    /// Row buffer for planes not read in place.
    scratch: Vec<u8>,
    /// Frames left according to the file size, when known.
    left: Option<u64>,
    /// Bytes after the last whole frame of a regular file (ignored, with a warning).
    tail: u64,
}

impl YuvReader {
    /// Opens a raw file with the given parameters.
    pub fn open(path: &Path, info: VideoInfo) -> Result<Self> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::io(format!("cannot open {name}"), e))?;
        // Only a regular file's length says how much data there is.
        let len = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        if let Some(len) = len {
            // Before the size limits, so a wrong -w/-h reads as what it is.
            let what = "-w/-h/-p/-b say";
            check_fits(&name, what, &info, info.checked_frame_bytes(), len)?;
        }
        let mut r = YuvReader::new(BufReader::with_capacity(1 << 20, file), &name, info)?;
        r.left = len.map(|l| l / r.frame_len as u64);
        r.tail = len.map_or(0, |l| l % r.frame_len as u64);
        Ok(r)
    }
}

impl<R: Read> YuvReader<R> {
    /// Wraps `src`; `name` labels error messages.
    pub fn new(src: R, name: &str, info: VideoInfo) -> Result<Self> {
        check_size(info.width, info.height).map_err(|m| Error::inval(format!("{name}: {m}")))?;
        if !(8..=16).contains(&info.bpc) || info.pix_fmt.plane_count() == 0 {
            return Err(Error::inval(format!(
                "{name}: unsupported format {:?} at {} bits",
                info.pix_fmt, info.bpc
            )));
        }
        Ok(YuvReader {
            src,
            name: name.to_string(),
            info,
            frame: 0,
            // Within the size limits this cannot overflow.
            frame_len: info.frame_bytes(),
            scratch: Vec::new(),
            left: None,
            tail: 0,
        })
    }
}

impl<R: Read + Send> VideoReader for YuvReader<R> {
    fn info(&self) -> VideoInfo {
        self.info
    }

    fn read_frame_with(
        &mut self,
        get: &mut dyn FnMut() -> Result<PictureData>,
    ) -> Result<Option<PictureData>> {
        // A regular file's whole frames are all read: what follows is the tail warned about.
        if self.tail > 0 && self.left == Some(0) {
            return Ok(None);
        }
        let fail =
            |msg: String| Error::inval(format!("{}: frame {}: {msg}", self.name, self.frame));
        let mut pic = get()?;
        check_target(&self.info, &pic).map_err(|e| fail(e.to_string()))?;
        match read_into(&mut self.src, &self.info, 0, &mut pic, &mut self.scratch) {
            Err(FrameError::Io(e)) => {
                return Err(Error::io(format!("{}: frame {}", self.name, self.frame), e))
            }
            Err(FrameError::Bad(e)) => return Err(fail(e.to_string())),
            Ok(Filled::Short(0)) => return Ok(None),
            Ok(Filled::Short(n)) => {
                return Err(fail(format!(
                    "truncated: {n} of {} bytes (check -w/-h/-p/-b)",
                    self.frame_len
                )))
            }
            Ok(Filled::Whole) => {}
        }
        self.frame += 1;
        if let Some(l) = &mut self.left {
            *l = l.saturating_sub(1);
        }
        Ok(Some(pic))
    }

    fn frames_left_hint(&self) -> Option<u64> {
        self.left
    }

    fn layout(&self) -> Option<super::FrameLayout> {
        // Only a regular file (whose length gave `left`) has positions.
        let frames = self.left?;
        Some(super::FrameLayout {
            info: self.info,
            first: self.frame as u64 * self.frame_len as u64,
            pitch: self.frame_len as u64,
            header: b"",
            extra: 0,
            frames,
            index: self.frame,
        })
    }

    fn warnings(&self) -> Vec<String> {
        if self.tail == 0 {
            return Vec::new();
        }
        vec![format!(
            "{}: the file is not a whole number of frames for -w/-h/-p/-b ({} x {} {:?} {}-bit is {} bytes a frame); its last {} bytes are ignored",
            self.name,
            self.info.width,
            self.info.height,
            self.info.pix_fmt,
            self.info.bpc,
            self.frame_len,
            self.tail
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::PixelFormat;

    fn info(w: usize, h: usize, pix_fmt: PixelFormat, bpc: u32) -> VideoInfo {
        VideoInfo {
            width: w,
            height: h,
            pix_fmt,
            bpc,
        }
    }

    #[test]
    fn reads_422_8bit_frames() {
        // 4x2 4:2:2: 8 luma + 2x2 per chroma plane = 16 bytes a frame.
        let data: Vec<u8> = (0..32).collect();
        let mut r =
            YuvReader::new(&data[..], "a.yuv", info(4, 2, PixelFormat::Yuv422p, 8)).unwrap();
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!((p.w[1], p.h[1]), (2, 2));
        assert_eq!(
            (p.sample(0, 3, 1), p.sample(1, 1, 1), p.sample(2, 0, 0)),
            (7, 11, 12)
        );
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!(p.sample(0, 0, 0), 16);
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn odd_sizes_use_rounded_up_file_planes() {
        // 5x3 4:2:0: file chroma 3x2 (6 bytes), picture chroma 2x1.
        let mut frame: Vec<u8> = vec![0; 15];
        frame.extend([10, 11, 12, 13, 14, 15]);
        frame.extend([20, 21, 22, 23, 24, 25]);
        let mut data = frame.clone();
        data.extend(frame.iter().map(|v| v + 100));
        let mut r =
            YuvReader::new(&data[..], "odd.yuv", info(5, 3, PixelFormat::Yuv420p, 8)).unwrap();
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!((p.w, p.h), ([5, 2, 2], [3, 1, 1]));
        assert_eq!((p.sample(1, 0, 0), p.sample(1, 1, 0)), (10, 11));
        assert_eq!((p.sample(2, 0, 0), p.sample(2, 1, 0)), (20, 21));
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!((p.sample(0, 4, 2), p.sample(1, 1, 0)), (100, 111));
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn reads_10bit_and_mono() {
        let le = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let data = le(&[1, 2, 1000, 4, 5, 6]);
        let mut r =
            YuvReader::new(&data[..], "m.yuv", info(3, 2, PixelFormat::Yuv400p, 10)).unwrap();
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!((p.bpc, p.pix_fmt), (10, PixelFormat::Yuv400p));
        assert_eq!(p.sample(0, 2, 0), 1000);
        assert_eq!(p.sample(0, 2, 1), 6);
        assert!(r.read_frame().unwrap().is_none());

        let data = le(&[0x3ff; 6]);
        let mut r =
            YuvReader::new(&data[..], "c.yuv", info(2, 1, PixelFormat::Yuv444p, 10)).unwrap();
        assert_eq!(r.read_frame().unwrap().unwrap().sample(2, 1, 0), 1023);
    }

    #[test]
    fn truncated_file_is_an_error() {
        let data = [0u8; 6 + 3];
        let mut r =
            YuvReader::new(&data[..], "t.yuv", info(2, 2, PixelFormat::Yuv420p, 8)).unwrap();
        assert!(r.read_frame().unwrap().is_some());
        let e = r.read_frame().unwrap_err().to_string();
        assert!(e.contains("t.yuv: frame 1: truncated: 3 of 6 bytes"), "{e}");
    }

    #[test]
    fn bad_parameters_are_errors() {
        let e = YuvReader::new(&[][..], "z.yuv", info(0, 2, PixelFormat::Yuv420p, 8))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("z.yuv: bad picture size 0x2 (each side"), "{e}");
        let e = YuvReader::new(&[][..], "z.yuv", info(2, 2, PixelFormat::Unknown, 8))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unsupported format"), "{e}");
    }

    #[test]
    fn frame_larger_than_file_is_an_error_before_allocating() {
        let p = std::env::temp_dir().join(format!("vmaf-yuv-{}-small.yuv", std::process::id()));
        std::fs::write(&p, [0u8; 100]).unwrap();
        let e = YuvReader::open(&p, info(1, 268435456, PixelFormat::Yuv420p, 8))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(&format!(
                "{}: truncated: -w/-h/-p/-b say 1x268435456 (536870912 bytes a frame) but the \
                 file holds 100 bytes",
                p.display()
            )),
            "{e}"
        );
        // Sizes that fit the file still face the limits.
        let e = YuvReader::open(&p, info(100, 1, PixelFormat::Yuv400p, 8));
        assert!(e.is_ok());
        let e = YuvReader::open(&p, info(65537, 0, PixelFormat::Yuv400p, 8))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("each side must be 1 to 65536"), "{e}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn missing_file_names_the_file() {
        let e = YuvReader::open(
            Path::new("/nonexistent/x.yuv"),
            info(2, 2, PixelFormat::Yuv420p, 8),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("cannot open /nonexistent/x.yuv"), "{e}");
    }
}
