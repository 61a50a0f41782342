//! Typed, bounds-checked launchers for the kernels in kernels/*.hip, one module per source file.
//! The raw launch is unsafe (the device trusts its arguments); each launcher checks every access
//! the kernel will make against the buffers it is given, so callers outside src/gpu stay in
//! safe Rust. Each launcher module sits in its feature's folder (`feature/<f>/launch.rs`).

#[path = "../../feature/adm/launch.rs"]
mod adm;
#[path = "../../feature/cambi/launch.rs"]
mod cambi;
#[path = "../../feature/ssim/launch.rs"]
mod float_ssim;
#[path = "../../feature/motion/launch.rs"]
mod motion;
#[path = "../../feature/psnr/launch.rs"]
mod psnr;
#[path = "../../feature/vif/launch.rs"]
mod vif;

pub use adm::{adm_bands_len, adm_cm, adm_dwt0, adm_dwt123, AdmBuffers, AdmScale, ADM_LUT_LEN};
pub use cambi::{
    cambi_cvalues, cambi_decimate, cambi_mask, cambi_mode, cambi_preprocess, cambi_stats,
    CambiCValues, CAMBI_MAX_DIFFS, CAMBI_MAX_PAD, CAMBI_STATS_LEN,
};
pub use float_ssim::{
    ssim_decimate, ssim_hconv, ssim_hconv_plane, ssim_rows, ssim_to_float, DeviceImage, SsimSample,
};
pub use motion::{motion_reduce, motion_rows};
pub use psnr::psnr_sse;
pub use vif::{vif_down, vif_stats, VIF_LOG2_WORDS};

use super::memory::{DeviceBuffer, DeviceCopy, DevicePtr};
use super::module::{Kernel, KernelArg, LaunchConfig};
use super::stream::Stream;
use crate::error::{Error, Result};

#[cfg(test)]
mod signature;

/// A kernel parameter's C type, spelled as the signature test normalises kernels/*.hip: `i32`,
/// `u32`, `i64`, `u64`, `f32`, `f64` (also `u8`, `i8`, `u16`, `i16` as pointees), and `*`
/// before the pointee for a device pointer (`const` is not kept: it does not change the ABI).
pub trait ParamType {
    fn c_type() -> String;
}

macro_rules! param_type {
    ($($t:ty),*) => {
        $(
            impl ParamType for $t {
                fn c_type() -> String {
                    stringify!($t).into()
                }
            }
        )*
    };
}
param_type!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

impl<T: ParamType> ParamType for DevicePtr<T> {
    fn c_type() -> String {
        format!("*{}", T::c_type())
    }
}

/// A kernel's whole argument list as one tuple type: each launcher module names the tuple of
/// every kernel it launches (`type ...Args = (...)`), builds exactly that tuple at the launch,
/// and lists the kernel names with those types in its `signatures()`, which the signature test
/// compares with the `VMAF_KERNEL` declarations in kernels/*.hip.
pub(crate) trait KernelArgs {
    /// The C parameter types, in order.
    fn c_types() -> Vec<String>;
    /// The values, in order, as the raw launch takes them.
    fn refs(&self) -> Vec<&dyn KernelArg>;
}

macro_rules! kernel_args {
    ($($a:ident $i:tt),+) => {
        impl<$($a: KernelArg + ParamType),+> KernelArgs for ($($a,)+) {
            fn c_types() -> Vec<String> {
                vec![$($a::c_type()),+]
            }
            fn refs(&self) -> Vec<&dyn KernelArg> {
                vec![$(&self.$i),+]
            }
        }
    };
}

/// Implements [`KernelArgs`] for every tuple length from the first pair's up to the last's.
macro_rules! kernel_args_upto {
    ($($a:ident $i:tt),+ ;) => { kernel_args!($($a $i),+); };
    ($($a:ident $i:tt),+ ; $b:ident $j:tt $(, $rb:ident $rj:tt)*) => {
        kernel_args!($($a $i),+);
        kernel_args_upto!($($a $i),+, $b $j ; $($rb $rj),*);
    };
}
kernel_args_upto!(A0 0; A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7, A8 8, A9 9, A10 10, A11 11,
    A12 12, A13 13, A14 14, A15 15, A16 16, A17 17, A18 18, A19 19, A20 20, A21 21, A22 22,
    A23 23);

