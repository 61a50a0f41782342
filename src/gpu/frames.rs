//! Pictures in device memory: DEVICE pools (`vmaf_hip_preallocate_pictures`,
//! `vmaf_cuda_preallocate_pictures`) hand out pictures whose `data[]` are device addresses the
//! caller fills on the GPU (a decoder's frames copied device to device).
//!
//! Every plane is one dense allocation (row pitch = width), so GPU extractors read the luma in
//! place as the dense plane their kernels expect. The caller's copies are ordered before ours
//! with an event recorded on the legacy default stream at `vmaf_read_pictures`: synchronous
//! copies (`cuMemCpy2D`, FFmpeg's way) and work on the caller's blocking streams land there;
//! a caller using its own non-blocking stream synchronises it first. CPU code (extractors
//! without a GPU version) reads host copies of the planes it needs, made once per picture.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::gpu::launch::Sample;
use crate::gpu::{Device, DeviceBuffer, DeviceCopy, Event, Stream};
use crate::picture::{plane_dims, DeviceSamples, PictureData, PixelFormat, PlaneRef};

/// The planes of one device picture, typed by sample size.
pub(crate) enum DevPlanes {
    U8(Vec<DeviceBuffer<u8>>),
    U16(Vec<DeviceBuffer<u16>>),
}

/// Device memory of one picture, shared with the jobs that read it.
pub(crate) struct DeviceFrame {
    device: Arc<Device>,
    planes: DevPlanes,
    /// Recorded on the legacy default stream when the picture is submitted.
    written: Event,
    /// Samples of each plane's host copy: its rows at the picture's pitch, the last one's
    /// padding included (which the device memory may lack).
    host_lens: [usize; 3],
    /// What keeps a caller's memory alive ([`wrap_device_picture`]); let go only after the
    /// device's work on the memory has finished (`Drop`).
    owner: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// Set when work reading the planes was queued and its reader gave the frame up without
    /// the host having waited for that work (a failed or abandoned job).
    unwaited: AtomicBool,
    /// Work that makes planes of `planes` from the caller's memory (a semi-planar frame),
    /// queued with the caller's writes at each submission.
    unpack: Option<Box<dyn Unpack>>,
    /// Set once `unpack` was queued: the caller's memory may still be read by it.
    unpacked: AtomicBool,
    /// Gives the planes of ours back for the next picture (see [`UnpackPlanes`]), once nothing
    /// on the device reads them any more.
    recycle: Option<Recycle>,
}

/// What gives a picture's planes of ours back when it goes.
type Recycle = Box<dyn FnOnce(&mut DevPlanes) + Send + Sync>;

/// The planes of ours a semi-planar picture is unpacked into (P01x luma, split chroma), kept
/// by the state for the next picture: freeing device memory waits for the whole device, and a
/// decoder's frames come at one size.
struct UnpackPlanes<T: DeviceCopy>(Vec<DeviceBuffer<T>>, std::time::Instant);

/// How long a kept set of planes of another shape than the pictures now wrapped stays in the
/// pool: a context on the same state may be using that shape in turn.
const UNPACK_PLANES_KEPT: std::time::Duration = std::time::Duration::from_secs(2);

/// Buffers of `lens` elements: a set a picture of the same shape gave back, else new ones;
/// kept sets of another shape idle for [`UNPACK_PLANES_KEPT`] are freed. A picture with no
/// planes of ours leaves the kept sets to the pictures that have some.
fn unpack_planes<T: Sample + Send + 'static>(
    state: &crate::gpu::GpuState,
    lens: &[usize],
) -> Result<Vec<DeviceBuffer<T>>> {
    if lens.is_empty() {
        return Ok(Vec::new());
    }
    let fits = |UnpackPlanes(kept, _): &UnpackPlanes<T>| {
        kept.len() == lens.len() && kept.iter().zip(lens).all(|(b, &n)| b.len() == n)
    };
    let stale = |UnpackPlanes(_, back): &UnpackPlanes<T>| back.elapsed() > UNPACK_PLANES_KEPT;
    let (found, stale) = state.take_scratch_fitting(fits, stale);
    // freed (each a device-wide wait) before new ones are made
    drop(stale);
    if let Some(UnpackPlanes(kept, _)) = found {
        return Ok(kept);
    }
    lens.iter()
        .map(|&n| DeviceBuffer::new(state.device(), n))
        .collect()
}

