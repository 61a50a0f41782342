//! Luma planes of recent pictures on the device, shared by the worker threads of a state.
//!
//! VIF, ADM and motion of one frame read the same luma planes, and motion of the next frame
//! (often on another thread) reads this frame's reference again, so each plane is packed into
//! pinned memory and uploaded once per state: the first thread that needs it queues the upload
//! on its stream and records an event, later users' streams wait on that event. Entries are
//! keyed by the picture's content identity ([`PictureData::id`]), never by a reference to it:
//! the cache must not keep a caller's pooled picture from going back to its pool. An entry is
//! reused for another picture only when no thread holds it: a job holds its planes as an
//! [`UploadedLuma`] guard while it queues work on them and until the host has waited for its
//! results (or, on a failure, until it has recorded on its stream the point after its reads,
//! which the next upload into the entry waits for). Also the small helpers the GPU dispatch
//! modules share (typed plane access, dense plane views).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use crate::error::{Error, Result};
use crate::gpu::frames::{device_frame, DeviceFrame, DevicePlaneAs};
use crate::gpu::launch::{DevicePlane, Sample};
use crate::gpu::{DeviceBuffer, Event, GpuState, HostRegistration, PinnedHostBuffer, Stream};
use crate::picture::{Picture, PictureData, PlaneRef};

/// Plane `i` of `pic` as samples of type `T`, or None when the depth does not match `T`.
pub(crate) trait PlaneAs: Sized + Sample + DevicePlaneAs {
    fn plane_of(pic: &PictureData, i: usize) -> Option<&[Self]>;
    /// Planes `first..=last` of `pic` as one slice ([`PictureData::planes_span`]).
    fn span_of(pic: &PictureData, first: usize, last: usize) -> Option<&[Self]>;
    /// The state's cache of uploaded planes of this sample type.
    fn cache(planes: &StatePlanes) -> &PlaneCache<Self>;
}

/// A state's uploaded luma planes, one cache per sample type (8-bit and deeper pictures).
#[derive(Default)]
pub(crate) struct StatePlanes {
    u8: PlaneCache<u8>,
    u16: PlaneCache<u16>,
}

impl PlaneAs for u8 {
    fn plane_of(pic: &PictureData, i: usize) -> Option<&[u8]> {
        match pic.plane(i) {
            PlaneRef::U8(p) => Some(p),
            PlaneRef::U16(_) => None,
        }
    }
    fn span_of(pic: &PictureData, first: usize, last: usize) -> Option<&[u8]> {
        match pic.planes_span(first, last)? {
            PlaneRef::U8(p) => Some(p),
            PlaneRef::U16(_) => None,
        }
    }
    fn cache(planes: &StatePlanes) -> &PlaneCache<u8> {
        &planes.u8
    }
}