/// A kernel's name and C parameter types, in order.
pub(crate) type Signature = (&'static str, Vec<String>);

/// `name` with the parameter types of the argument tuple `A`.
fn sig<A: KernelArgs>(name: &'static str) -> Signature {
    (name, A::c_types())
}

/// A launcher module's list of the kernels it launches.
type Signatures = fn() -> Vec<Signature>;

/// Per kernels/*.hip file (by stem), the signatures its launcher module declares.
pub(crate) const MODULES: &[(&str, Signatures)] = &[
    ("adm", adm::signatures),
    ("cambi", cambi::signatures),
    ("float_ssim", float_ssim::signatures),
    ("motion", motion::signatures),
    ("psnr", psnr::signatures),
    ("vif", vif::signatures),
];

/// The declared parameter types of kernel `name`, if a launcher module declares it.
fn declared(name: &str) -> Option<Vec<String>> {
    MODULES
        .iter()
        .flat_map(|(_, sigs)| sigs())
        .find(|(n, _)| *n == name)
        .map(|(_, types)| types)
}

/// Queues `kernel` with the argument tuple `args`; in debug builds, first asserts that `A` is
/// the signature declared for the kernel's name.
///
/// # Safety
/// As [`Kernel::launch`]: `A` must be the kernel's parameter list (the signature test checks
/// the declared tuple types against kernels/*.hip), every device pointer must cover all elements
/// the kernel touches for this geometry, and the host must not read memory the kernel writes
/// until the stream has passed this launch.
unsafe fn launch<A: KernelArgs>(
    kernel: &Kernel,
    stream: &Stream,
    cfg: LaunchConfig,
    args: &A,
) -> Result<()> {
    debug_assert_eq!(
        declared(kernel.name()),
        Some(A::c_types()),
        "arguments of {}",
        kernel.name()
    );
    // SAFETY: guaranteed by the caller.
    unsafe { kernel.launch(stream, cfg, &args.refs()) }
}

/// Sample types the kernels read (8-bit and 9..16-bit pictures).
pub trait Sample: DeviceCopy + ParamType {
    /// Entry point of the PSNR kernel for this sample size.
    const PSNR_SSE_KERNEL: &'static str;
    /// VIF statistics of one scale.
    const VIF_STATS_KERNEL: &'static str;
    /// VIF low-pass and decimation.
    const VIF_DOWN_KERNEL: &'static str;
    /// Motion per-row SAD of the blurred difference.
    const MOTION_ROWS_KERNEL: &'static str;
    /// ADM scale-0 wavelet level (plus decoupling/CSF maps).
    const ADM_DWT0_KERNEL: &'static str;
}

impl Sample for u8 {
    const PSNR_SSE_KERNEL: &'static str = "vmaf_psnr_sse_u8";
    const VIF_STATS_KERNEL: &'static str = "vmaf_vif_stats_u8";
    const VIF_DOWN_KERNEL: &'static str = "vmaf_vif_down_u8";
    const MOTION_ROWS_KERNEL: &'static str = "vmaf_motion_rows_u8";
    const ADM_DWT0_KERNEL: &'static str = "vmaf_adm_dwt0_u8";
}

impl Sample for u16 {
    const PSNR_SSE_KERNEL: &'static str = "vmaf_psnr_sse_u16";
    const VIF_STATS_KERNEL: &'static str = "vmaf_vif_stats_u16";
    const VIF_DOWN_KERNEL: &'static str = "vmaf_vif_down_u16";
    const MOTION_ROWS_KERNEL: &'static str = "vmaf_motion_rows_u16";
    const ADM_DWT0_KERNEL: &'static str = "vmaf_adm_dwt0_u16";
}

/// A `w`x`h` plane stored at element `offset` of a device buffer with rows `stride` elements
/// apart.
#[derive(Debug, Clone, Copy)]
pub struct DevicePlane<'a, T: DeviceCopy> {
    pub buf: &'a DeviceBuffer<T>,
    pub offset: usize,
    pub w: usize,
    pub h: usize,
    pub stride: usize,
}

impl<T: DeviceCopy> DevicePlane<'_, T> {
    /// The plane's first element, after checking that every row lies inside the buffer and
    /// the geometry fits the kernels' 32-bit parameters.
    fn checked_ptr(&self) -> Result<DevicePtr<T>> {
        let too_big = || Error::inval("plane geometry exceeds its GPU buffer");
        if self.w == 0 || self.h == 0 || self.stride < self.w {
            return Err(Error::inval(format!(
                "bad plane geometry {}x{} stride {}",
                self.w, self.h, self.stride
            )));
        }
        let end = (self.h - 1)
            .checked_mul(self.stride)
            .and_then(|v| v.checked_add(self.w))
            .and_then(|v| v.checked_add(self.offset))
            .ok_or_else(too_big)?;
        if end > self.buf.len() || u32::try_from(self.stride).is_err() {
            return Err(too_big());
        }
        Ok(self.buf.ptr().offset(self.offset))
    }
}

impl<T> DevicePtr<T> {
    /// The address `n` elements further (callers check the bounds).
    pub(crate) fn offset(self, n: usize) -> DevicePtr<T> {
        let bytes = (n as u64).wrapping_mul(std::mem::size_of::<T>() as u64);
        DevicePtr::from_addr(self.addr().wrapping_add(bytes))
    }
}

/// Threads per block for the row kernels: a multiple of every warp size (32 or 64).
const ROW_BLOCK: u32 = 256;
/// Row-block count cap: enough blocks to fill a large GPU, few enough atomics per plane.
pub(crate) const MAX_ROW_BLOCKS: u32 = 512;

fn dims_u32(w: usize, h: usize) -> Result<(u32, u32)> {
    let w = u32::try_from(w).map_err(|_| Error::inval("plane too wide"))?;
    let h = u32::try_from(h).map_err(|_| Error::inval("plane too tall"))?;
    if w > i32::MAX as u32 || h > i32::MAX as u32 {
        return Err(Error::inval("plane too large"));
    }
    Ok((w, h))
}