/// The [`Recycle`] of planes `from..` of a picture (its planes of ours) into `state`'s pool.
fn recycle_from<T: Sample + Send + 'static>(
    state: &Arc<crate::gpu::GpuState>,
    from: usize,
    take: fn(&mut DevPlanes) -> Option<&mut Vec<DeviceBuffer<T>>>,
) -> Recycle {
    let state = Arc::downgrade(state);
    Box::new(move |planes| {
        if let (Some(state), Some(v)) = (state.upgrade(), take(planes)) {
            if from < v.len() {
                state.put_scratch(UnpackPlanes(v.split_off(from), std::time::Instant::now()));
            }
        }
    })
}

/// Device work that fills planes of a device picture from memory the caller wrote (the planar
/// planes of a semi-planar frame), queued on the stream the caller's writes are ordered on.
pub(crate) trait Unpack: Send + Sync {
    fn queue(&self, planes: &DevPlanes, stream: &Stream) -> Result<()>;
}

/// The caller's memory of a semi-planar frame that [`Unpack`] work reads, each with its pitch
/// in samples: for NV12 the interleaved chroma (when it is read); for P01x the luma words when
/// they need a shift and the interleaved chroma when it is read.
pub(crate) enum SemiPlanarSources {
    Nv12 {
        chroma: Option<(DeviceBuffer<u8>, usize)>,
    },
    Deep {
        luma: Option<(DeviceBuffer<u16>, usize)>,
        chroma: Option<(DeviceBuffer<u16>, usize)>,
    },
}

/// Makes the [`Unpack`] work of a frame from its sources (None: nothing to do).
pub(crate) type MakeUnpack<'a> = Box<dyn FnOnce(SemiPlanarSources) -> Option<Box<dyn Unpack>> + 'a>;