impl PlaneAs for u16 {
    fn plane_of(pic: &PictureData, i: usize) -> Option<&[u16]> {
        match pic.plane(i) {
            PlaneRef::U16(p) => Some(p),
            PlaneRef::U8(_) => None,
        }
    }
    fn span_of(pic: &PictureData, first: usize, last: usize) -> Option<&[u16]> {
        match pic.planes_span(first, last)? {
            PlaneRef::U16(p) => Some(p),
            PlaneRef::U8(_) => None,
        }
    }
    fn cache(planes: &StatePlanes) -> &PlaneCache<u16> {
        &planes.u16
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

/// Idle planes kept beyond those in use, so a reference uploaded for frame `i` is usually
/// still there when frame `i + 1` asks for it as the previous reference.
const IDLE_SLACK: usize = 8;

/// Release events kept per plane; more are dropped at its next upload.
const RELEASED_KEPT: usize = 16;

/// One picture's luma plane: pinned staging and the device copy.
struct Slot<T: Sample> {
    /// Staging for pictures that are not page-locked (allocated on first use).
    host: Option<PinnedHostBuffer<T>>,
    dev: DeviceBuffer<T>,
    /// Whether the upload is queued; `ready` follows it.
    uploaded: bool,
}

struct Plane<T: Sample> {
    /// [`PictureData::id`] of the picture whose luma the entry holds.
    id: u64,
    slot: RwLock<Slot<T>>,
    /// Recorded on the uploading stream after the copy; other streams wait on it.
    ready: Event,
    /// Per user stream (by [`Stream::id`]: an address can come back for a new stream while the
    /// old one's work still runs) that gave the plane back without waiting for its work (a
    /// failed job): recorded after that stream's last queued use, so the next upload into this
    /// entry waits until every such reader is done.
    released: Mutex<Vec<(u64, Event)>>,
    last_use: AtomicU64,
}

struct Planes<T: Sample> {
    w: usize,
    h: usize,
    entries: Vec<Arc<Plane<T>>>,
    clock: u64,
}

/// The uploaded luma planes of one state, shared by all its worker threads.
pub(crate) struct PlaneCache<T: Sample> {
    inner: Mutex<Planes<T>>,
}

impl<T: Sample> Default for PlaneCache<T> {
    fn default() -> Self {
        PlaneCache {
            inner: Mutex::new(Planes {
                w: 0,
                h: 0,
                entries: Vec::new(),
                clock: 0,
            }),
        }
    }
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

impl<T: Sample> PlaneCache<T> {
    /// The entry for `pic`: the cached one, else an idle entry (least recently used, when more
    /// than IDLE_SLACK are idle) or a new one, marked not uploaded. An entry is idle when only
    /// the cache holds it: users keep their `Arc` until their stream has finished with it.
    fn acquire(&self, state: &GpuState, pic: &Picture) -> Result<Arc<Plane<T>>> {
        let (w, h) = (pic.w[0], pic.h[0]);
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if (g.w, g.h) != (w, h) {
            // A new size: drop the idle planes of the old one (busy ones go with their users).
            g.entries.clear();
            (g.w, g.h) = (w, h);
        }
        g.clock += 1;
        let now = g.clock;
        if let Some(e) = g.entries.iter().find(|e| e.id == pic.id()) {
            e.last_use.store(now, Ordering::Relaxed);
            return Ok(e.clone());
        }
        let idle: Vec<usize> = (0..g.entries.len())
            .filter(|&i| Arc::strong_count(&g.entries[i]) == 1)
            .collect();
        if idle.len() > IDLE_SLACK {
            let i = idle
                .into_iter()
                .min_by_key(|&i| g.entries[i].last_use.load(Ordering::Relaxed))
                .unwrap_or(0);
            if let Some(e) = Arc::get_mut(&mut g.entries[i]) {
                e.id = pic.id();
                e.slot.get_mut().unwrap_or_else(|e| e.into_inner()).uploaded = false;
                e.last_use.store(now, Ordering::Relaxed);
                return Ok(g.entries[i].clone());
            }
        }
        let dev = state.device();
        let e = Arc::new(Plane {
            id: pic.id(),
            slot: RwLock::new(Slot {
                host: None,
                dev: DeviceBuffer::new(dev, w * h)?,
                uploaded: false,
            }),
            ready: Event::new(dev)?,
            released: Mutex::new(Vec::new()),
            last_use: AtomicU64::new(now),
        });
        g.entries.push(e.clone());
        crate::log_debug!(
            "GPU plane cache: {} planes of {w}x{h} ({} MiB on the device)",
            g.entries.len(),
            (g.entries.len() * w * h * std::mem::size_of::<T>()) >> 20
        );
        Ok(e)
    }
}

/// Queues the upload of `pic` into `plane` on `stream` unless some thread already did. The
/// caller holds `pic` until `stream` has passed the copy (it waits for a later read-back).
/// The page-locked registration of host picture `pic`'s buffer, from which copies go to the
/// device without a staging copy: the picture's own, or, for a dense buffer the library
/// recycles, one made now and kept with the buffer (so a caller allocating pictures per frame
/// soon has its planes read in place).
pub(crate) fn host_registration<'p>(
    pic: &'p PictureData,
    stream: &Stream,
) -> Option<&'p HostRegistration> {
    let dense = pic.stride[0] == pic.w[0];
    if dense {
        pic.pinned().or_else(|| {
            pic.pin_shared(|ptr, bytes| {
                // SAFETY: `ptr` is the picture's own buffer of `bytes` bytes; the registration
                // is stored in the picture (and moves with the buffer when it is recycled),
                // whose field order unlocks it, after its copies, before the buffer is freed.
                let reg = unsafe { HostRegistration::new(stream.device(), ptr.cast_mut(), bytes) }?;
                Ok(Box::new(reg) as Box<dyn crate::picture::HostPin>)
            })
        })
    } else {
        pic.pinned()
    }
    .and_then(|p| p.as_any().downcast_ref::<HostRegistration>())
}

fn ensure_uploaded<T: Sample + PlaneAs>(
    plane: &Plane<T>,
    pic: &PictureData,
    stream: &Stream,
) -> Result<()> {
    if read(&plane.slot).uploaded {
        return Ok(());
    }
    let mut s = plane.slot.write().unwrap_or_else(|e| e.into_inner());
    if s.uploaded {
        return Ok(());
    }
    // Kernels of earlier users of this entry may still be reading the old contents.
    let mut released = plane.released.lock().unwrap_or_else(|e| e.into_inner());
    for (_, ev) in released.iter() {
        stream.wait_event(ev)?;
    }
    // Streams of closed contexts never come back: keep the list from growing with them
    // (waited for above; users of the new contents record afresh).
    if released.len() > RELEASED_KEPT {
        released.clear();
    }
    drop(released);
    let n = pic.w[0] * pic.h[0];
    let slot = &mut *s;
    let reg = host_registration(pic, stream);
    match (reg, T::plane_of(pic, 0)) {
        // A page-locked picture with rows back to back: the DMA reads it in place.
        (Some(reg), Some(luma)) if pic.stride[0] == pic.w[0] && luma.len() >= n => {
            slot.dev.upload_registered_async(stream, reg, &luma[..n])?;
        }
        _ => {
            let host = match &mut slot.host {
                Some(h) => h,
                None => slot.host.insert(PinnedHostBuffer::new(stream.device(), n)?),
            };
            pack_luma(pic, host.as_mut_slice()?)?;
            slot.dev.upload_async(stream, host, n)?;
        }
    }
    plane.ready.record(stream)?;
    slot.uploaded = true;
    Ok(())
}

/// The luma planes of a job's pictures, uploaded (by this or another thread) and ordered
/// before the job's later work on its stream. While held, no entry can be reused for another
/// picture. Given back with [`Self::release_waited`] once the host has waited for the job's
/// work, it costs no runtime call; dropped otherwise, it records on the stream the point after
/// every use queued so far, which holds back the next upload into these planes until the
/// device has passed it.
pub(crate) struct UploadedLuma<T: Sample, const N: usize> {
    planes: Vec<Held<T>>,
    /// `planes` index of each picture (the same picture twice shares one plane).
    index: [usize; N],
    stream: Arc<Stream>,
    /// Set by [`Self::release_waited`]: the device is past every use, nothing to record.
    waited: bool,
}

/// A luma plane a job reads: a cache entry, or a device picture's own plane.
enum Held<T: Sample> {
    Cached(Arc<Plane<T>>),
    /// Device pictures are read where the caller wrote them (their pool takes them back only
    /// after the frame's jobs have finished), rows `.1` samples apart.
    Direct(Arc<DeviceFrame>, usize),
}

/// One uploaded luma plane, read-locked while a job queues work on it.
pub(crate) struct Luma<'a, T: Sample>(LumaRef<'a, T>);

