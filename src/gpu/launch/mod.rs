//! The typed, bounds-checked launch core that every feature's launchers (`feature/<f>/launch.rs`,
//! one module per kernels/*.hip file) are written against.
//!
//! A launcher builds a [`Launch`]: the kernel, its geometry and its argument tuple, whose device
//! pointers are [`Span`]s, ranges checked to lie inside live device buffers and borrowed for as
//! long as the launch is. Each launcher passes spans that cover everything its kernel touches for
//! the scalars it passes, and declares its kernels' tuple types, which [`signature`] checks
//! against the `VMAF_KERNEL` declarations in kernels/*.hip. The raw launch, which trusts those
//! two things, stays here, so callers outside src/gpu stay in safe Rust. A [`Launch`] is data:
//! it is queued on a stream, or handed to a [`super::graph::Replay`] as a frame's head, which
//! queues it, records it or updates a recorded node with it.

use std::marker::PhantomData;
use std::sync::Arc;

use super::memory::{DeviceBuffer, DeviceCopy, DevicePtr};
use super::module::{Kernel, KernelArg, LaunchConfig};
use super::stream::Stream;
use super::GpuState;
use crate::error::{Error, Result};

pub(crate) mod signature;

/// A kernel parameter's C type, spelled as [`signature`] normalises kernels/*.hip: `i32`,
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

/// A range of a device buffer a kernel may access through one pointer parameter: made only by
/// checking the range against the buffer, which it borrows. Passed as the range's first element
/// (NULL for [`Span::null`]).
#[repr(transparent)]
pub(crate) struct Span<'a, T> {
    ptr: DevicePtr<T>,
    _buf: PhantomData<&'a [T]>,
}

impl<T: Copy> Clone for Span<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Copy> Copy for Span<'_, T> {}

impl<'a, T: DeviceCopy> Span<'a, T> {
    /// Elements `offset..offset + len` of `buf`.
    pub(crate) fn of(buf: &'a DeviceBuffer<T>, offset: usize, len: usize) -> Result<Self> {
        if offset.checked_add(len).is_none_or(|end| end > buf.len()) {
            return Err(Error::inval(format!(
                "GPU range {offset}+{len} outside a buffer of {}",
                buf.len()
            )));
        }
        Ok(Span {
            ptr: buf.ptr().offset(offset),
            _buf: PhantomData,
        })
    }
}

impl<T> Span<'static, T> {
    /// A NULL pointer, for parameters the kernel only reads when they are set.
    pub(crate) fn null() -> Self {
        Span {
            ptr: DevicePtr::from_addr(0),
            _buf: PhantomData,
        }
    }
}

// SAFETY: repr(transparent) over a `DevicePtr`, the layout of a device `T *` parameter.
unsafe impl<T> KernelArg for Span<'_, T> {}

impl<T: ParamType> ParamType for Span<'_, T> {
    fn c_type() -> String {
        format!("*{}", T::c_type())
    }
}

/// A kernel's whole argument list as one tuple of scalars and [`Span`]s: each launcher module
/// names the tuple of every kernel it launches (`type ...Args<'a> = (...)`), builds exactly that
/// tuple at the launch, and lists the kernel names with those types in its `signatures()`.
pub(crate) trait KernelArgs {
    /// The C parameter types, in order.
    fn c_types() -> Vec<String>
    where
        Self: Sized;
    /// The values, in order, as the raw launch takes them.
    fn refs(&self) -> Vec<&dyn KernelArg>;
}

/// What may stand in a kernel's argument tuple: the scalars and [`Span`]s, never a bare
/// [`DevicePtr`] (an address nothing checked).
pub(crate) trait Arg: KernelArg + ParamType {}
impl Arg for u32 {}
impl Arg for i32 {}
impl Arg for u64 {}
impl Arg for i64 {}
impl Arg for f32 {}
impl Arg for f64 {}
impl<T: ParamType> Arg for Span<'_, T> {}

