//! Semi-planar 4:2:0 frames, as hardware decoders hand them out: a luma plane, then one plane
//! of interleaved (Cb, Cr) pairs. NV12 holds 8-bit samples; P010, P012 and P016 hold 16-bit
//! words with the sample in their high bits. Scored as the yuv420p / yuv420p10le / 12le / 16le
//! picture with the same samples, bit for bit.
//!
//! Host frames are unpacked here when they are wrapped; frames in GPU memory are unpacked on
//! the device ([`gpu`], kernels/semiplanar.hip): the luma only where its words need a shift,
//! the chroma only when an extractor of the context reads it.

pub mod gpu;
pub(crate) mod launch;

#[cfg(test)]
mod hipcpu_tests;

use crate::error::{Error, Result};
use crate::picture::{PictureData, PixelFormat};

/// A semi-planar layout, numbered as `enum VmafHipSemiPlanarFormat` in libvmaf_hip.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemiPlanar {
    Nv12 = 1,
    P010 = 2,
    P012 = 3,
    P016 = 4,
}

impl SemiPlanar {
    /// From the C enum value.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::Nv12,
            2 => Self::P010,
            3 => Self::P012,
            4 => Self::P016,
            _ => return None,
        })
    }

    /// Bits of each sample: the depth of the planar picture it is scored as.
    pub fn bpc(self) -> u32 {
        match self {
            Self::Nv12 => 8,
            Self::P010 => 10,
            Self::P012 => 12,
            Self::P016 => 16,
        }
    }

    /// How far a stored 16-bit word is shifted up from its sample (0 for NV12).
    pub fn shift(self) -> u32 {
        match self {
            Self::Nv12 | Self::P016 => 0,
            Self::P010 => 6,
            Self::P012 => 4,
        }
    }

    /// Bytes per stored sample.
    pub fn bytes_per_sample(self) -> usize {
        if self == Self::Nv12 {
            1
        } else {
            2
        }
    }

    /// (pairs per chroma row, chroma rows) read of a `w`x`h` frame: the chroma planes' size in
    /// the planar picture, which libvmaf rounds down (a frame of odd size stores one more pair
    /// or row, which no extractor reads).
    pub fn chroma_dims(w: usize, h: usize) -> (usize, usize) {
        (w / 2, h / 2)
    }

    /// Checks a `w`x`h` frame's size and row pitches (in samples: a chroma row holds
    /// `2 * chroma width` of them) against the layout.
    pub fn check(self, w: usize, h: usize, pitch: [usize; 2]) -> Result<()> {
        crate::picture::check_geometry(PixelFormat::Yuv420p, self.bpc(), w, h)?;
        let (cw, _) = Self::chroma_dims(w, h);
        for (what, p, row) in [("luma", pitch[0], w), ("chroma", pitch[1], 2 * cw)] {
            if p < row || p.saturating_mul(self.bytes_per_sample()) > i32::MAX as usize {
                return Err(Error::inval(format!(
                    "{what} pitch of {p} samples is below its row of {row} or above 2 GiB"
                )));
            }
        }
        Ok(())
    }
}