enum LumaRef<'a, T: Sample> {
    Cached(RwLockReadGuard<'a, Slot<T>>),
    Direct(&'a DeviceBuffer<T>, usize),
}

impl<T: Sample> Luma<'_, T> {
    /// The plane as a `w`x`h` image: dense in the cache, at the caller's pitch in a device
    /// picture. The planes of one [`UploadedLuma`] share their pitch.
    pub(crate) fn plane(&self, w: usize, h: usize) -> DevicePlane<'_, T> {
        match &self.0 {
            LumaRef::Cached(g) => dense(&g.dev, w, h),
            LumaRef::Direct(b, stride) => DevicePlane {
                buf: b,
                offset: 0,
                w,
                h,
                stride: *stride,
            },
        }
    }
}

impl<T: Sample + PlaneAs, const N: usize> UploadedLuma<T, N> {
    /// The luma planes of `pics` on the device, each packed and uploaded once per state (by
    /// whichever thread needs it first); `stream` waits for those uploads. All pictures must
    /// share the luma size and sample type.
    pub(crate) fn acquire(
        state: &GpuState,
        stream: &Arc<Stream>,
        pics: [&Picture; N],
    ) -> Result<Self> {
        if let Some(first) = pics.first() {
            let (w, h) = (first.w[0], first.h[0]);
            if pics.iter().any(|p| (p.w[0], p.h[0]) != (w, h)) {
                return Err(Error::inval("pictures differ in luma size"));
            }
        }
        let cache = T::cache(state.planes());
        let mut planes: Vec<Held<T>> = Vec::with_capacity(N);
        let mut index = [0usize; N];
        // The kernels read a job's planes at one pitch: device pictures at a shared pitch are
        // read in place; otherwise those with padded rows go through the (dense) cache.
        let direct = pics.map(|p| direct_frame::<T>(p, state));
        let shared_pitch = direct.iter().all(Option::is_some)
            && pics.iter().all(|p| p.stride[0] == pics[0].stride[0]);
        for (k, pic) in pics.iter().enumerate() {
            let p = match direct[k] {
                Some(f) if shared_pitch || pic.stride[0] == pic.w[0] => {
                    Held::Direct(f.clone(), pic.stride[0])
                }
                _ => {
                    // A device picture of another device, or with a pitch its partners do not
                    // share, goes through the host.
                    if pic.device_samples().is_some() {
                        crate::log_debug!(
                            "device picture of another device or pitch: read through the host"
                        );
                    }
                    pic.fetch_host(crate::picture::LUMA)?;
                    Held::Cached(cache.acquire(state, pic)?)
                }
            };
            index[k] = match planes.iter().position(|q| q.same(&p)) {
                Some(i) => i,
                None => {
                    planes.push(p);
                    planes.len() - 1
                }
            };
        }
        // From here on the guard owns the planes: an error below still releases them.
        let held = UploadedLuma {
            planes,
            index,
            stream: stream.clone(),
            waited: false,
        };
        // Uploads first, one lock at a time; later only read locks, which no writer can block
        // because every plane here is uploaded and held (so not reusable).
        for (k, pic) in pics.iter().enumerate() {
            if let Held::Cached(p) = &held.planes[held.index[k]] {
                ensure_uploaded(p, pic, stream)?;
            }
        }
        for p in &held.planes {
            match p {
                Held::Cached(p) => stream.wait_event(&p.ready)?,
                Held::Direct(f, _) => f.order_after_writes(stream)?,
            }
        }
        Ok(held)
    }

