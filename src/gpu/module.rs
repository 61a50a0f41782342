//! Device code: a loaded [`Module`], its entry points ([`Kernel`]), their arguments
//! ([`KernelArg`]) and launch geometry ([`LaunchConfig`]).

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::device::{Api, Device};
use super::memory::DevicePtr;
use super::stream::Stream;
use super::sys;
use crate::error::{Error, Result};

/// Loaded device code (a CUBIN/fatbin on NVIDIA, an AMD code object or offload bundle).
pub struct Module {
    dev: Arc<Device>,
    raw: sys::RawModule,
}

// SAFETY: module handles may be used from any thread.
unsafe impl Send for Module {}
// SAFETY: as above; function lookup is thread-safe in both runtimes.
unsafe impl Sync for Module {}

impl Module {
    /// Loads a code image. The runtimes validate the image and fail cleanly on a foreign arch.
    pub fn load(dev: &Arc<Device>, image: &[u8]) -> Result<Arc<Module>> {
        if image.is_empty() {
            return Err(Error::inval("empty code image"));
        }
        // Embedded images are only byte-aligned; the loaders parse headers in place, so hand
        // them an 8-byte aligned copy.
        let mut aligned = vec![0u64; image.len().div_ceil(8)];
        // SAFETY: `aligned` has at least `image.len()` bytes and does not overlap `image`.
        unsafe {
            std::ptr::copy_nonoverlapping(image.as_ptr(), aligned.as_mut_ptr().cast(), image.len())
        };
        let mut raw: sys::RawModule = std::ptr::null_mut();
        let p = aligned.as_ptr().cast::<c_void>();
        dev.call_common("module load", |f| {
            // SAFETY: `image` is a whole code object the runtime parses (and copies) during the
            // call; the handle is unloaded in Drop.
            unsafe { (f.module_load_data)(&mut raw, p) }
        })?;
        Ok(Arc::new(Module {
            dev: dev.clone(),
            raw,
        }))
    }

    /// Looks up entry point `name`.
    pub fn kernel(self: &Arc<Self>, name: &str) -> Result<Kernel> {
        let cname = CString::new(name).map_err(|_| Error::inval("kernel name has NUL"))?;
        let mut raw: sys::RawFunction = std::ptr::null_mut();
        self.dev.call_common(&format!("get function {name}"), |f| {
            // SAFETY: the module is live and `cname` NUL-terminated.
            unsafe { (f.module_get_function)(&mut raw, self.raw, cname.as_ptr()) }
        })?;
        Ok(Kernel {
            module: self.clone(),
            raw,
            name: name.to_string(),
            dynamic_shared: AtomicU32::new(sys::CUDA_DEFAULT_DYNAMIC_SHARED),
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let raw = self.raw;
        self.dev.release("module unload", false, |api| {
            // SAFETY: unloading our own handle once; kernels hold an Arc so none are left.
            unsafe { (api.common().module_unload)(raw) }
        });
    }
}

/// A kernel argument: a value whose bytes the launch copies. Implemented for the scalar types of
/// our kernels and for device pointers.
///
/// # Safety
/// `arg_ptr` must point at `size_of::<Self>()` bytes laid out as the matching C parameter.
pub unsafe trait KernelArg {
    fn arg_ptr(&self) -> *mut c_void {
        (self as *const Self).cast_mut().cast()
    }
}
// SAFETY: the Rust and C layouts of these scalars are identical.
unsafe impl KernelArg for u32 {}
// SAFETY: as above.
unsafe impl KernelArg for i32 {}
// SAFETY: as above.
unsafe impl KernelArg for u64 {}
// SAFETY: as above.
unsafe impl KernelArg for i64 {}
// SAFETY: as above.
unsafe impl KernelArg for f32 {}
// SAFETY: as above.
unsafe impl KernelArg for f64 {}
// SAFETY: repr(transparent) over a 64-bit address, the layout of a device `T *` parameter.
unsafe impl<T> KernelArg for DevicePtr<T> {}

/// Launch geometry.
#[derive(Debug, Clone, Copy)]
pub struct LaunchConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_mem_bytes: u32,
}

/// An entry point of a loaded [`Module`].
pub struct Kernel {
    module: Arc<Module>,
    raw: sys::RawFunction,
    name: String,
    /// The dynamic shared memory launches may use so far (CUDA's default until a launcher
    /// asks for more).
    dynamic_shared: AtomicU32,
}

// SAFETY: function handles may be used from any thread.
unsafe impl Send for Kernel {}
// SAFETY: as above; launching is thread-safe in both runtimes.
unsafe impl Sync for Kernel {}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The module this entry point lives in.
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    /// Lets launches of this kernel use `bytes` of dynamic shared memory: CUDA requires a
    /// kernel to opt in above 48 KiB (up to the device's `block_shared`); AMD devices take up
    /// to their LDS size without one, and launchers stay within it there.
    pub fn allow_dynamic_shared(&self, bytes: u32) -> Result<()> {
        if bytes <= self.dynamic_shared.load(Ordering::Relaxed) {
            return Ok(());
        }
        let raw = self.raw;
        let name = &self.name;
        self.module
            .dev
            .call(&format!("allow shared memory {name}"), |api| match api {
                // SAFETY: sets an attribute of our own live function handle.
                Api::Cuda(c) => unsafe {
                    (c.fns.func_set_attribute)(
                        raw,
                        sys::CU_FUNC_ATTR_MAX_DYNAMIC_SHARED,
                        bytes as c_int,
                    )
                },
                Api::Hip(_) => 0,
            })?;
        self.dynamic_shared.fetch_max(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// The runtime's handle, for a graph node update.
    pub(super) fn raw(&self) -> sys::RawFunction {
        self.raw
    }

    /// Queues the kernel on `stream`.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in number, order and type, and every
    /// device pointer must cover all elements the kernel will touch for this geometry; memory
    /// the kernel writes must not be read by the host until the stream has passed this launch.
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: &[&dyn KernelArg],
    ) -> Result<()> {
        let mut ptrs = params(args);
        let (g, b) = (cfg.grid, cfg.block);
        let params = ptrs.as_mut_ptr();
        let name = &self.name;
        self.module.dev.call_common(&format!("launch {name}"), |f| {
            // SAFETY: the argument pointers live until the call returns (the runtime copies
            // the values at launch); the caller guarantees they match the kernel.
            unsafe {
                (f.launch_kernel)(
                    self.raw,
                    g.0,
                    g.1,
                    g.2,
                    b.0,
                    b.1,
                    b.2,
                    cfg.shared_mem_bytes,
                    stream.raw,
                    params,
                    std::ptr::null_mut(),
                )
            }
        })
    }
}

/// The runtimes' `kernelParams` for `args`: a pointer to each value, then a NULL (the runtimes
/// read only as many entries as the kernel declares, and the test double, tests/fakehip, counts
/// up to it). Valid while `args` is.
pub(super) fn params(args: &[&dyn KernelArg]) -> Vec<*mut c_void> {
    args.iter()
        .map(|a| a.arg_ptr())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect()
}
