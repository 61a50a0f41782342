//! YUV4MPEG2 reader: stream header tags `W H F I A C X`, then `FRAME[ params]\n` + planes per
//! frame. Every layout that maps onto a libvmaf pixel format is read directly, 8-bit 4:2:2 and
//! mono included (upstream's CLI crashes on those).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::{
    check_fits, check_size, check_target, read_into, Filled, FrameError, VideoInfo, VideoReader,
};
use crate::error::{Error, Result};
use crate::picture::{PictureData, PixelFormat};

/// Longest stream or frame header line accepted; real ones are well under 100 bytes.
const MAX_LINE: u64 = 4096;

/// Reads a y4m stream from any buffered source.
pub struct Y4mReader<R = BufReader<File>> {
    src: R,
    name: String,
    info: VideoInfo,
    /// Bytes of planes read but not used (the alpha plane of `C444alpha`).
    skip_bytes: usize,
    frame: usize,
    /// Bytes of one frame's planes (alpha included), without the `FRAME` line.
    frame_len: usize,
    /// Row buffer for planes not read in place (and the skipped alpha plane).
    scratch: Vec<u8>,
    /// Input length and bytes consumed so far, for the frame-count hint.
    total: Option<u64>,
    consumed: u64,
    /// Notes for the user (see [`VideoReader::warnings`]).
    notes: Vec<String>,
}

impl Y4mReader {
    /// Adds a note for [`VideoReader::warnings`].
    pub fn add_warning(&mut self, note: String) {
        self.notes.push(note);
    }

    /// Opens a y4m file.
    pub fn open(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::io(format!("cannot open {name}"), e))?;
        // Only a regular file's length says how much data there is.
        let total = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        let mut r = Y4mReader::parse(BufReader::with_capacity(1 << 16, file), &name)?;
        r.total = total;
        r.validate()?;
        Ok(r)
    }
}

/// Chroma tag → pixel format, bit depth, and whether a 4th (alpha) plane follows.
fn parse_colorspace(c: &str) -> Option<(PixelFormat, u32, bool)> {
    let depth = |s: &str| -> Option<u32> {
        match s {
            "" => Some(8),
            _ => s
                .strip_prefix('p')
                .and_then(|d| d.parse().ok())
                .filter(|d| (9..=16).contains(d)),
        }
    };
    Some(match c {
        "420" | "420jpeg" | "420mpeg2" | "420paldv" => (PixelFormat::Yuv420p, 8, false),
        "444alpha" => (PixelFormat::Yuv444p, 8, true),
        "mono" => (PixelFormat::Yuv400p, 8, false),
        _ => {
            if let Some(rest) = c.strip_prefix("mono") {
                let d: u32 = rest.parse().ok().filter(|d| (9..=16).contains(d))?;
                (PixelFormat::Yuv400p, d, false)
            } else {
                let fmt = match c.get(..3)? {
                    "420" => PixelFormat::Yuv420p,
                    "422" => PixelFormat::Yuv422p,
                    "444" => PixelFormat::Yuv444p,
                    _ => return None,
                };
                (fmt, depth(&c[3..])?, false)
            }
        }
    })
}

/// Parses the stream header line (without its newline).
fn parse_header(line: &[u8]) -> std::result::Result<(VideoInfo, bool), String> {
    let mut tokens = line.split(|&b| b == b' ').filter(|t| !t.is_empty());
    match tokens.next() {
        Some(b"YUV4MPEG2") => {}
        _ => return Err("not a y4m file (no YUV4MPEG2 signature)".into()),
    }
    let (mut w, mut h) = (None, None);
    let mut cs = "420";
    for tok in tokens {
        // X tags are application data, free-form.
        if tok[0] == b'X' {
            continue;
        }
        let tok = std::str::from_utf8(tok)
            .ok()
            .filter(|t| t.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| {
                format!(
                    "bad y4m header token \"{}\" (only printable ASCII is allowed)",
                    tok.escape_ascii()
                )
            })?;
        let (tag, val) = tok.split_at(1);
        let ratio_ok = || {
            val.split_once(':')
                .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
        };
        match tag {
            "W" => {
                w = Some(
                    val.parse::<usize>()
                        .map_err(|_| format!("bad width {val:?}"))?,
                )
            }
            "H" => {
                h = Some(
                    val.parse::<usize>()
                        .map_err(|_| format!("bad height {val:?}"))?,
                )
            }
            "F" if !ratio_ok() => return Err(format!("bad frame rate {val:?}")),
            "A" if !ratio_ok() => return Err(format!("bad aspect ratio {val:?}")),
            "C" => cs = val,
            // Interlacing does not change the sample layout; X and unknown tags carry nothing
            // we need.
            _ => {}
        }
    }
    let w = w.ok_or("missing width (W) tag")?;
    let h = h.ok_or("missing height (H) tag")?;
    let (pix_fmt, bpc, alpha) =
        parse_colorspace(cs).ok_or_else(|| format!("unsupported colorspace C{cs}"))?;
    Ok((
        VideoInfo {
            width: w,
            height: h,
            pix_fmt,
            bpc,
        },
        alpha,
    ))
}

