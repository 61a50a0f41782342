//! Luma planes of recent pictures on the device, kept per worker thread.
//!
//! VIF, ADM and motion of one frame run one after the other on the same worker thread and read
//! the same luma planes (motion also reads the previous reference), so each plane is packed into
//! pinned memory and uploaded once instead of once per extractor. Entries hold a clone of their
//! picture, so a cached address always means the same picture. Reusing an entry is safe without
//! waiting: uploads and kernels of a thread are queued in order on its stream, and the pinned
//! staging buffer waits for its previous copy before it is refilled. Also the small helpers the
//! GPU dispatch modules share (typed plane access, dense plane views).

use crate::error::{Error, Result};
use crate::gpu::kernels::{DevicePlane, Sample};
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer, Stream};
use crate::picture::{Picture, PictureData, PlaneRef};

/// Plane `i` of `pic` as samples of type `T`, or None when the depth does not match `T`.
pub(crate) trait PlaneAs: Sized {
    fn plane_of(pic: &PictureData, i: usize) -> Option<&[Self]>;
}

impl PlaneAs for u8 {
    fn plane_of(pic: &PictureData, i: usize) -> Option<&[u8]> {
        match pic.plane(i) {
            PlaneRef::U8(p) => Some(p),
            PlaneRef::U16(_) => None,
        }
    }
}

impl PlaneAs for u16 {
    fn plane_of(pic: &PictureData, i: usize) -> Option<&[u16]> {
        match pic.plane(i) {
            PlaneRef::U16(p) => Some(p),
            PlaneRef::U8(_) => None,
        }
    }
}

/// A `w`x`h` plane filling `buf` from its start with rows `w` apart.
pub(crate) fn dense<T: Sample>(buf: &DeviceBuffer<T>, w: usize, h: usize) -> DevicePlane<'_, T> {
    DevicePlane {
        buf,
        offset: 0,
        w,
        h,
        stride: w,
    }
}

/// Copies the luma plane of `pic` densely (row pitch = width) into `dst`.
pub(crate) fn pack_luma<T: Sample + PlaneAs>(pic: &PictureData, dst: &mut [T]) -> Result<()> {
    let (w, h, s) = (pic.w[0], pic.h[0], pic.stride[0]);
    let src = T::plane_of(pic, 0).ok_or_else(|| Error::inval("sample depth mismatch"))?;
    for y in 0..h {
        dst[y * w..(y + 1) * w].copy_from_slice(&src[y * s..y * s + w]);
    }
    Ok(())
}

/// Pictures kept per thread: this frame's pair, the previous reference and one spare.
const ENTRIES: usize = 4;

struct Entry<T: Sample> {
    pic: Picture,
    host: PinnedHostBuffer<T>,
    dev: DeviceBuffer<T>,
}

struct Uploads<T: Sample> {
    w: usize,
    h: usize,
    entries: Vec<Entry<T>>,
    next: usize,
}

/// Runs `f` with the luma planes of `pics` on the device (dense: rows `w` samples apart),
/// uploading on `stream` those this thread does not hold already. All pictures must share the
/// luma size and sample type.
pub(crate) fn with_luma<T: Sample + PlaneAs, R, const N: usize>(
    state: &GpuState,
    stream: &Stream,
    pics: [&Picture; N],
    f: impl FnOnce([&DeviceBuffer<T>; N]) -> Result<R>,
) -> Result<R> {
    const { assert!(N <= ENTRIES) };
    let (w, h) = (pics[0].w[0], pics[0].h[0]);
    if pics.iter().any(|p| (p.w[0], p.h[0]) != (w, h)) {
        return Err(Error::inval("pictures differ in luma size"));
    }
    state.with_scratch(|slot: &mut Option<Uploads<T>>| {
        if slot.as_ref().is_none_or(|u| (u.w, u.h) != (w, h)) {
            *slot = None;
            *slot = Some(Uploads {
                w,
                h,
                entries: Vec::with_capacity(ENTRIES),
                next: 0,
            });
        }
        let u = slot
            .as_mut()
            .ok_or_else(|| Error::inval("no upload cache"))?;
        let mut idx = [usize::MAX; N];
        for (k, pic) in pics.iter().enumerate() {
            if let Some(i) = u
                .entries
                .iter()
                .position(|e| std::sync::Arc::ptr_eq(&e.pic, pic))
            {
                idx[k] = i;
                continue;
            }
            let i = if u.entries.len() < ENTRIES {
                let dev = state.device();
                u.entries.push(Entry {
                    pic: (*pic).clone(),
                    host: PinnedHostBuffer::new(dev, w * h)?,
                    dev: DeviceBuffer::new(dev, w * h)?,
                });
                u.entries.len() - 1
            } else {
                // Round-robin victim that this call does not use.
                let mut i = u.next;
                while idx.contains(&i) {
                    i = (i + 1) % ENTRIES;
                }
                u.next = (i + 1) % ENTRIES;
                u.entries[i].pic = (*pic).clone();
                i
            };
            let e = &mut u.entries[i];
            pack_luma(pic, e.host.as_mut_slice()?)?;
            e.dev.upload_async(stream, &mut e.host, w * h)?;
            idx[k] = i;
        }
        let bufs: [&DeviceBuffer<T>; N] = std::array::from_fn(|k| &u.entries[idx[k]].dev);
        f(bufs)
    })
}