/// How a semi-planar device frame's planes are unpacked: what
/// [`wrap_device_semiplanar`] needs beside the memory. The picture layer makes it
/// (`picture::semiplanar::gpu::unpacker`), as it launches the kernels.
pub struct UnpackMaker(pub(crate) MakeUnpack<'static>);

impl Drop for DeviceFrame {
    fn drop(&mut self) {
        // Borrowed planes do not wait on their own. Every reader that finished waited for its
        // work on its own stream (its read-back), so the caller's memory can go at once; after
        // a reader that did not, one device-wide wait covers every plane before the owner goes.
        // (Waiting always cost a third of the throughput of frames in caller memory: 6,000
        // against 8,900 fps from one feeding thread, 1080p 8-bit on an H100.)
        if self.owner.is_some() && *self.unwaited.get_mut() {
            self.device.synchronize_for_release();
        } else if self.owner.is_some()
            && *self.unpacked.get_mut()
            && self.written.synchronize().is_err()
        {
            // The unpacking may still read the caller's memory: readers waited for work behind
            // it, so this wait is normally over at once.
            self.device.synchronize_for_release();
        }
        // Every reader waited for its work (or the device was waited for above): the planes
        // are free for the next picture.
        if let Some(recycle) = self.recycle.take() {
            recycle(&mut self.planes);
        }
    }
}

impl DeviceFrame {
    /// Makes `stream`'s later work wait for the caller's writes.
    pub(crate) fn order_after_writes(&self, stream: &Stream) -> Result<()> {
        stream.wait_event(&self.written)
    }

    /// Notes that device work reading the frame may still be queued with no host wait behind
    /// it, so the frame's release must wait for the device.
    pub(crate) fn mark_unwaited(&self) {
        self.unwaited.store(true, Ordering::Release);
    }
}

/// Device work reading `frames` directly (not through [`crate::gpu::planes::UploadedLuma`]):
/// dropped before [`Self::waited`], it marks them [`DeviceFrame::mark_unwaited`].
pub(crate) struct FrameReads<'a, const N: usize> {
    frames: [&'a DeviceFrame; N],
    waited: bool,
}

impl<'a, const N: usize> FrameReads<'a, N> {
    pub(crate) fn new(frames: [&'a DeviceFrame; N]) -> Self {
        FrameReads {
            frames,
            waited: false,
        }
    }

    /// The host has waited for work queued after every read of the frames.
    pub(crate) fn waited(mut self) {
        self.waited = true;
    }
}

impl<const N: usize> Drop for FrameReads<'_, N> {
    fn drop(&mut self) {
        if !self.waited {
            for f in self.frames {
                f.mark_unwaited();
            }
        }
    }
}

/// [`FrameReads`] for work whose results are collected later: holds the frames until then,
/// and marks them [`DeviceFrame::mark_unwaited`] when dropped before [`Self::waited`].
pub(crate) struct HeldFrameReads<const N: usize> {
    frames: [Arc<DeviceFrame>; N],
    waited: bool,
}

impl<const N: usize> HeldFrameReads<N> {
    pub(crate) fn new(frames: [Arc<DeviceFrame>; N]) -> Self {
        HeldFrameReads {
            frames,
            waited: false,
        }
    }

    /// The frames, to queue reads of them.
    pub(crate) fn frames(&self) -> &[Arc<DeviceFrame>; N] {
        &self.frames
    }

    /// The host has waited for work queued after every read of the frames.
    pub(crate) fn waited(mut self) {
        self.waited = true;
    }
}

impl<const N: usize> Drop for HeldFrameReads<N> {
    fn drop(&mut self) {
        if !self.waited {
            for f in &self.frames {
                f.mark_unwaited();
            }
        }
    }
}

/// Plane `i` of a device picture as device samples of type `T`.
pub(crate) trait DevicePlaneAs: Sample {
    fn device_plane(frame: &DeviceFrame, i: usize) -> Option<&DeviceBuffer<Self>>;
}

impl DevicePlaneAs for u8 {
    fn device_plane(frame: &DeviceFrame, i: usize) -> Option<&DeviceBuffer<u8>> {
        match &frame.planes {
            DevPlanes::U8(p) => p.get(i),
            DevPlanes::U16(_) => None,
        }
    }
}

impl DevicePlaneAs for u16 {
    fn device_plane(frame: &DeviceFrame, i: usize) -> Option<&DeviceBuffer<u16>> {
        match &frame.planes {
            DevPlanes::U16(p) => p.get(i),
            DevPlanes::U8(_) => None,
        }
    }
}

/// Host copy of one plane.
enum HostPlane {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

/// [`DeviceSamples`] of the GPU layer.
pub(crate) struct DevicePicture {
    frame: Arc<DeviceFrame>,
    host: [OnceLock<HostPlane>; 3],
    /// Serialises making host copies (one download per plane even when threads race).
    fetching: Mutex<Option<Stream>>,
}

/// The device memory behind `pic`, when it is a device picture on `device`.
pub(crate) fn device_frame<'p>(
    pic: &'p PictureData,
    device: &Arc<Device>,
) -> Option<&'p Arc<DeviceFrame>> {
    let d = pic
        .device_samples()?
        .as_any()
        .downcast_ref::<DevicePicture>()?;
    Arc::ptr_eq(&d.frame.device, device).then_some(&d.frame)
}

impl DeviceSamples for DevicePicture {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn address(&self, i: usize) -> usize {
        let a = match &self.frame.planes {
            DevPlanes::U8(p) => p.get(i).map(|b| b.ptr().addr()),
            DevPlanes::U16(p) => p.get(i).map(|b| b.ptr().addr()),
        };
        a.unwrap_or(0) as usize
    }