/// Reads one `\n`-terminated line of at most `MAX_LINE` bytes. Returns the bytes without the
/// newline, and whether the newline was found.
fn read_line(src: &mut impl BufRead) -> std::io::Result<(Vec<u8>, bool)> {
    let mut line = Vec::new();
    src.take(MAX_LINE).read_until(b'\n', &mut line)?;
    let complete = line.last() == Some(&b'\n');
    if complete {
        line.pop();
    }
    Ok((line, complete))
}

impl<R: BufRead> Y4mReader<R> {
    /// Reads the stream header from `src`; `name` labels error messages.
    pub fn new(src: R, name: &str) -> Result<Self> {
        let r = Y4mReader::parse(src, name)?;
        r.validate()?;
        Ok(r)
    }

    /// Reads the stream header without checking sizes.
    fn parse(mut src: R, name: &str) -> Result<Self> {
        let bad = |msg: String| Error::inval(format!("{name}: {msg}"));
        let (line, complete) =
            read_line(&mut src).map_err(|e| Error::io(format!("cannot read {name}"), e))?;
        if line.is_empty() && !complete {
            return Err(bad("empty file".into()));
        }
        let (info, alpha) = parse_header(&line).map_err(bad)?;
        if !complete {
            return Err(bad("y4m header line is not terminated".into()));
        }
        Y4mReader::parse_rest(src, name, info, alpha, line.len())
    }

    /// The reader after its header line, sizes not yet validated.
    fn parse_rest(
        src: R,
        name: &str,
        info: VideoInfo,
        alpha: bool,
        header_len: usize,
    ) -> Result<Self> {
        let bad = |msg: String| Error::inval(format!("{name}: {msg}"));
        let skip_bytes = if alpha {
            info.width.checked_mul(info.height)
        } else {
            Some(0)
        };
        let frame_len = skip_bytes
            .zip(info.checked_frame_bytes())
            .and_then(|(a, b)| a.checked_add(b));
        let (Some(skip_bytes), Some(frame_len)) = (skip_bytes, frame_len) else {
            // Too large for memory: the size check says why.
            check_size(info.width, info.height).map_err(bad)?;
            return Err(bad(format!(
                "bad picture size {}x{}",
                info.width, info.height
            )));
        };
        Ok(Y4mReader {
            src,
            name: name.to_string(),
            info,
            skip_bytes,
            frame: 0,
            frame_len,
            scratch: Vec::new(),
            total: None,
            consumed: header_len as u64 + 1,
            notes: Vec::new(),
        })
    }

    /// Checks the header's sizes against the input length when known: a header whose
    /// first frame cannot be in the file is reported as truncated before any frame buffer is
    /// allocated; then the picture size limits apply.
    fn validate(&self) -> Result<()> {
        if let Some(total) = self.total {
            let left = total.saturating_sub(self.consumed);
            let frame = self.frame_len.checked_add(b"FRAME\n".len());
            check_fits(&self.name, "the header says", &self.info, frame, left)?;
        }
        check_size(self.info.width, self.info.height)
            .map_err(|m| Error::inval(format!("{}: {m}", self.name)))
    }

    fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::inval(format!("{}: frame {}: {msg}", self.name, self.frame))
    }

    fn io_err(&self, e: std::io::Error) -> Error {
        Error::io(format!("{}: frame {}", self.name, self.frame), e)
    }
}

impl<R: BufRead + Send> VideoReader for Y4mReader<R> {
    fn info(&self) -> VideoInfo {
        self.info
    }

