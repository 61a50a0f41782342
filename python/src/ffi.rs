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

    /// Address of the first element (data plus byte offset).
    pub fn address(&self) -> u64 {
        let t = self.raw();
        (t.data as u64).wrapping_add(t.byte_offset)
    }

    /// Copies the `h`x`w` 2-D tensor (checked by the caller: shape `[h', w']` with `h' >= h`,
    /// `w' >= w`, host memory, `T`'s size) row by row into `dst`, rows `pitch` apart.
    /// Returns the largest sample seen.
    pub fn copy_2d<T: Copy + Into<u32>>(
        &self,
        h: usize,
        w: usize,
        dst: &mut [T],
        pitch: usize,
    ) -> PyResult<u32> {
        let shape = self.shape();
        let strides = self.strides();
        let host = matches!(self.device().0, DL_CPU | DL_CUDA_HOST | DL_ROCM_HOST);
        let ok = host
            && shape.len() == 2
            && shape[0] >= h as i64
            && shape[1] >= w as i64
            && self.uint_bytes() == Some(std::mem::size_of::<T>())
            && dst.len() >= pitch.saturating_mul(h)
            && pitch >= w
            && (self.address() as usize).is_multiple_of(std::mem::align_of::<T>());
        if !ok {
            return Err(PyValueError::new_err("tensor does not fit the plane"));
        }
        let (rs, cs) = (strides[0] as isize, strides[1] as isize);
        let base = self.address() as usize as *const T;
        let mut max = 0u32;
        for y in 0..h {
            let out = &mut dst[y * pitch..y * pitch + w];
            // SAFETY: DLPack: element (y, x) of a host tensor lies at `base + y*rs + x*cs`
            // (elements) for y < shape[0], x < shape[1], readable while the tensor lives; the
            // checks above keep y and x inside the shape and the address aligned for `T`.
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
/// use. The caller checked that plane `i` is dense (rows `plane_dims` wide, back to back), of
/// its plane's size, at `addrs[i]`, on `device`.
pub fn wrap_dense_planes(
    device: &std::sync::Arc<vmaf_hip::gpu::Device>,
    (pix_fmt, bpc, w, h): (vmaf_hip::picture::PixelFormat, u32, usize, usize),
    addrs: &[u64],
    planes: Vec<Tensor>,
) -> vmaf_hip::Result<vmaf_hip::picture::PictureData> {
    // SAFETY: per the caller's checks each address holds its plane densely on `device`; the
    // tensors move in as the owner, so the memory stays until the library lets the picture go;
    // the producer ordered its writes before ours on the legacy default stream (the Python
    // side asks `__dlpack__(stream=1)` on CUDA, 0 on ROCm) and does not write a tensor it
    // handed over.
    unsafe {
        vmaf_hip::gpu::frames::wrap_device_picture(
            device,
            pix_fmt,
            bpc,
            w,
            h,
            addrs,
            Box::new(planes),
        )
    }
}