    fn host(&self, i: usize) -> Option<PlaneRef<'_>> {
        Some(match self.host.get(i)?.get()? {
            HostPlane::U8(v) => PlaneRef::U8(v),
            HostPlane::U16(v) => PlaneRef::U16(v),
        })
    }

    fn fetch_host(&self, i: usize) -> Result<()> {
        let Some(slot) = self.host.get(i) else {
            return Err(Error::inval(format!("no plane {i}")));
        };
        if slot.get().is_some() {
            return Ok(());
        }
        let mut stream = self.fetching.lock().unwrap_or_else(|e| e.into_inner());
        if slot.get().is_some() {
            return Ok(());
        }
        let stream = match &mut *stream {
            Some(s) => s,
            None => stream.insert(Stream::new(&self.frame.device)?),
        };
        let reads = FrameReads::new([&*self.frame]);
        self.frame.order_after_writes(stream)?;
        let plane = match &self.frame.planes {
            DevPlanes::U8(p) => HostPlane::U8(download(p, i, self.frame.host_lens[i], stream)?),
            DevPlanes::U16(p) => HostPlane::U16(download(p, i, self.frame.host_lens[i], stream)?),
        };
        // The copy was waited for (blocking).
        reads.waited();
        let _ = slot.set(plane);
        Ok(())
    }

    fn forget_host(&mut self) {
        for h in &mut self.host {
            h.take();
        }
    }

    fn mark_written(&self) -> Result<()> {
        // The unpacking goes on the legacy stream, behind the caller's writes; our streams are
        // non-blocking, so it holds none of them up.
        // Once: the caller's memory does not change while we hold it, and queueing again would
        // rewrite planes that earlier readers may still be reading.
        if let Some(unpack) = &self.frame.unpack {
            if !self.frame.unpacked.swap(true, Ordering::AcqRel) {
                let queued = unpack.queue(&self.frame.planes, &Stream::legacy(&self.frame.device));
                if let Err(e) = queued {
                    // Part of it may be queued with no event behind it to wait on.
                    self.frame.mark_unwaited();
                    return Err(e);
                }
            }
        }
        // Readers' streams wait on it on the device; no host wait: a caller's legacy stream may
        // hold much more than its copies (FFmpeg's decoding and scaling of later frames).
        let recorded = self.frame.written.record_legacy();
        if recorded.is_err() && self.frame.unpack.is_some() {
            // The unpacking has no event behind it to wait on.
            self.frame.mark_unwaited();
        }
        recorded
    }
}

/// Plane `i` of `planes` copied to host memory after the work queued on `stream`, padded with
/// zeros to `len` samples.
fn download<T: Sample + Default>(
    planes: &[DeviceBuffer<T>],
    i: usize,
    len: usize,
    stream: &Stream,
) -> Result<Vec<T>> {
    let buf = planes
        .get(i)
        .ok_or_else(|| Error::inval(format!("no plane {i}")))?;
    let n = buf.len();
    let mut v = crate::limits::try_filled(len.max(n), T::default(), "host copy of a plane")?;
    buf.download_blocking(stream, &mut v[..n])?;
    Ok(v)
}

/// A `w`x`h` picture of `pix_fmt` at `bpc` bits in `device`'s memory, every plane dense.
pub fn device_picture(
    device: &Arc<Device>,
    pix_fmt: PixelFormat,
    bpc: u32,
    w: usize,
    h: usize,
) -> Result<PictureData> {
    crate::picture::check_geometry(pix_fmt, bpc, w, h)?;
    let dims = plane_dims(pix_fmt, w, h);
    let n = pix_fmt.plane_count();
    let lens = dims.map(|(pw, ph)| pw.checked_mul(ph));
    if lens.iter().any(Option::is_none) {
        return Err(Error::inval("picture too large"));
    }
    let lens = lens.map(|l| l.unwrap_or(0));
    let planes = if bpc == 8 {
        DevPlanes::U8(
            (0..n)
                .map(|i| DeviceBuffer::new(device, lens[i]))
                .collect::<Result<_>>()?,
        )
    } else {
        DevPlanes::U16(
            (0..n)
                .map(|i| DeviceBuffer::new(device, lens[i]))
                .collect::<Result<_>>()?,
        )
    };
    picture_over(
        device,
        (planes, None, None),
        None,
        (pix_fmt, bpc, w, h),
        dims.map(|d| d.0),
        lens,
    )
}

/// The picture over `planes` (rows `stride[i]` samples apart), filled by `unpack` if set.
fn picture_over(
    device: &Arc<Device>,
    (planes, unpack, recycle): (DevPlanes, Option<Box<dyn Unpack>>, Option<Recycle>),
    owner: Option<Box<dyn std::any::Any + Send + Sync>>,
    (pix_fmt, bpc, w, h): (PixelFormat, u32, usize, usize),
    stride: [usize; 3],
    host_lens: [usize; 3],
) -> Result<PictureData> {
    let frame = DeviceFrame {
        device: device.clone(),
        planes,
        written: Event::new(device)?,
        host_lens,
        owner,
        unwaited: AtomicBool::new(false),
        unpack,
        unpacked: AtomicBool::new(false),
        recycle,
    };
    let samples = DevicePicture {
        frame: Arc::new(frame),
        host: Default::default(),
        fetching: Mutex::new(None),
    };
    PictureData::on_device(pix_fmt, bpc, w, h, stride, Box::new(samples))
}