    /// Gives the planes back after the host has waited for work queued on the stream after
    /// every use of them (a job's read-back): no release to record, so no runtime call, and no
    /// wait for the next upload into these entries. With many worker streams per state (several
    /// contexts sharing one) the recorded releases made up most of a frame's runtime calls.
    pub(crate) fn release_waited(mut self) {
        self.waited = true;
    }

    /// The planes, in the order of the pictures given to [`Self::acquire`].
    pub(crate) fn get(&self) -> [Luma<'_, T>; N] {
        std::array::from_fn(|k| match &self.planes[self.index[k]] {
            Held::Cached(p) => Luma(LumaRef::Cached(read(&p.slot))),
            // Checked in `acquire`; the fallback keeps this total.
            Held::Direct(f, stride) => match T::device_plane(f, 0) {
                Some(b) => Luma(LumaRef::Direct(b, *stride)),
                None => unreachable!("device picture without a luma plane of its type"),
            },
        })
    }
}

/// The device memory of `pic` when it is a device picture of `state`'s device with a luma
/// plane of type `T`.
fn direct_frame<'p, T: DevicePlaneAs>(
    pic: &'p PictureData,
    state: &GpuState,
) -> Option<&'p Arc<DeviceFrame>> {
    device_frame(pic, state.device()).filter(|f| T::device_plane(f, 0).is_some())
}

impl<T: Sample> Held<T> {
    fn same(&self, other: &Held<T>) -> bool {
        match (self, other) {
            (Held::Cached(a), Held::Cached(b)) => Arc::ptr_eq(a, b),
            (Held::Direct(a, _), Held::Direct(b, _)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl<T: Sample, const N: usize> Drop for UploadedLuma<T, N> {
    fn drop(&mut self) {
        if self.waited {
            return;
        }
        for p in &self.planes {
            let p = match p {
                Held::Cached(p) => p,
                // Its release waits for the device instead.
                Held::Direct(f, _) => {
                    f.mark_unwaited();
                    continue;
                }
            };
            if mark_released(p, &self.stream).is_err() {
                // Without the marker, wait here so the plane is never refilled under a reader
                // (best effort: the device may be gone).
                let _ = self.stream.synchronize();
            }
        }
    }
}

/// Records on `stream` the point after its uses of `plane` queued so far.
fn mark_released<T: Sample>(plane: &Plane<T>, stream: &Stream) -> Result<()> {
    let key = stream.id();
    let mut rel = plane.released.lock().unwrap_or_else(|e| e.into_inner());
    let i = match rel.iter().position(|(k, _)| *k == key) {
        Some(i) => i,
        None => {
            rel.push((key, Event::new(stream.device())?));
            rel.len() - 1
        }
    };
    rel[i].1.record(stream)
}
