//! DLPack: the tensors `__dlpack__` hands over in a capsule, legacy (`dltensor`) and versioned
//! (`dltensor_versioned`). The only module of the crate with `unsafe`.
//!
//! Taking a capsule renames it to `used_...` (so its own destructor leaves the tensor alone)
//! and makes us the tensor's owner: [`Tensor`] calls the producer's deleter when it drops,
//! which may be on a worker thread of the library after the last use of the samples. DLPack
//! lets a deleter run on any thread; producers that need the GIL take it themselves, so the
//! callers of the library release it while the library runs.

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *const i64,
    /// In elements; NULL for a compact row-major tensor.
    strides: *const i64,
    byte_offset: u64,
}

// Layout as the DLPack header defines it; some fields are never read here.
#[allow(dead_code)]
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

// Layout as the DLPack header defines it; some fields are never read here.
#[allow(dead_code)]
#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

// Layout as the DLPack header defines it; some fields are never read here.
#[allow(dead_code)]
#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

/// `DLDeviceType` values we take.
pub const DL_CPU: i32 = 1;
pub const DL_CUDA: i32 = 2;
pub const DL_CUDA_HOST: i32 = 3;
pub const DL_ROCM: i32 = 10;
pub const DL_ROCM_HOST: i32 = 11;
const DL_UINT: u8 = 1;

const LEGACY: &CStr = c"dltensor";
const LEGACY_USED: &CStr = c"used_dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const VERSIONED_USED: &CStr = c"used_dltensor_versioned";

enum Managed {
    Legacy(NonNull<DLManagedTensor>),
    Versioned(NonNull<DLManagedTensorVersioned>),
}

/// A tensor taken from a DLPack capsule; the producer's memory stays valid until it drops.
pub struct Tensor {
    managed: Managed,
}

// SAFETY: the tensor is only read through shared references, and DLPack requires producers to
// accept the deleter being called from any thread (Drop is the only call made).
unsafe impl Send for Tensor {}
// SAFETY: as above: nothing mutates the tensor through `&Tensor`.
unsafe impl Sync for Tensor {}

impl Tensor {
    /// Takes the tensor out of `capsule` (a `__dlpack__` result), which is marked used.
    pub fn take(capsule: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let obj = capsule.as_ptr();
        // SAFETY: `obj` is a live object (borrowed from `capsule`); the capsule calls accept any
        // object and report a non-capsule or another name as false / NULL with an error set.
        let tensor = unsafe {
            if pyo3::ffi::PyCapsule_CheckExact(obj) == 0 {
                return Err(PyValueError::new_err(
                    "expected a DLPack capsule (the result of __dlpack__())",
                ));
            }
            if pyo3::ffi::PyCapsule_IsValid(obj, VERSIONED.as_ptr()) == 1 {
                let p = pyo3::ffi::PyCapsule_GetPointer(obj, VERSIONED.as_ptr());
                let p = NonNull::new(p.cast::<DLManagedTensorVersioned>())
                    .ok_or_else(|| PyErr::fetch(capsule.py()))?;
                if pyo3::ffi::PyCapsule_SetName(obj, VERSIONED_USED.as_ptr()) != 0 {
                    return Err(PyErr::fetch(capsule.py()));
                }
                Tensor {
                    managed: Managed::Versioned(p),
                }
            } else if pyo3::ffi::PyCapsule_IsValid(obj, LEGACY.as_ptr()) == 1 {
                let p = pyo3::ffi::PyCapsule_GetPointer(obj, LEGACY.as_ptr());
                let p = NonNull::new(p.cast::<DLManagedTensor>())
                    .ok_or_else(|| PyErr::fetch(capsule.py()))?;
                if pyo3::ffi::PyCapsule_SetName(obj, LEGACY_USED.as_ptr()) != 0 {
                    return Err(PyErr::fetch(capsule.py()));
                }
                Tensor {
                    managed: Managed::Legacy(p),
                }
            } else {
                return Err(PyValueError::new_err(
                    "not an unused DLPack capsule (a capsule can be consumed only once)",
                ));
            }
        };
        if let Managed::Versioned(p) = tensor.managed {
            // SAFETY: a versioned capsule points to a live DLManagedTensorVersioned.
            let major = unsafe { p.as_ref().version.major };
            if major != 1 {
                // Dropping `tensor` hands it back to its deleter, as the protocol asks.
                return Err(PyValueError::new_err(format!(
                    "DLPack version {major} is not supported (1 is)"
                )));
            }
        }
        Ok(tensor)
    }