/// Each plane of `pic` copied densely (rows back to back, native-endian samples) into device
/// memory of its own on `stream`'s device: the layout [`wrap_device_picture`] reads, for
/// callers and benchmarks that start from host pictures.
pub fn upload_dense_planes(pic: &PictureData, stream: &Stream) -> Result<Vec<DeviceBuffer<u8>>> {
    upload_pitched_planes(pic, stream, 0).map(|(b, _)| b)
}

/// As [`upload_dense_planes`], with `pad` samples after each row (a decoder's pitched
/// surfaces): the buffers and each plane's pitch in samples, for [`wrap_device_planes`].
pub fn upload_pitched_planes(
    pic: &PictureData,
    stream: &Stream,
    pad: usize,
) -> Result<(Vec<DeviceBuffer<u8>>, Vec<usize>)> {
    let bps = pic.bytes_per_sample();
    (0..pic.pix_fmt.plane_count())
        .map(|i| {
            let (w, h, s) = (pic.w[i], pic.h[i], pic.stride[i]);
            let pitch = w + pad;
            let mut bytes = Vec::new();
            bytes
                .try_reserve_exact(pitch * h * bps)
                .map_err(|_| Error::NoMem("host copy of a plane".into()))?;
            let plane = pic.plane(i);
            for y in 0..h {
                match plane {
                    PlaneRef::U8(v) => bytes.extend_from_slice(&v[y * s..][..w]),
                    PlaneRef::U16(v) => {
                        bytes.extend(v[y * s..][..w].iter().flat_map(|x| x.to_ne_bytes()))
                    }
                }
                // Padding a reader must skip: a value no sample of the clips has.
                bytes.resize(bytes.len() + pad * bps, 0xa5);
            }
            let mut b = DeviceBuffer::new(stream.device(), bytes.len())?;
            b.upload_blocking(stream, &bytes)?;
            Ok((b, pitch))
        })
        .collect()
}

/// A `w`x`h` picture of `pix_fmt` at `bpc` bits over device memory the caller owns (the
/// planes of DLPack tensors): plane `i` is dense (rows `plane_dims` width apart) at device
/// address `planes[i]`. See [`wrap_device_planes`].
///
/// # Safety
/// As for [`wrap_device_planes`], each plane's rows back to back.
pub unsafe fn wrap_device_picture(
    device: &Arc<Device>,
    pix_fmt: PixelFormat,
    bpc: u32,
    w: usize,
    h: usize,
    planes: &[u64],
    owner: Box<dyn std::any::Any + Send + Sync>,
) -> Result<PictureData> {
    let dims = plane_dims(pix_fmt, w, h);
    let pitched: Vec<(u64, usize)> = planes
        .iter()
        .zip(dims)
        .map(|(&a, (pw, _))| (a, pw))
        .collect();
    // SAFETY: forwarded contract, with each row pitch the plane's width.
    unsafe { wrap_device_planes(device, pix_fmt, bpc, w, h, &pitched, owner) }
}