macro_rules! kernel_args {
    ($($a:ident $i:tt),+) => {
        impl<$($a: Arg),+> KernelArgs for ($($a,)+) {
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
#[cfg(test)]
pub(crate) type Signature = (&'static str, Vec<String>);

/// `name` with the parameter types of the argument tuple `A`.
#[cfg(test)]
pub(crate) fn sig<A: KernelArgs>(name: &'static str) -> Signature {
    (name, A::c_types())
}

/// A launcher module's list of the kernels it launches.
#[cfg(test)]
pub(crate) type Signatures = fn() -> Vec<Signature>;

/// One kernel launch, ready to queue: the kernel, its geometry and its checked arguments,
/// borrowing the buffers they point into.
pub(crate) struct Launch<'a> {
    kernel: Arc<Kernel>,
    cfg: LaunchConfig,
    args: Box<dyn KernelArgs + 'a>,
}

impl<'a> Launch<'a> {
    /// Entry point `name` of kernels/`file`.hip (loaded on first use) with `args`; debug builds
    /// first check `A` against the kernel's declaration in its source.
    pub(crate) fn new<A: KernelArgs + 'a>(
        state: &GpuState,
        file: &'static str,
        name: &'static str,
        cfg: LaunchConfig,
        args: A,
    ) -> Result<Launch<'a>> {
        if cfg!(debug_assertions) {
            assert_eq!(
                signature::declared(file, name),
                Some(A::c_types()),
                "arguments of {name}"
            );
        }
        let kernel = state.kernel(file, name)?;
        if cfg.shared_mem_bytes > 0 {
            kernel.allow_dynamic_shared(cfg.shared_mem_bytes)?;
        }
        Ok(Launch {
            kernel,
            cfg,
            args: Box::new(args),
        })
    }

    /// Queues the launch on `stream`.
    pub(crate) fn queue(&self, stream: &Stream) -> Result<()> {
        // SAFETY: the argument tuple is one a launcher module declares for this kernel (checked
        // against kernels/*.hip by the signature test, and at `new` in debug builds); its
        // pointers are spans checked to lie inside device buffers borrowed for 'a (freeing device
        // memory waits for the device, so the buffers outlive the kernel), and the launcher sized
        // them to cover every element the kernel touches for these scalars (its contract, stated
        // beside each launcher and run by the kernel-model tests). Kernels write only device
        // memory, which the host reads only through stream-ordered copies.
        unsafe { self.kernel.launch(stream, self.cfg, &self.args.refs()) }
    }

    /// The kernel, geometry and argument values, for a graph to record or update a node with
    /// (the same contract as [`Self::queue`]).
    pub(super) fn parts(&self) -> (&Kernel, &LaunchConfig, Vec<&dyn KernelArg>) {
        (&self.kernel, &self.cfg, self.args.refs())
    }
}

/// Sample types the kernels read (8-bit and 9..16-bit pictures).
pub trait Sample: DeviceCopy + ParamType {
    /// Of a kernel's 8-bit and 16-bit entry points, the one for this sample type.
    fn pick(u8_entry: &'static str, u16_entry: &'static str) -> &'static str;
}

impl Sample for u8 {
    fn pick(u8_entry: &'static str, _: &'static str) -> &'static str {
        u8_entry
    }
}

impl Sample for u16 {
    fn pick(_: &'static str, u16_entry: &'static str) -> &'static str {
        u16_entry
    }
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

impl<'a, T: DeviceCopy> DevicePlane<'a, T> {
    /// The plane's rows as a span, after checking that every row lies inside the buffer and
    /// the geometry fits the kernels' 32-bit parameters.
    pub(crate) fn span(&self) -> Result<Span<'a, T>> {
        let too_big = || Error::inval("plane geometry exceeds its GPU buffer");
        if self.w == 0 || self.h == 0 || self.stride < self.w {
            return Err(Error::inval(format!(
                "bad plane geometry {}x{} stride {}",
                self.w, self.h, self.stride
            )));
        }
        let len = (self.h - 1)
            .checked_mul(self.stride)
            .and_then(|v| v.checked_add(self.w))
            .ok_or_else(too_big)?;
        if u32::try_from(self.stride).is_err() {
            return Err(too_big());
        }
        Span::of(self.buf, self.offset, len).map_err(|_| too_big())
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
pub(crate) const ROW_BLOCK: u32 = 256;
/// Row-block count cap: enough blocks to fill a large GPU, few enough atomics per plane.
pub(crate) const MAX_ROW_BLOCKS: u32 = 512;

/// A plane's size as kernel dimensions: both at most `i32::MAX`.
pub(crate) fn dims_u32(w: usize, h: usize) -> Result<(u32, u32)> {
    let w = u32::try_from(w).map_err(|_| Error::inval("plane too wide"))?;
    let h = u32::try_from(h).map_err(|_| Error::inval("plane too tall"))?;
    if w > i32::MAX as u32 || h > i32::MAX as u32 {
        return Err(Error::inval("plane too large"));
    }
    Ok((w, h))
}