    fn raw(&self) -> &DLTensor {
        match self.managed {
            // SAFETY: the managed tensor is live until our Drop calls its deleter.
            Managed::Legacy(p) => unsafe { &p.as_ref().dl_tensor },
            // SAFETY: as above.
            Managed::Versioned(p) => unsafe { &p.as_ref().dl_tensor },
        }
    }

    /// `(DLDeviceType, device id)`.
    pub fn device(&self) -> (i32, i32) {
        let d = self.raw().device;
        (d.device_type, d.device_id)
    }

    /// Bytes per sample for unsigned 8- and 16-bit scalar tensors; None for any other type.
    pub fn uint_bytes(&self) -> Option<usize> {
        let t = self.raw().dtype;
        match (t.code, t.bits, t.lanes) {
            (DL_UINT, 8, 1) => Some(1),
            (DL_UINT, 16, 1) => Some(2),
            _ => None,
        }
    }

    /// A readable name of the element type, for errors.
    pub fn dtype_name(&self) -> String {
        let t = self.raw().dtype;
        let kind = match t.code {
            0 => "int",
            1 => "uint",
            2 => "float",
            4 => "bfloat",
            6 => "bool",
            _ => "type",
        };
        match t.lanes {
            1 => format!("{kind}{}", t.bits),
            l => format!("{kind}{}x{l}", t.bits),
        }
    }

    pub fn shape(&self) -> Vec<i64> {
        let t = self.raw();
        let n = t.ndim.max(0) as usize;
        if n == 0 || t.shape.is_null() {
            return Vec::new();
        }
        // SAFETY: DLPack: `shape` holds `ndim` values while the tensor lives.
        unsafe { std::slice::from_raw_parts(t.shape, n) }.to_vec()
    }

    /// Strides in elements (compact row-major ones when the producer gives none).
    pub fn strides(&self) -> Vec<i64> {
        let t = self.raw();
        let shape = self.shape();
        if t.strides.is_null() {
            let mut s = vec![1i64; shape.len()];
            for i in (0..shape.len().saturating_sub(1)).rev() {
                s[i] = s[i + 1].saturating_mul(shape[i + 1]);
            }
            return s;
        }
        // SAFETY: DLPack: non-NULL `strides` holds `ndim` values while the tensor lives.
        unsafe { std::slice::from_raw_parts(t.strides, shape.len()) }.to_vec()
    }

    /// The tensor as rows of samples: `(rows, columns, row stride, column stride)` in
    /// elements, for a 2-D tensor, or for a 3-D `(rows, pairs, 2)` one whose pairs are adjacent
    /// (`strides[1] == 2`, `strides[2] == 1`: interleaved chroma as decoders store it), read as
    /// rows of `2 * pairs` samples. None for any other shape.
    pub fn rows(&self) -> Option<(i64, i64, i64, i64)> {
        let (shape, strides) = (self.shape(), self.strides());
        match (shape.as_slice(), strides.as_slice()) {
            (&[r, c], &[rs, cs]) => Some((r, c, rs, cs)),
            (&[r, c, 2], &[rs, cs, 1]) if cs == 2 || c == 1 => Some((r, c.checked_mul(2)?, rs, 1)),
            _ => None,
        }
    }

    /// Address of the first element (data plus byte offset).
    pub fn address(&self) -> u64 {
        let t = self.raw();
        (t.data as u64).wrapping_add(t.byte_offset)
    }