/// A `w`x`h` picture of `pix_fmt` at `bpc` bits over device memory the caller owns: plane `i`
/// starts at device address `planes[i].0` with rows `planes[i].1` samples apart (FFmpeg's CUDA
/// frames, a decoder's pitched surfaces). Scored in place, like a DEVICE pool's pictures: the
/// caller's work queued on the legacy default stream before `read_pictures` comes first. GPU
/// kernels read the luma at its pitch where the pictures they compare share it; otherwise a
/// pitched plane reaches them through a host copy. `owner` keeps the memory alive: it drops
/// after the picture's last reader, once the device has finished the work queued so far (so
/// nothing of ours reads the memory after the owner lets it go). On failure `owner` is
/// dropped before anything has read the memory.
///
/// # Safety
/// Each of the first `pix_fmt.plane_count()` addresses holds its plane's samples (`u8` at 8
/// bits, else `u16`) in `h` rows of its pitch, in memory usable on `device`, which stays
/// allocated until `owner` drops and which the caller does not write while the library may
/// read it.
pub unsafe fn wrap_device_planes(
    device: &Arc<Device>,
    pix_fmt: PixelFormat,
    bpc: u32,
    w: usize,
    h: usize,
    planes: &[(u64, usize)],
    owner: Box<dyn std::any::Any + Send + Sync>,
) -> Result<PictureData> {
    crate::picture::check_geometry(pix_fmt, bpc, w, h)?;
    let dims = plane_dims(pix_fmt, w, h);
    let n = pix_fmt.plane_count();
    if planes.len() < n {
        return Err(Error::inval(format!(
            "{n} device planes needed, {} given",
            planes.len()
        )));
    }
    let mut strides = dims.map(|d| d.0);
    let mut host_lens = [0usize; 3];
    let mut spans = [0usize; 3];
    let bps = if bpc == 8 { 1 } else { 2 };
    // Allocations already checked: planes of one frame usually share one.
    let mut checked: Vec<(u64, u64)> = Vec::with_capacity(n);
    for i in 0..n {
        let ((pw, ph), s) = (dims[i], planes[i].1);
        if ph == 0 || pw == 0 {
            // An empty chroma plane (4:2:0 one row high, 4:2:x one column wide): never read.
            continue;
        }
        // The kernels take pitches as 32-bit ints.
        if s < pw || s.saturating_mul(bps) > i32::MAX as usize {
            return Err(Error::inval(format!(
                "plane {i}: pitch of {s} samples is below its width {pw} or above 2 GiB"
            )));
        }
        strides[i] = s;
        host_lens[i] = s
            .checked_mul(ph)
            .ok_or_else(|| Error::inval(format!("plane {i} is larger than memory")))?;
        // The last row's padding need not exist (a cropped view's storage may end with its
        // samples); everything before must be GPU memory.
        spans[i] = (ph - 1) * s + pw;
        let bytes = spans[i]
            .checked_mul(bps)
            .ok_or_else(|| Error::inval(format!("plane {i} is larger than memory")))?;
        let (at, end) = (planes[i].0, planes[i].0.saturating_add(bytes as u64));
        if !checked.iter().any(|&(lo, hi)| lo <= at && end <= hi) {
            checked.push(device.check_span(&format!("device plane {i}"), at, bytes)?);
        }
    }
    let planes = if bpc == 8 {
        DevPlanes::U8(
            (0..n)
                // SAFETY: forwarded contract: the plane's `ph` rows of pitch `s` stay allocated
                // until `owner` drops, which `DeviceFrame`'s drop delays until the device's
                // work is done.
                .map(|i| unsafe { DeviceBuffer::borrowed(device, planes[i].0, spans[i]) })
                .collect::<Result<_>>()?,
        )
    } else {
        DevPlanes::U16(
            (0..n)
                // SAFETY: as above.
                .map(|i| unsafe { DeviceBuffer::borrowed(device, planes[i].0, spans[i]) })
                .collect::<Result<_>>()?,
        )
    };
    picture_over(
        device,
        (planes, None, None),
        Some(owner),
        (pix_fmt, bpc, w, h),
        strides,
        host_lens,
    )
}