    fn read_frame_with(
        &mut self,
        get: &mut dyn FnMut() -> Result<PictureData>,
    ) -> Result<Option<PictureData>> {
        let (line, complete) = read_line(&mut self.src).map_err(|e| self.io_err(e))?;
        if line.is_empty() && !complete {
            return Ok(None);
        }
        if !line.starts_with(b"FRAME") || !matches!(line.get(5), None | Some(b' ')) {
            return Err(self.err("bad frame header (expected FRAME)"));
        }
        if !complete {
            return Err(self.err("truncated frame header"));
        }
        let mut pic = get()?;
        check_target(&self.info, &pic).map_err(|e| self.err(e))?;
        let res = read_into(
            &mut self.src,
            &self.info,
            self.skip_bytes,
            &mut pic,
            &mut self.scratch,
        );
        match res {
            Err(FrameError::Io(e)) => return Err(self.io_err(e)),
            Err(FrameError::Bad(e)) => return Err(self.err(e)),
            Ok(Filled::Short(n)) => {
                return Err(self.err(format_args!(
                    "truncated: {n} of {} bytes of frame data",
                    self.frame_len
                )))
            }
            Ok(Filled::Whole) => {}
        }
        self.consumed += (line.len() + 1 + self.frame_len) as u64;
        self.frame += 1;
        Ok(Some(pic))
    }