    /// Copies the first `h` rows of `w` samples of the tensor (checked by the caller: [`rows`]
    /// with at least that many, host memory, `T`'s size) row by row into `dst`, rows `pitch`
    /// apart. Returns the largest sample seen.
    ///
    /// [`rows`]: Self::rows
    pub fn copy_2d<T: Copy + Into<u32>>(
        &self,
        h: usize,
        w: usize,
        dst: &mut [T],
        pitch: usize,
    ) -> PyResult<u32> {
        let (rows, cols, rs, cs) = self.rows().unwrap_or((0, 0, 0, 0));
        let host = matches!(self.device().0, DL_CPU | DL_CUDA_HOST | DL_ROCM_HOST);
        let ok = host
            && rows >= h as i64
            && cols >= w as i64
            && self.uint_bytes() == Some(std::mem::size_of::<T>())
            && dst.len() >= h.saturating_sub(1).saturating_mul(pitch).saturating_add(w)
            && pitch >= w
            && (self.address() as usize).is_multiple_of(std::mem::align_of::<T>());
        if !ok {
            return Err(PyValueError::new_err("tensor does not fit the plane"));
        }
        let (rs, cs) = (rs as isize, cs as isize);
        let base = self.address() as usize as *const T;
        let mut max = 0u32;
        for y in 0..h {
            let out = &mut dst[y * pitch..y * pitch + w];
            // SAFETY: DLPack: element (y, x) of a host tensor lies at `base + y*rs + x*cs`
            // (elements) for y < rows, x < cols (for a 3-D tensor of adjacent pairs, sample x
            // is element (y, x / 2, x % 2), at the same place), readable while the tensor
            // lives; the checks above keep y and x inside and the address aligned for `T`.
            unsafe {
                let row = base.wrapping_offset(y as isize * rs);
                if cs == 1 {
                    out.copy_from_slice(std::slice::from_raw_parts(row, w));
                } else {
                    for (x, o) in out.iter_mut().enumerate() {
                        *o = *row.wrapping_offset(x as isize * cs);
                    }
                }
            }
            max = out.iter().fold(max, |m, &v| m.max(v.into()));
        }
        Ok(max)
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        match self.managed {
            Managed::Legacy(p) => {
                // SAFETY: we own the managed tensor (its capsule is marked used); its deleter is
                // called once, here, and nothing reads it afterwards.
                unsafe {
                    if let Some(del) = p.as_ref().deleter {
                        del(p.as_ptr());
                    }
                }
            }
            Managed::Versioned(p) => {
                // SAFETY: as above.
                unsafe {
                    if let Some(del) = p.as_ref().deleter {
                        del(p.as_ptr());
                    }
                }
            }
        }
    }
}

/// A picture over the GPU tensors `planes` in place, which it keeps until the library's last
/// use. The caller checked that plane `i` is of its plane's size, rows `pitched[i].1` samples
/// apart from device address `pitched[i].0`, on `device`; the library checks that the rows lie
/// in one allocation.
pub fn wrap_planes(
    device: &std::sync::Arc<vmaf_hip::gpu::Device>,
    (pix_fmt, bpc, w, h): (vmaf_hip::picture::PixelFormat, u32, usize, usize),
    pitched: &[(u64, usize)],
    planes: Vec<Tensor>,
) -> vmaf_hip::Result<vmaf_hip::picture::PictureData> {
    // SAFETY: per the caller's checks each address holds its plane's rows at its pitch on
    // `device`; the tensors move in as the owner, so the memory stays until the library lets
    // the picture go; the producer ordered its writes before ours on the legacy default
    // stream (the Python side asks `__dlpack__(stream=1)` on CUDA, 0 on ROCm) and does not
    // write a tensor it handed over.
    unsafe {
        vmaf_hip::gpu::frames::wrap_device_planes(
            device,
            pix_fmt,
            bpc,
            w,
            h,
            pitched,
            Box::new(planes),
        )
    }
}

/// The planar picture of a semi-planar frame in GPU memory: `pitched` gives the luma's and the
/// interleaved chroma's addresses and pitches (samples), checked by the caller to lie on
/// `state`'s device with adjacent samples; the library checks the rest (each plane within its
/// allocation). The chroma is unpacked on the device only when `with_chroma`.
pub fn wrap_semiplanar(
    state: &std::sync::Arc<vmaf_hip::gpu::GpuState>,
    fmt: vmaf_hip::picture::semiplanar::SemiPlanar,
    (w, h): (usize, usize),
    pitched: [(u64, usize); 2],
    with_chroma: bool,
    planes: Vec<Tensor>,
) -> vmaf_hip::Result<vmaf_hip::picture::PictureData> {
    let unpack = vmaf_hip::picture::semiplanar::gpu::unpacker(state.clone(), fmt, (w, h));
    // SAFETY: as in `wrap_planes`: the caller checked that both planes' rows are memory of
    // `state`'s device, the tensors move in as the owner and stay until the library lets the
    // picture go, and the producer ordered its writes before the legacy default stream, on
    // which the unpacking is queued.
    unsafe {
        vmaf_hip::gpu::frames::wrap_device_semiplanar(
            state,
            fmt,
            (w, h),
            pitched[0],
            pitched[1],
            with_chroma,
            unpack,
            Box::new(planes),
        )
    }
}