/// A `w`x`h` semi-planar frame of layout `fmt` in device memory the caller owns (a decoder's
/// NV12 or P010 surface), scored as the yuv420p picture of the same samples: the luma at
/// device address `luma.0` with rows `luma.1` samples apart, the interleaved chroma at
/// `chroma.0` with rows `chroma.1` samples apart (each holding `2 * chroma width` samples).
/// NV12 and P016 luma is read in place; P010 and P012 luma is shifted into memory of ours, and
/// the chroma is split into two planes of ours only when `with_chroma` (an extractor reads
/// it): both on the legacy stream, behind the caller's writes, at each `read_pictures`.
/// `make_unpack` turns the caller's memory it is given into that work (`with_chroma` comes from
/// `Context::planes_read`). Otherwise as
/// [`wrap_device_planes`].
///
/// # Safety
/// The luma's `h` rows and, with `with_chroma`, the chroma's rows at their pitches (the last
/// row's padding excepted) are memory usable on `state`'s device, which stays allocated until
/// `owner` drops and which the caller does not write while the library may read it.
#[allow(clippy::too_many_arguments)]
pub unsafe fn wrap_device_semiplanar(
    state: &Arc<crate::gpu::GpuState>,
    fmt: crate::picture::semiplanar::SemiPlanar,
    (w, h): (usize, usize),
    luma: (u64, usize),
    chroma: (u64, usize),
    with_chroma: bool,
    UnpackMaker(make_unpack): UnpackMaker,
    owner: Box<dyn std::any::Any + Send + Sync>,
) -> Result<PictureData> {
    use crate::picture::semiplanar::SemiPlanar;
    let device = state.device();
    fmt.check(w, h, [luma.1, chroma.1])?;
    if fmt.bytes_per_sample() == 2
        && (!luma.0.is_multiple_of(2) || (with_chroma && !chroma.0.is_multiple_of(2)))
    {
        return Err(Error::inval("odd device address for 16-bit words"));
    }
    let (cw, ch) = SemiPlanar::chroma_dims(w, h);
    // A frame one sample wide or high has empty chroma planes.
    let with_chroma = with_chroma && cw > 0 && ch > 0;
    let bps = fmt.bytes_per_sample();
    // Samples each source spans: the last row's padding need not exist.
    let luma_span = (h - 1) * luma.1 + w;
    let chroma_span = ch.saturating_sub(1) * chroma.1 + 2 * cw;
    device.check_span("semi-planar luma", luma.0, luma_span * bps)?;
    if with_chroma {
        device.check_span("semi-planar chroma", chroma.0, chroma_span * bps)?;
    }
    let shifted = fmt.shift() != 0;
    let lens = [w * h, cw * ch, cw * ch];
    let mut stride = [if shifted { w } else { luma.1 }, cw, cw];
    let mut host_lens = [if shifted { w * h } else { luma.1 * h }, lens[1], lens[2]];
    if !with_chroma {
        (stride[1], stride[2], host_lens[1], host_lens[2]) = (cw, cw, 0, 0);
    }
    let chroma_lens: &[usize] = if with_chroma { &lens[1..] } else { &[] };
    let (planes, unpack, recycle) = if fmt == SemiPlanar::Nv12 {
        // SAFETY: forwarded contract: the luma's rows stay allocated until `owner` drops, which
        // `DeviceFrame`'s drop delays until the device's work is done.
        let mut p = vec![unsafe { DeviceBuffer::<u8>::borrowed(device, luma.0, luma_span) }?];
        p.extend(unpack_planes::<u8>(state, chroma_lens)?);
        let src = if with_chroma {
            // SAFETY: as above, for the chroma rows.
            Some(unsafe { DeviceBuffer::<u8>::borrowed(device, chroma.0, chroma_span) }?)
        } else {
            None
        };
        let sources = SemiPlanarSources::Nv12 {
            chroma: src.map(|b| (b, chroma.1)),
        };
        let recycle = recycle_from::<u8>(state, 1, |p| match p {
            DevPlanes::U8(v) => Some(v),
            DevPlanes::U16(_) => None,
        });
        (DevPlanes::U8(p), make_unpack(sources), Some(recycle))
    } else {
        // P01x: the shifted luma is ours too, so the planes of ours start at 0.
        let (src_luma, mut p, ours_from) = if shifted {
            // SAFETY: as above.
            let b = unsafe { DeviceBuffer::<u16>::borrowed(device, luma.0, luma_span) }?;
            let ours: Vec<usize> = std::iter::once(lens[0])
                .chain(chroma_lens.iter().copied())
                .collect();
            (Some((b, luma.1)), unpack_planes::<u16>(state, &ours)?, 0)
        } else {
            // SAFETY: as above.
            let b = unsafe { DeviceBuffer::<u16>::borrowed(device, luma.0, luma_span) }?;
            (None, vec![b], 1)
        };
        if !shifted {
            p.extend(unpack_planes::<u16>(state, chroma_lens)?);
        }
        let src_chroma = if with_chroma {
            // SAFETY: as above, for the chroma rows.
            Some((
                unsafe { DeviceBuffer::<u16>::borrowed(device, chroma.0, chroma_span) }?,
                chroma.1,
            ))
        } else {
            None
        };
        let sources = SemiPlanarSources::Deep {
            luma: src_luma,
            chroma: src_chroma,
        };
        let recycle = recycle_from::<u16>(state, ours_from, |p| match p {
            DevPlanes::U16(v) => Some(v),
            DevPlanes::U8(_) => None,
        });
        (DevPlanes::U16(p), make_unpack(sources), Some(recycle))
    };
    picture_over(
        device,
        (planes, unpack, recycle),
        Some(owner),
        (PixelFormat::Yuv420p, fmt.bpc(), w, h),
        stride,
        host_lens,
    )
}