/// The stored samples of one semi-planar frame in host memory: the luma plane and the
/// interleaved chroma plane, each with its pitch in samples.
#[derive(Debug, Clone, Copy)]
pub enum HostSemiPlanar<'a> {
    U8 {
        luma: (&'a [u8], usize),
        chroma: (&'a [u8], usize),
    },
    U16 {
        luma: (&'a [u16], usize),
        chroma: (&'a [u16], usize),
    },
}

/// The planar picture (yuv420p at the layout's depth) with the samples of a `w`x`h` frame.
/// Each plane slice must hold its rows (the last one without padding); checked here.
pub fn unpack_host(
    fmt: SemiPlanar,
    w: usize,
    h: usize,
    frame: HostSemiPlanar<'_>,
) -> Result<PictureData> {
    let mut pic = PictureData::for_writing(PixelFormat::Yuv420p, fmt.bpc(), w, h)?;
    match frame {
        HostSemiPlanar::U8 { luma, chroma } if fmt == SemiPlanar::Nv12 => {
            unpack_into(&mut pic, fmt, luma, chroma)?
        }
        HostSemiPlanar::U16 { luma, chroma } if fmt != SemiPlanar::Nv12 => {
            unpack_into(&mut pic, fmt, luma, chroma)?
        }
        _ => {
            return Err(Error::inval(format!(
                "{fmt:?} samples of the wrong width ({} bits)",
                if fmt == SemiPlanar::Nv12 { 8 } else { 16 }
            )))
        }
    }
    Ok(pic)
}

/// A stored sample type and the picture planes it fills.
trait Stored: Copy + std::ops::Shr<u32, Output = Self> {
    fn plane_mut(pic: &mut PictureData, i: usize) -> &mut [Self];
}

impl Stored for u8 {
    fn plane_mut(pic: &mut PictureData, i: usize) -> &mut [u8] {
        pic.plane_u8_mut(i)
    }
}

impl Stored for u16 {
    fn plane_mut(pic: &mut PictureData, i: usize) -> &mut [u16] {
        pic.plane_u16_mut(i)
    }
}

/// Fills `pic`'s three planes from the luma and interleaved chroma (each with its pitch in
/// samples), every sample shifted down by the layout's shift.
fn unpack_into<T: Stored>(
    pic: &mut PictureData,
    fmt: SemiPlanar,
    (y, yp): (&[T], usize),
    (c, cp): (&[T], usize),
) -> Result<()> {
    let (w, h, cw, ch) = (pic.w[0], pic.h[0], pic.w[1], pic.h[1]);
    fmt.check(w, h, [yp, cp])?;
    let fits = |len: usize, pitch: usize, rows: usize, row: usize| {
        rows == 0
            || (rows - 1)
                .checked_mul(pitch)
                .and_then(|n| n.checked_add(row))
                .is_some_and(|n| n <= len)
    };
    if !fits(y.len(), yp, h, w) || !fits(c.len(), cp, ch, 2 * cw) {
        return Err(Error::inval("semi-planar planes shorter than their rows"));
    }
    let (shift, s) = (fmt.shift(), pic.stride);
    let out = T::plane_mut(pic, 0);
    for row in 0..h {
        for (o, &v) in out[row * s[0]..][..w].iter_mut().zip(&y[row * yp..][..w]) {
            *o = v >> shift;
        }
    }
    for (plane, lane) in [(1, 0), (2, 1)] {
        let out = T::plane_mut(pic, plane);
        for row in 0..ch {
            let src = &c[row * cp..][..2 * cw];
            for (o, pair) in out[row * s[plane]..][..cw].iter_mut().zip(src.chunks(2)) {
                *o = pair[lane] >> shift;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A semi-planar frame stored from a planar picture: the inverse of [`unpack_host`], with
    /// `pad` samples after each row (filled with a value no sample has).
    pub(crate) fn pack(
        fmt: SemiPlanar,
        pic: &PictureData,
        pad: usize,
    ) -> (Vec<u16>, usize, Vec<u16>, usize) {
        let (w, h) = (pic.w[0], pic.h[0]);
        let (cw, ch) = SemiPlanar::chroma_dims(w, h);
        // A frame of odd size stores one more pair per row or one more row (left at the
        // marker: it is never read).
        let (yp, cp) = (w + pad, 2 * w.div_ceil(2) + pad);
        let marker = if fmt == SemiPlanar::Nv12 {
            0xa5
        } else {
            0xffff
        };
        let mut y = vec![marker; yp * h];
        let mut c = vec![marker; cp * h.div_ceil(2)];
        let up = |v: u16| v << fmt.shift();
        for row in 0..h {
            for x in 0..w {
                y[row * yp + x] = up(pic.sample(0, x, row));
            }
        }
        for row in 0..ch {
            for x in 0..cw {
                c[row * cp + 2 * x] = up(pic.sample(1, x, row));
                c[row * cp + 2 * x + 1] = up(pic.sample(2, x, row));
            }
        }
        (y, yp, c, cp)
    }

    fn same(a: &PictureData, b: &PictureData) {
        assert_eq!((a.bpc, a.w, a.h), (b.bpc, b.w, b.h));
        for plane in 0..3 {
            for row in 0..a.h[plane] {
                for x in 0..a.w[plane] {
                    assert_eq!(
                        a.sample(plane, x, row),
                        b.sample(plane, x, row),
                        "plane {plane} ({x}, {row})"
                    );
                }
            }
        }
    }

    /// Every layout, odd sizes included, padded or not: the unpacked picture is the planar one
    /// the frame was stored from.
    #[test]
    fn unpacking_gives_the_planar_picture_back() {
        for fmt in [
            SemiPlanar::Nv12,
            SemiPlanar::P010,
            SemiPlanar::P012,
            SemiPlanar::P016,
        ] {
            for (w, h) in [(64, 36), (33, 17), (1, 1), (2, 3)] {
                for pad in [0, 5] {
                    let seed = (w + pad) as u64;
                    let want =
                        crate::testutil::noise_picture(PixelFormat::Yuv420p, fmt.bpc(), w, h, seed);
                    let (y, yp, c, cp) = pack(fmt, &want, pad);
                    let got = if fmt == SemiPlanar::Nv12 {
                        let (y8, c8): (Vec<u8>, Vec<u8>) = (
                            y.iter().map(|&v| v as u8).collect(),
                            c.iter().map(|&v| v as u8).collect(),
                        );
                        unpack_host(
                            fmt,
                            w,
                            h,
                            HostSemiPlanar::U8 {
                                luma: (&y8, yp),
                                chroma: (&c8, cp),
                            },
                        )
                    } else {
                        unpack_host(
                            fmt,
                            w,
                            h,
                            HostSemiPlanar::U16 {
                                luma: (&y, yp),
                                chroma: (&c, cp),
                            },
                        )
                    }
                    .unwrap();
                    same(&got, &want);
                }
            }
        }
    }

    #[test]
    fn bad_frames_are_refused() {
        let y = vec![0u8; 64 * 36];
        let c = vec![0u8; 64 * 18];
        let ok = |fmt, w, h, yp, cp, y: &[u8], c: &[u8]| {
            unpack_host(
                fmt,
                w,
                h,
                HostSemiPlanar::U8 {
                    luma: (y, yp),
                    chroma: (c, cp),
                },
            )
        };
        assert!(ok(SemiPlanar::Nv12, 64, 36, 64, 64, &y, &c).is_ok());
        // Pitches shorter than a row.
        assert!(ok(SemiPlanar::Nv12, 64, 36, 63, 64, &y, &c).is_err());
        assert!(ok(SemiPlanar::Nv12, 64, 36, 64, 63, &y, &c).is_err());
        // Planes shorter than their rows.
        assert!(ok(SemiPlanar::Nv12, 64, 36, 64, 64, &y[1..], &c).is_err());
        assert!(ok(SemiPlanar::Nv12, 64, 36, 64, 64, &y, &c[1..]).is_err());
        // 8-bit samples for a 16-bit layout, zero size.
        assert!(ok(SemiPlanar::P010, 64, 36, 64, 64, &y, &c).is_err());
        assert!(ok(SemiPlanar::Nv12, 0, 36, 64, 64, &y, &c).is_err());
        assert_eq!(SemiPlanar::from_raw(0), None);
        assert_eq!(SemiPlanar::from_raw(5), None);
        assert_eq!(SemiPlanar::from_raw(2), Some(SemiPlanar::P010));
    }
}