/// A device for test arrays, opened once per index.
fn test_device(index: Option<usize>) -> vmaf_hip::Result<std::sync::Arc<vmaf_hip::gpu::Device>> {
    type Opened = Vec<(Option<usize>, std::sync::Arc<vmaf_hip::gpu::GpuState>)>;
    static OPENED: std::sync::Mutex<Opened> = std::sync::Mutex::new(Vec::new());
    let mut o = OPENED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, s)) = o.iter().find(|(i, _)| *i == index) {
        return Ok(s.device().clone());
    }
    let s = vmaf_hip::gpu::GpuState::new(index)?;
    let dev = s.device().clone();
    o.push((index, s));
    Ok(dev)
}

/// Device arrays freed by their DLPack deleter (see [`DeviceArray`]).
static TEST_ARRAYS_FREED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many test device arrays the library has let go (their DLPack deleter ran).
#[pyfunction]
pub fn _test_arrays_freed() -> usize {
    TEST_ARRAYS_FREED.load(std::sync::atomic::Ordering::SeqCst)
}

// SAFETY: the raw pointers in `managed` point into the box itself (shape, strides) or to its
// device memory; nothing reads them before the box is handed out, and the box moves between
// threads only whole.
unsafe impl Send for Exported {}
// SAFETY: as above; `&Exported` gives no access that mutates.
unsafe impl Sync for Exported {}

/// What one exported [`DeviceArray`] owns: the managed tensor handed out (first, so its
/// address is the box's), its shape and strides, and the memory.
#[repr(C)]
struct Exported {
    managed: DLManagedTensor,
    shape: [i64; 2],
    strides: [i64; 2],
    /// The upload's source, kept until the upload (queued on the legacy stream) is done.
    _staging: vmaf_hip::gpu::PinnedHostBuffer<u8>,
    _memory: vmaf_hip::gpu::DeviceBuffer<u8>,
}