    fn warnings(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn layout(&self) -> Option<super::FrameLayout> {
        let pitch = (self.frame_len + b"FRAME\n".len()) as u64;
        let left = self.total?.checked_sub(self.consumed)?;
        // Any other length means frame headers with parameters (or a damaged file): those are
        // read in order, which also reports damage where it is.
        (left % pitch == 0).then(|| super::FrameLayout {
            info: self.info,
            first: self.consumed,
            pitch,
            header: b"FRAME\n",
            extra: self.skip_bytes,
            frames: left / pitch,
            index: self.frame,
        })
    }

    fn frames_left_hint(&self) -> Option<u64> {
        // Assumes bare "FRAME\n" headers; an estimate is all a progress bar needs.
        let left = self.total?.saturating_sub(self.consumed);
        Some(left / (self.frame_len as u64 + 6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(data: &[u8]) -> Result<Y4mReader<&[u8]>> {
        Y4mReader::new(data, "test.y4m")
    }

    fn frame(header: &str, planes: &[&[u8]]) -> Vec<u8> {
        let mut v = header.as_bytes().to_vec();
        for p in planes {
            v.extend_from_slice(p);
        }
        v
    }

    fn msg(e: Error) -> String {
        e.to_string()
    }

    #[test]
    fn reads_420_8bit_with_frame_params() {
        let y: Vec<u8> = (0..16).collect();
        let mut data = b"YUV4MPEG2 W4 H4 F25:1 Ip A1:1 C420jpeg XYSCSS=420JPEG\n".to_vec();
        data.extend(frame(
            "FRAME\n",
            &[&y, &[100, 101, 102, 103], &[200, 201, 202, 203]],
        ));
        data.extend(frame("FRAME Ixyz\n", &[&[7; 16], &[8; 4], &[9; 4]]));
        let mut r = reader(&data).unwrap();
        assert_eq!(
            r.info(),
            VideoInfo {
                width: 4,
                height: 4,
                pix_fmt: PixelFormat::Yuv420p,
                bpc: 8
            }
        );
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!((p.w, p.h), ([4, 2, 2], [4, 2, 2]));
        assert_eq!(p.sample(0, 3, 2), 11);
        assert_eq!(p.sample(1, 1, 1), 103);
        assert_eq!(p.sample(2, 0, 1), 202);
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!(
            (p.sample(0, 0, 0), p.sample(1, 0, 0), p.sample(2, 1, 1)),
            (7, 8, 9)
        );
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn missing_colorspace_means_420() {
        let data = frame("YUV4MPEG2 W2 H2 F30:1\nFRAME\n", &[&[1; 4], &[2], &[3]]);
        let mut r = reader(&data).unwrap();
        assert_eq!(r.info().pix_fmt, PixelFormat::Yuv420p);
        assert_eq!(r.info().bpc, 8);
        assert!(r.read_frame().unwrap().is_some());
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn reads_422_8bit() {
        // 4x2 4:2:2: chroma 2x2.
        let data = frame(
            "YUV4MPEG2 W4 H2 F30:1 C422\nFRAME\n",
            &[
                &[0, 1, 2, 3, 4, 5, 6, 7],
                &[10, 11, 12, 13],
                &[20, 21, 22, 23],
            ],
        );
        let mut r = reader(&data).unwrap();
        assert_eq!(r.info().pix_fmt, PixelFormat::Yuv422p);
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!((p.w[1], p.h[1]), (2, 2));
        assert_eq!(p.sample(0, 1, 1), 5);
        assert_eq!(p.sample(1, 0, 1), 12);
        assert_eq!(p.sample(2, 1, 1), 23);
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn reads_10bit_little_endian() {
        let le = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let y = le(&[0, 1023, 512, 3]);
        let data = frame(
            "YUV4MPEG2 W2 H2 F30:1 C420p10\nFRAME\n",
            &[&y, &le(&[700]), &le(&[256])],
        );
        let mut r = reader(&data).unwrap();
        assert_eq!(r.info().bpc, 10);
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!(p.plane_u16(0)[..2], [0, 1023]);
        assert_eq!(p.sample(0, 1, 1), 3);
        assert_eq!((p.sample(1, 0, 0), p.sample(2, 0, 0)), (700, 256));
    }

    #[test]
    fn rejects_out_of_range_deep_samples() {
        let data = frame(
            "YUV4MPEG2 W1 H1 F30:1 C444p10\nFRAME\n",
            &[&[0, 4], &[0, 0], &[0, 0]],
        );
        let e = msg(reader(&data).unwrap().read_frame().unwrap_err());
        assert!(
            e.contains("test.y4m: frame 0") && e.contains("10-bit"),
            "{e}"
        );
    }

    #[test]
    fn reads_16bit_and_mono() {
        let data = frame(
            "YUV4MPEG2 W2 H1 F30:1 C444p16\nFRAME\n",
            &[&[0xff, 0xff, 1, 0], &[2, 0, 3, 0], &[4, 0, 5, 0]],
        );
        let mut r = reader(&data).unwrap();
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!(p.bpc, 16);
        assert_eq!((p.sample(0, 0, 0), p.sample(0, 1, 0)), (65535, 1));
        assert_eq!(p.sample(2, 1, 0), 5);

        let data = frame(
            "YUV4MPEG2 W3 H2 F30:1 Cmono\nFRAME\n",
            &[&[1, 2, 3, 4, 5, 6]],
        );
        let mut r = reader(&data).unwrap();
        assert_eq!(r.info().pix_fmt, PixelFormat::Yuv400p);
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!(p.sample(0, 2, 1), 6);
        assert!(r.read_frame().unwrap().is_none());

        let data = frame("YUV4MPEG2 W1 H1 F30:1 Cmono12\nFRAME\n", &[&[0xff, 0x0f]]);
        let mut r = reader(&data).unwrap();
        assert_eq!((r.info().pix_fmt, r.info().bpc), (PixelFormat::Yuv400p, 12));
        assert_eq!(r.read_frame().unwrap().unwrap().sample(0, 0, 0), 4095);
    }

    #[test]
    fn skips_alpha_plane() {
        let data = frame(
            "YUV4MPEG2 W1 H1 F30:1 C444alpha\nFRAME\n",
            &[&[1, 2, 3, 99], b"FRAME\n", &[4, 5, 6, 99]],
        );
        let mut r = reader(&data).unwrap();
        assert_eq!(r.read_frame().unwrap().unwrap().sample(2, 0, 0), 3);
        assert_eq!(r.read_frame().unwrap().unwrap().sample(0, 0, 0), 4);
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn odd_size_keeps_floor_chroma() {
        // 3x3 4:2:0: the file holds 2x2 chroma, the picture keeps 1x1.
        let data = frame(
            "YUV4MPEG2 W3 H3 F30:1 C420\nFRAME\n",
            &[&[0; 9], &[10, 11, 12, 13], &[20, 21, 22, 23]],
        );
        let mut data2 = data.clone();
        data2.extend_from_slice(&data[data.len() - 23..]);
        let mut r = reader(&data2).unwrap();
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!((p.w, p.h), ([3, 1, 1], [3, 1, 1]));
        assert_eq!((p.sample(1, 0, 0), p.sample(2, 0, 0)), (10, 20));
        // The second frame starts right after the full-size chroma planes.
        let p = r.read_frame().unwrap().unwrap();
        assert_eq!((p.sample(1, 0, 0), p.sample(2, 0, 0)), (10, 20));
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn truncated_frame_is_an_error() {
        let mut data = frame("YUV4MPEG2 W2 H2 F30:1\nFRAME\n", &[&[1; 4], &[2], &[3]]);
        data.extend_from_slice(b"FRAME\n\x01\x02");
        let mut r = reader(&data).unwrap();
        assert!(r.read_frame().unwrap().is_some());
        let e = msg(r.read_frame().unwrap_err());
        assert!(e.contains("test.y4m: frame 1: truncated"), "{e}");

        let mut r = reader(b"YUV4MPEG2 W2 H2 F30:1\nFRA").unwrap();
        let e = msg(r.read_frame().unwrap_err());
        assert!(e.contains("frame 0"), "{e}");
    }

    #[test]
    fn bad_frame_marker_is_an_error() {
        let data = frame("YUV4MPEG2 W1 H1 F30:1 C444\nFRAMEX\n", &[&[1, 2, 3]]);
        let e = msg(reader(&data).unwrap().read_frame().unwrap_err());
        assert!(e.contains("bad frame header"), "{e}");
        let data = frame(
            "YUV4MPEG2 W1 H1 F30:1 C444\nFRAME\n",
            &[&[1, 2, 3], b"junk\n"],
        );
        let mut r = reader(&data).unwrap();
        assert!(r.read_frame().unwrap().is_some());
        let e = msg(r.read_frame().unwrap_err());
        assert!(e.contains("frame 1: bad frame header"), "{e}");
    }

    #[test]
    fn bad_headers_are_errors() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "empty file"),
            (b"RIFF....\n", "not a y4m file"),
            (b"YUV4MPEG2 H2 F30:1\n", "missing width"),
            (b"YUV4MPEG2 W2 F30:1\n", "missing height"),
            (b"YUV4MPEG2 Wx H2\n", "bad width"),
            (b"YUV4MPEG2 W0 H2\n", "bad picture size"),
            (
                b"YUV4MPEG2 W100000 H100000\n",
                "bad picture size 100000x100000",
            ),
            (b"YUV4MPEG2 W65537 H1\n", "each side must be 1 to 65536"),
            (
                b"YUV4MPEG2 W99999999999999999999 H1\n",
                "bad width \"99999999999999999999\"",
            ),
            (
                b"YUV4MPEG2 W4294967296 H4294967296\n",
                "bad picture size 4294967296x4294967296",
            ),
            (
                "YUV4MPEG2 W2 H2 \u{e9}\n".as_bytes(),
                "bad y4m header token \"\\xc3\\xa9\" (only printable ASCII",
            ),
            (b"YUV4MPEG2 W2\xff H2\n", "bad y4m header token \"W2\\xff\""),
            (b"YUV4MPEG2 W2 H2 C4\x0120\n", "bad y4m header token"),
            (b"YUV4MPEG2 W2 H2 F30\n", "bad frame rate"),
            (b"YUV4MPEG2 W2 H2 C411\n", "unsupported colorspace C411"),
            (b"YUV4MPEG2 W2 H2 C420p8\n", "unsupported colorspace"),
            (b"YUV4MPEG2 W2 H2 C420p17\n", "unsupported colorspace"),
            (b"YUV4MPEG2 W2 H2", "not terminated"),
            (&[0xff, 0xfe, b'\n'], "no YUV4MPEG2 signature"),
        ];
        for (data, want) in cases {
            let e = msg(reader(data).err().expect("error"));
            assert!(e.contains("test.y4m") && e.contains(want), "{e} vs {want}");
        }
    }

    #[test]
    fn x_tags_may_hold_any_bytes() {
        let mut data = b"YUV4MPEG2 W1 H1 C444 XCOMMENT=caf\xc3\xa9\xff\n".to_vec();
        data.extend_from_slice(b"FRAME\n\x01\x02\x03");
        let mut r = reader(&data).unwrap();
        assert_eq!(r.read_frame().unwrap().unwrap().sample(2, 0, 0), 3);
    }

    fn temp_file(name: &str, data: &[u8]) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("vmaf-y4m-{}-{name}", std::process::id()));
        std::fs::write(&p, data).unwrap();
        p
    }

    #[test]
    fn header_larger_than_file_is_truncated_before_allocating() {
        // 1x268435456 4:2:0 would be a 512 MiB frame (8 GiB as a padded picture).
        let mut data = b"YUV4MPEG2 W1 H268435456 F25:1 C420\nFRAME\n".to_vec();
        data.extend_from_slice(&[0; 1000]);
        let p = temp_file("tall.y4m", &data);
        let e = Y4mReader::open(&p).err().unwrap().to_string();
        assert!(
            e.contains(&format!(
                "{}: truncated: the header says 1x268435456 (536870918 bytes a frame) but the \
                 file holds 1006 bytes",
                p.display()
            )),
            "{e}"
        );
        // Without a file length the size limit catches it.
        let e = msg(reader(&data).err().unwrap());
        assert!(e.contains("bad picture size 1x268435456"), "{e}");

        // A header-only file is an empty stream, whatever its size: nothing is allocated.
        let p2 = temp_file("empty.y4m", b"YUV4MPEG2 W16384 H16384 C444p16\n");
        let mut r = Y4mReader::open(&p2).unwrap();
        let mut get = || -> Result<PictureData> { panic!("a picture was asked for") };
        assert!(r.read_frame_with(&mut get).unwrap().is_none());
        for p in [p, p2] {
            std::fs::remove_file(p).unwrap();
        }
    }

    #[test]
    fn colorspaces() {
        let cases = [
            ("420mpeg2", PixelFormat::Yuv420p, 8),
            ("420paldv", PixelFormat::Yuv420p, 8),
            ("420p12", PixelFormat::Yuv420p, 12),
            ("420p16", PixelFormat::Yuv420p, 16),
            ("422p10", PixelFormat::Yuv422p, 10),
            ("444p12", PixelFormat::Yuv444p, 12),
            ("mono16", PixelFormat::Yuv400p, 16),
        ];
        for (c, fmt, bpc) in cases {
            assert_eq!(parse_colorspace(c), Some((fmt, bpc, false)), "{c}");
        }
    }
}

#[cfg(test)]
mod parity_tests {
    use super::*;
    use crate::io::YuvReader;
    use crate::testutil::{clip_path, load_parity_clip};

    use crate::io::FrameReaderAt;
    use crate::picture::Picture;
    use std::sync::Arc;

    fn temp_file(name: &str, data: &[u8]) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("vmaf-y4m-pos-{}-{name}", std::process::id()));
        std::fs::write(&p, data).unwrap();
        p
    }

    fn same(a: &Picture, b: &Picture) -> bool {
        (a.w, a.h, a.bpc, a.pix_fmt) == (b.w, b.h, b.bpc, b.pix_fmt)
            && (0..a.pix_fmt.plane_count()).all(|p| {
                (0..a.h[p]).all(|y| (0..a.w[p]).all(|x| a.sample(p, x, y) == b.sample(p, x, y)))
            })
    }

    fn read_all(r: &mut dyn VideoReader) -> Vec<Picture> {
        std::iter::from_fn(|| r.read_frame().unwrap()).collect()
    }

    #[test]
    fn matches_parity_loader() {
        for name in [
            "natural_640x360_420p10",
            "testsrc_321x241_420p8",
            "mandel_352x288_422p8",
        ] {
            let (want, _) = load_parity_clip(name);
            let got = if name.starts_with("mandel") {
                let info = VideoInfo {
                    width: 352,
                    height: 288,
                    pix_fmt: PixelFormat::Yuv422p,
                    bpc: 8,
                };
                let mut r = YuvReader::open(&clip_path(&format!("ref_{name}.yuv")), info).unwrap();
                assert_eq!(r.frames_left_hint(), Some(want.len() as u64));
                read_all(&mut r)
            } else {
                let mut r = Y4mReader::open(&clip_path(&format!("ref_{name}.y4m"))).unwrap();
                assert_eq!(r.frames_left_hint(), Some(want.len() as u64));
                read_all(&mut r)
            };
            assert_eq!(got.len(), want.len(), "{name}");
            assert!(got.iter().zip(&want).all(|(a, b)| same(a, b)), "{name}");
        }
    }

    /// A 5x3 4:2:0 10-bit y4m of `n` frames (odd width: chroma rows are read through the row
    /// buffer), frame `k`'s header from `head(k)`.
    fn small_y4m(n: usize, head: impl Fn(usize) -> &'static str) -> Vec<u8> {
        let mut data = b"YUV4MPEG2 W5 H3 F25:1 C420p10\n".to_vec();
        for k in 0..n {
            data.extend_from_slice(head(k).as_bytes());
            // 15 luma + 2 x 6 chroma samples (3x2 each in the file), little endian.
            for i in 0..27u16 {
                data.extend_from_slice(&((k as u16 * 31 + i * 7) % 1024).to_le_bytes());
            }
        }
        data
    }

    fn positional(p: &std::path::Path) -> Option<FrameReaderAt> {
        let r = Y4mReader::open(p).unwrap();
        let layout = r.layout()?;
        FrameReaderAt::open(p, layout).unwrap()
    }

    fn read_at(at: &FrameReaderAt, k: u64) -> Result<Option<PictureData>> {
        let mut get = || PictureData::for_writing(PixelFormat::Yuv420p, 10, 5, 3);
        at.read(k, &mut get, &mut Vec::new())
    }

    #[test]
    fn frames_read_by_position_match_sequential_reads() {
        let p = temp_file("positional.y4m", &small_y4m(5, |_| "FRAME\n"));
        let seq = read_all(&mut Y4mReader::open(&p).unwrap());
        let at = positional(&p).expect("bare headers give a layout");
        assert_eq!(at.frames(), 5);
        for k in [3, 0, 4, 1, 2] {
            let pic = Arc::new(read_at(&at, k).unwrap().unwrap());
            assert!(same(&pic, &seq[k as usize]), "frame {k}");
        }
        assert!(read_at(&at, 5).unwrap().is_none());
        // After two frames are read in order, the layout starts at the third.
        let mut r = Y4mReader::open(&p).unwrap();
        r.read_frame().unwrap();
        r.read_frame().unwrap();
        let l = r.layout().unwrap();
        assert_eq!((l.frames, l.index), (3, 2));
        let at = FrameReaderAt::open(&p, l).unwrap().unwrap();
        assert!(same(&Arc::new(read_at(&at, 0).unwrap().unwrap()), &seq[2]));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn frame_parameters_keep_reading_in_order() {
        // A frame with parameters: the lengths no longer add up.
        let p = temp_file(
            "params.y4m",
            &small_y4m(4, |k| if k == 1 { "FRAME Ip\n" } else { "FRAME\n" }),
        );
        assert!(Y4mReader::open(&p).unwrap().layout().is_none());
        assert_eq!(read_all(&mut Y4mReader::open(&p).unwrap()).len(), 4);
        // Parameters on the first frame whose length is made up at the end: refused at open.
        let mut data = small_y4m(3, |k| if k == 0 { "FRAME Ip\n" } else { "FRAME\n" });
        data.truncate(data.len() - 3);
        let p2 = temp_file("params2.y4m", &data);
        assert!(positional(&p2).is_none());
        // A damaged header in the middle, same length: an error naming the frame.
        let p3 = temp_file(
            "damaged.y4m",
            &small_y4m(3, |k| if k == 1 { "FRAMX\n" } else { "FRAME\n" }),
        );
        let at = positional(&p3).expect("first and last headers are fine");
        assert!(read_at(&at, 0).unwrap().is_some());
        let e = read_at(&at, 1).unwrap_err().to_string();
        assert!(
            e.contains("frame 1") && e.contains("bad frame header"),
            "{e}"
        );
        // Out-of-range samples are refused by position too.
        let mut data = small_y4m(2, |_| "FRAME\n");
        // The first luma sample of frame 1 (its 27 samples are the file's last 54 bytes).
        let at_sample = data.len() - 54;
        data[at_sample..at_sample + 2].copy_from_slice(&2000u16.to_le_bytes());
        let p4 = temp_file("range.y4m", &data);
        let at = positional(&p4).unwrap();
        let e = read_at(&at, 1).unwrap_err().to_string();
        assert!(e.contains("sample value 2000 exceeds 10-bit range"), "{e}");
        for p in [p, p2, p3, p4] {
            std::fs::remove_file(p).unwrap();
        }
    }
}
