//! Semi-planar frames in device memory unpacked on the device: what
//! [`crate::gpu::frames::wrap_device_semiplanar`] queues at each submission.

use std::sync::Arc;

use super::launch;
use super::SemiPlanar;
use crate::error::{Error, Result};
use crate::gpu::frames::{DevPlanes, SemiPlanarSources, Unpack, UnpackMaker};
use crate::gpu::launch::DevicePlane;
use crate::gpu::{DeviceBuffer, GpuState, Stream};

/// The caller's memory a device picture's planes are made from, with its pitch in samples.
enum Source {
    /// NV12: the interleaved chroma.
    Nv12 { chroma: (DeviceBuffer<u8>, usize) },
    /// P01x: the luma words when they need a shift, the interleaved chroma when it is read.
    Deep {
        shift: u32,
        luma: Option<(DeviceBuffer<u16>, usize)>,
        chroma: Option<(DeviceBuffer<u16>, usize)>,
    },
}

/// Fills a semi-planar device picture's planar planes (see [`Unpack`]).
struct DeviceUnpack {
    state: Arc<GpuState>,
    w: usize,
    h: usize,
    source: Source,
}

/// What [`crate::gpu::frames::wrap_device_semiplanar`] calls to make a `w`x`h` frame's
/// unpacking on `state`'s device.
pub fn unpacker(state: Arc<GpuState>, fmt: SemiPlanar, (w, h): (usize, usize)) -> UnpackMaker {
    UnpackMaker(Box::new(move |sources| {
        let u = match sources {
            SemiPlanarSources::Nv12 { chroma } => DeviceUnpack::nv12(state, (w, h), chroma),
            SemiPlanarSources::Deep { luma, chroma } => {
                DeviceUnpack::deep(state, fmt, (w, h), luma, chroma)
            }
        };
        u.map(|u| Box::new(u) as Box<dyn Unpack>)
    }))
}

impl DeviceUnpack {
    /// An NV12 frame's unpacking: its chroma split in two (None when the chroma is not read,
    /// as the luma is read in place).
    fn nv12(
        state: Arc<GpuState>,
        (w, h): (usize, usize),
        chroma: Option<(DeviceBuffer<u8>, usize)>,
    ) -> Option<Self> {
        Some(DeviceUnpack {
            state,
            w,
            h,
            source: Source::Nv12 { chroma: chroma? },
        })
    }

    /// A P010/P012/P016 frame's unpacking: the luma shifted when it is given, the chroma split
    /// and shifted when it is given (None when there is nothing to do).
    fn deep(
        state: Arc<GpuState>,
        fmt: SemiPlanar,
        (w, h): (usize, usize),
        luma: Option<(DeviceBuffer<u16>, usize)>,
        chroma: Option<(DeviceBuffer<u16>, usize)>,
    ) -> Option<Self> {
        if luma.is_none() && chroma.is_none() {
            return None;
        }
        Some(DeviceUnpack {
            state,
            w,
            h,
            source: Source::Deep {
                shift: fmt.shift(),
                luma,
                chroma,
            },
        })
    }
}

impl Unpack for DeviceUnpack {
    fn queue(&self, planes: &DevPlanes, stream: &Stream) -> Result<()> {
        let (cw, ch) = SemiPlanar::chroma_dims(self.w, self.h);
        fn interleaved<T: crate::gpu::DeviceCopy>(
            buf: &DeviceBuffer<T>,
            pitch: usize,
            (cw, ch): (usize, usize),
        ) -> DevicePlane<'_, T> {
            DevicePlane {
                buf,
                offset: 0,
                w: 2 * cw,
                h: ch,
                stride: pitch,
            }
        }
        let missing = || Error::inval("a semi-planar picture without its planes");
        match (&self.source, planes) {
            (
                Source::Nv12 {
                    chroma: (src, pitch),
                },
                DevPlanes::U8(p),
            ) => {
                let (u, v) = (p.get(1).ok_or_else(missing)?, p.get(2).ok_or_else(missing)?);
                launch::chroma(&self.state, interleaved(src, *pitch, (cw, ch)), u, v, 0)?
                    .queue(stream)
            }
            (
                Source::Deep {
                    shift,
                    luma,
                    chroma,
                },
                DevPlanes::U16(p),
            ) => {
                if let Some((src, pitch)) = luma {
                    let plane = DevicePlane {
                        buf: src,
                        offset: 0,
                        w: self.w,
                        h: self.h,
                        stride: *pitch,
                    };
                    let dst = p.first().ok_or_else(missing)?;
                    launch::luma_u16(&self.state, plane, dst, *shift)?.queue(stream)?;
                }
                if let Some((src, pitch)) = chroma {
                    let (u, v) = (p.get(1).ok_or_else(missing)?, p.get(2).ok_or_else(missing)?);
                    launch::chroma(
                        &self.state,
                        interleaved(src, *pitch, (cw, ch)),
                        u,
                        v,
                        *shift,
                    )?
                    .queue(stream)?;
                }
                Ok(())
            }
            _ => Err(missing()),
        }
    }
}