unsafe extern "C" fn free_exported(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` is the first field of an `Exported` leaked by `DeviceArray::__dlpack__`, and
    // DLPack calls the deleter once.
    let exported = unsafe { Box::from_raw(m.cast::<Exported>()) };
    // With the GIL, as CuPy's and NumPy's deleters take it: the tests then catch a consumer
    // that waits for its workers while holding the GIL. (Without an interpreter left, the
    // closure simply drops.)
    let _ = Python::try_attach(move |_| drop(exported));
    TEST_ARRAYS_FREED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with the capsule; a capsule nobody consumed still has its name,
    // and then its tensor is ours to free; a consumed one was renamed and belongs to the
    // consumer. IsValid leaves no error set.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let m = pyo3::ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr());
            free_exported(m.cast());
        }
    }
}

/// A 2-D uint8/uint16 array copied to a GPU and exported once through DLPack as a (legacy)
/// `dltensor`: a device tensor producer for the tests where PyTorch is not installed. The copy
/// is queued on the legacy default stream and not waited for, as a producer's work would be.
#[pyclass(name = "_DeviceArray", module = "vmaf_hip._native")]
pub struct DeviceArray {
    exported: std::sync::Mutex<Option<Box<Exported>>>,
    device: (i32, i32),
}

#[pymethods]
impl DeviceArray {
    /// Copies the host array behind `capsule` (a NumPy `__dlpack__()`) to GPU `device`, rows
    /// `pitch` samples apart (default: the width) in memory that ends with the last row's
    /// samples, as a cropped view's storage may.
    #[new]
    #[pyo3(signature = (capsule, device=None, pitch=None))]
    fn new(
        capsule: &Bound<'_, PyAny>,
        device: Option<usize>,
        pitch: Option<usize>,
    ) -> PyResult<Self> {
        let t = Tensor::take(capsule)?;
        let shape = t.shape();
        let bytes = t
            .uint_bytes()
            .ok_or_else(|| PyValueError::new_err("uint8 or uint16 arrays only"))?;
        if shape.len() != 2 || shape.iter().any(|&n| n <= 0) {
            return Err(PyValueError::new_err("a non-empty 2-D array"));
        }
        let (h, w) = (shape[0] as usize, shape[1] as usize);
        let pitch = pitch.unwrap_or(w);
        if pitch < w {
            return Err(PyValueError::new_err("pitch below the width"));
        }
        // Padding a reader must skip: a value no sample of the test clips has.
        let n = (h - 1) * pitch + w;
        let mut host = vec![0xa5u8; n * bytes];
        if bytes == 1 {
            t.copy_2d(h, w, &mut host, pitch)?;
        } else {
            let mut v = vec![0xa5a5u16; n];
            t.copy_2d(h, w, &mut v, pitch)?;
            host = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        }
        let err = |e: vmaf_hip::Error| pyo3::exceptions::PyRuntimeError::new_err(e.to_string());
        let dev = test_device(device).map_err(err)?;
        let mut staging =
            vmaf_hip::gpu::PinnedHostBuffer::<u8>::new(&dev, host.len()).map_err(err)?;
        staging.as_mut_slice().map_err(err)?.copy_from_slice(&host);
        let mut memory = vmaf_hip::gpu::DeviceBuffer::<u8>::new(&dev, host.len()).map_err(err)?;
        let legacy = vmaf_hip::gpu::Stream::legacy(&dev);
        memory
            .upload_async(&legacy, &mut staging, host.len())
            .map_err(err)?;
        let info = dev.info();
        let dl_type = match info.vendor {
            vmaf_hip::gpu::Vendor::Nvidia => DL_CUDA,
            vmaf_hip::gpu::Vendor::Amd => DL_ROCM,
        };
        let device = (dl_type, info.vendor_ordinal);
        let data = memory.ptr().addr() as usize as *mut c_void;
        let exported = Box::new(Exported {
            managed: DLManagedTensor {
                dl_tensor: DLTensor {
                    data,
                    device: DLDevice {
                        device_type: device.0,
                        device_id: device.1,
                    },
                    ndim: 2,
                    dtype: DLDataType {
                        code: DL_UINT,
                        bits: (bytes * 8) as u8,
                        lanes: 1,
                    },
                    shape: std::ptr::null(),
                    strides: std::ptr::null(),
                    byte_offset: 0,
                },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(free_exported),
            },
            shape: [h as i64, w as i64],
            strides: [pitch as i64, 1],
            _staging: staging,
            _memory: memory,
        });
        Ok(DeviceArray {
            exported: std::sync::Mutex::new(Some(exported)),
            device,
        })
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        self.device
    }

    /// The DLPack capsule (once). `stream` and `max_version` are accepted and ignored: the
    /// copy is on the legacy stream already, and the capsule is a legacy one.
    #[pyo3(signature = (stream=None, max_version=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
    ) -> PyResult<Py<PyAny>> {
        let _ = (stream, max_version);
        let mut g = self.exported.lock().unwrap_or_else(|e| e.into_inner());
        let mut b = g
            .take()
            .ok_or_else(|| PyValueError::new_err("this test array was exported already"))?;
        b.managed.dl_tensor.shape = b.shape.as_ptr();
        b.managed.dl_tensor.strides = b.strides.as_ptr();
        let raw = Box::into_raw(b);
        // SAFETY: `raw` is a leaked `Exported` whose first field is the managed tensor (repr C);
        // the shape and strides it points to live in the same box. The capsule's destructor
        // frees it unless a consumer renamed the capsule and took ownership.
        unsafe {
            let cap = pyo3::ffi::PyCapsule_New(
                raw.cast::<c_void>(),
                LEGACY.as_ptr(),
                Some(capsule_destructor),
            );
            if cap.is_null() {
                free_exported(raw.cast());
                return Err(PyErr::fetch(py));
            }
            Ok(Bound::from_owned_ptr(py, cap).unbind())
        }
    }
}
