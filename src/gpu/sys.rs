//! Raw runtime bindings: our own minimal C types and one function-pointer table per vendor
//! library, resolved with `libloading` at first use (no SDK headers or link-time dependency).
//!
//! Each table is all-or-nothing: a library missing any symbol is closed and the next candidate is
//! tried, so a later call can never hit a NULL pointer. Loading (plus `hipInit`/`cuInit`) runs
//! once per process; the outcome, success or the reason for failure, is kept in a `OnceLock`.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::path::PathBuf;
use std::sync::OnceLock;

use libloading::Library;

/// Which runtime a device is driven through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vendor {
    /// ROCm's HIP runtime (libamdhip64).
    Amd,
    /// The NVIDIA driver API (libcuda.so.1).
    Nvidia,
}

impl Vendor {
    /// Lower-case name, as `VMAF_HIP_VENDOR` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Amd => "amd",
            Vendor::Nvidia => "nvidia",
        }
    }
}

/// `hipError_t` / `CUresult`: 0 is success on both.
pub type Status = c_int;
/// `CUdevice` / `hipDevice_t`: an ordinal.
pub type RawDevice = c_int;
/// `CUcontext` (unused on AMD).
pub type RawContext = *mut c_void;
/// `CUstream` / `hipStream_t`.
pub type RawStream = *mut c_void;
/// `CUevent` / `hipEvent_t`.
pub type RawEvent = *mut c_void;
/// `CUmodule` / `hipModule_t`.
pub type RawModule = *mut c_void;
/// `CUfunction` / `hipFunction_t`.
pub type RawFunction = *mut c_void;
/// `CUdeviceptr` (an integer) / `hipDeviceptr_t` (a pointer); both 64 bits wide on our targets.
pub type RawDevPtr = u64;
/// `nvrtcProgram` / `hiprtcProgram`.
pub type RawProgram = *mut c_void;
/// `CUgraph` / `hipGraph_t`.
pub type RawGraph = *mut c_void;
/// `CUgraphExec` / `hipGraphExec_t`.
pub type RawGraphExec = *mut c_void;
/// `CUgraphNode` / `hipGraphNode_t`.
pub type RawGraphNode = *mut c_void;

// Values shared by both vendors' headers.
pub const STREAM_NON_BLOCKING: c_uint = 1;
/// `hipHostRegisterPortable` / `CU_MEMHOSTREGISTER_PORTABLE`: page-locked for every context.
pub const HOST_REGISTER_PORTABLE: c_uint = 1;

pub const EVENT_DISABLE_TIMING: c_uint = 2;
/// `CU_EVENT_BLOCKING_SYNC` / `hipEventBlockingSync`: a host wait on the event sleeps instead
/// of spinning.
pub const EVENT_BLOCKING_SYNC: c_uint = 1;
/// `CU_STREAM_CAPTURE_MODE_THREAD_LOCAL` / `hipStreamCaptureModeThreadLocal`: a capture fails
/// if its own thread makes a call that cannot be captured; other threads are not affected.
pub const CAPTURE_MODE_THREAD_LOCAL: c_int = 1;
/// `CU_GRAPH_NODE_TYPE_KERNEL` (HIP's `hipGraphNodeTypeKernel` is 1 before HIP 6.0, 0 after).
pub const GRAPH_NODE_KERNEL_CUDA: c_int = 0;
// CUresult / hipError_t values we treat specially.
pub const ERR_OUT_OF_MEMORY_CUDA: Status = 2;
pub const ERR_OUT_OF_MEMORY_HIP: Status = 2;
pub const ERR_NO_DEVICE: Status = 100;
pub const ERR_INSUFFICIENT_DRIVER: Status = 35;
// CUdevice_attribute values.
pub const CU_ATTR_COMPUTE_MODE: c_int = 20;
pub const CU_ATTR_CC_MAJOR: c_int = 75;
pub const CU_ATTR_CC_MINOR: c_int = 76;
/// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`.
pub const CU_ATTR_SHARED_PER_BLOCK_OPTIN: c_int = 97;
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub const CU_FUNC_ATTR_MAX_DYNAMIC_SHARED: c_int = 8;
/// Dynamic shared memory a CUDA block may use without opting in.
pub const CUDA_DEFAULT_DYNAMIC_SHARED: u32 = 48 << 10;
/// Shared memory (LDS) an AMD workgroup may use: 64 KiB on every GPU HIP supports.
pub const HIP_SHARED_PER_BLOCK: usize = 64 << 10;
pub const CU_COMPUTEMODE_PROHIBITED: c_int = 2;
/// Oldest CUDA driver we accept: 11.0 introduced `cuDevicePrimaryCtxRelease_v2`.
pub const CUDA_MIN_DRIVER: c_int = 11000;
/// Oldest HIP runtime we accept (5.0, encoded major * 10^7 + minor * 10^5 + patch).
pub const HIP_MIN_VERSION: c_int = 50_000_000;

/// Declares a table struct with one typed function pointer per symbol and its all-or-nothing
/// loader.
macro_rules! fn_table {
    ($(#[$meta:meta])* $table:ident {
        $( $field:ident = $sym:literal : fn($($arg:ty),* $(,)?) $(-> $ret:ty)? ; )*
    }) => {
        $(#[$meta])*
        pub struct $table {
            _lib: Library,
            $( pub $field: unsafe extern "C" fn($($arg),*) $(-> $ret)?, )*
        }

        impl $table {
            /// Resolves every symbol from `lib`, or names the first one missing.
            fn resolve(lib: Library) -> Result<Self, String> {
                $(
                    // SAFETY: the pointer type is the C prototype of the vendor's public header for
                    // this symbol (written out by hand above); `lib` stays alive in the table, so
                    // the copied pointer never dangles.
                    let $field = unsafe {
                        *lib.get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(
                            concat!($sym, "\0").as_bytes(),
                        )
                        .map_err(|_| format!("symbol {} not found", $sym))?
                    };
                )*
                Ok($table { _lib: lib, $($field,)* })
            }
        }
    };
}

fn_table! {
    /// The HIP runtime subset we use.
    HipFns {
        init = "hipInit": fn(c_uint) -> Status;
        driver_get_version = "hipDriverGetVersion": fn(*mut c_int) -> Status;
        get_device_count = "hipGetDeviceCount": fn(*mut c_int) -> Status;
        set_device = "hipSetDevice": fn(c_int) -> Status;
        device_get_name = "hipDeviceGetName": fn(*mut c_char, c_int, RawDevice) -> Status;
        device_total_mem = "hipDeviceTotalMem": fn(*mut usize, RawDevice) -> Status;
        device_synchronize = "hipDeviceSynchronize": fn() -> Status;
        get_error_string = "hipGetErrorString": fn(Status) -> *const c_char;
        malloc = "hipMalloc": fn(*mut *mut c_void, usize) -> Status;
        free = "hipFree": fn(*mut c_void) -> Status;
        host_malloc = "hipHostMalloc": fn(*mut *mut c_void, usize, c_uint) -> Status;
        host_free = "hipHostFree": fn(*mut c_void) -> Status;
        host_register = "hipHostRegister": fn(*mut c_void, usize, c_uint) -> Status;
        host_unregister = "hipHostUnregister": fn(*mut c_void) -> Status;
        memcpy_htod_async = "hipMemcpyHtoDAsync":
            fn(*mut c_void, *const c_void, usize, RawStream) -> Status;
        memcpy_dtoh_async = "hipMemcpyDtoHAsync":
            fn(*mut c_void, *mut c_void, usize, RawStream) -> Status;
        memcpy_dtod_async = "hipMemcpyDtoDAsync":
            fn(*mut c_void, *mut c_void, usize, RawStream) -> Status;
        memset_d8_async = "hipMemsetD8Async": fn(*mut c_void, u8, usize, RawStream) -> Status;
        mem_get_address_range = "hipMemGetAddressRange":
            fn(*mut *mut c_void, *mut usize, *mut c_void) -> Status;
        stream_create = "hipStreamCreateWithFlags": fn(*mut RawStream, c_uint) -> Status;
        stream_destroy = "hipStreamDestroy": fn(RawStream) -> Status;
        stream_synchronize = "hipStreamSynchronize": fn(RawStream) -> Status;
        stream_wait_event = "hipStreamWaitEvent": fn(RawStream, RawEvent, c_uint) -> Status;
        event_create = "hipEventCreateWithFlags": fn(*mut RawEvent, c_uint) -> Status;
        event_destroy = "hipEventDestroy": fn(RawEvent) -> Status;
        event_record = "hipEventRecord": fn(RawEvent, RawStream) -> Status;
        event_synchronize = "hipEventSynchronize": fn(RawEvent) -> Status;
        module_load_data = "hipModuleLoadData": fn(*mut RawModule, *const c_void) -> Status;
        module_get_function = "hipModuleGetFunction":
            fn(*mut RawFunction, RawModule, *const c_char) -> Status;
        module_unload = "hipModuleUnload": fn(RawModule) -> Status;
        module_launch_kernel = "hipModuleLaunchKernel": fn(
            RawFunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, RawStream,
            *mut *mut c_void, *mut *mut c_void,
        ) -> Status;
    }
}

fn_table! {
    /// The CUDA driver API subset we use (versioned `_v2` names as libcuda exports them).
    CudaFns {
        init = "cuInit": fn(c_uint) -> Status;
        driver_get_version = "cuDriverGetVersion": fn(*mut c_int) -> Status;
        device_get_count = "cuDeviceGetCount": fn(*mut c_int) -> Status;
        device_get = "cuDeviceGet": fn(*mut RawDevice, c_int) -> Status;
        device_get_name = "cuDeviceGetName": fn(*mut c_char, c_int, RawDevice) -> Status;
        device_get_attribute = "cuDeviceGetAttribute": fn(*mut c_int, c_int, RawDevice) -> Status;
        device_total_mem = "cuDeviceTotalMem_v2": fn(*mut usize, RawDevice) -> Status;
        primary_ctx_retain = "cuDevicePrimaryCtxRetain": fn(*mut RawContext, RawDevice) -> Status;
        primary_ctx_release = "cuDevicePrimaryCtxRelease_v2": fn(RawDevice) -> Status;
        ctx_set_current = "cuCtxSetCurrent": fn(RawContext) -> Status;
        ctx_get_current = "cuCtxGetCurrent": fn(*mut RawContext) -> Status;
        ctx_get_device = "cuCtxGetDevice": fn(*mut RawDevice) -> Status;
        ctx_synchronize = "cuCtxSynchronize": fn() -> Status;
        get_error_string = "cuGetErrorString": fn(Status, *mut *const c_char) -> Status;
        mem_alloc = "cuMemAlloc_v2": fn(*mut RawDevPtr, usize) -> Status;
        mem_free = "cuMemFree_v2": fn(RawDevPtr) -> Status;
        mem_host_alloc = "cuMemHostAlloc": fn(*mut *mut c_void, usize, c_uint) -> Status;
        mem_free_host = "cuMemFreeHost": fn(*mut c_void) -> Status;
        mem_host_register = "cuMemHostRegister_v2": fn(*mut c_void, usize, c_uint) -> Status;
        mem_host_unregister = "cuMemHostUnregister": fn(*mut c_void) -> Status;
        memcpy_htod_async = "cuMemcpyHtoDAsync_v2":
            fn(RawDevPtr, *const c_void, usize, RawStream) -> Status;
        memcpy_dtoh_async = "cuMemcpyDtoHAsync_v2":
            fn(*mut c_void, RawDevPtr, usize, RawStream) -> Status;
        memcpy_dtod_async = "cuMemcpyDtoDAsync_v2":
            fn(RawDevPtr, RawDevPtr, usize, RawStream) -> Status;
        memset_d8_async = "cuMemsetD8Async": fn(RawDevPtr, u8, usize, RawStream) -> Status;
        mem_get_address_range = "cuMemGetAddressRange_v2":
            fn(*mut RawDevPtr, *mut usize, RawDevPtr) -> Status;
        pointer_get_attributes = "cuPointerGetAttributes":
            fn(c_uint, *mut c_int, *mut *mut c_void, RawDevPtr) -> Status;
        stream_create = "cuStreamCreate": fn(*mut RawStream, c_uint) -> Status;
        stream_destroy = "cuStreamDestroy_v2": fn(RawStream) -> Status;
        stream_synchronize = "cuStreamSynchronize": fn(RawStream) -> Status;
        stream_wait_event = "cuStreamWaitEvent": fn(RawStream, RawEvent, c_uint) -> Status;
        event_create = "cuEventCreate": fn(*mut RawEvent, c_uint) -> Status;
        event_destroy = "cuEventDestroy_v2": fn(RawEvent) -> Status;
        event_record = "cuEventRecord": fn(RawEvent, RawStream) -> Status;
        event_synchronize = "cuEventSynchronize": fn(RawEvent) -> Status;
        module_load_data = "cuModuleLoadData": fn(*mut RawModule, *const c_void) -> Status;
        module_get_function = "cuModuleGetFunction":
            fn(*mut RawFunction, RawModule, *const c_char) -> Status;
        module_unload = "cuModuleUnload": fn(RawModule) -> Status;
        func_set_attribute = "cuFuncSetAttribute": fn(RawFunction, c_int, c_int) -> Status;
        launch_kernel = "cuLaunchKernel": fn(
            RawFunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, RawStream,
            *mut *mut c_void, *mut *mut c_void,
        ) -> Status;
    }
}

/// The calls whose C prototypes are identical in both runtimes (one operation under its HIP and
/// its CUDA name), copied once out of the vendor's table when it loads, so callers make them
/// without a per-vendor `match`. Calls whose prototypes differ (device pointers are `void *` in
/// HIP and an integer `CUdeviceptr` in CUDA: alloc, free, copies, memset) stay in the tables.
#[derive(Clone, Copy)]
pub struct CommonFns {
    /// `hipDeviceSynchronize` / `cuCtxSynchronize` (the bound device / primary context).
    pub synchronize: unsafe extern "C" fn() -> Status,
    /// `hipHostMalloc` / `cuMemHostAlloc`.
    pub host_alloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> Status,
    /// `hipHostFree` / `cuMemFreeHost`.
    pub host_free: unsafe extern "C" fn(*mut c_void) -> Status,
    /// `hipHostRegister` / `cuMemHostRegister_v2`.
    pub host_register: unsafe extern "C" fn(*mut c_void, usize, c_uint) -> Status,
    /// `hipHostUnregister` / `cuMemHostUnregister`.
    pub host_unregister: unsafe extern "C" fn(*mut c_void) -> Status,
    /// `hipStreamCreateWithFlags` / `cuStreamCreate`.
    pub stream_create: unsafe extern "C" fn(*mut RawStream, c_uint) -> Status,
    /// `hipStreamDestroy` / `cuStreamDestroy_v2`.
    pub stream_destroy: unsafe extern "C" fn(RawStream) -> Status,
    /// `hipStreamSynchronize` / `cuStreamSynchronize`.
    pub stream_synchronize: unsafe extern "C" fn(RawStream) -> Status,
    /// `hipStreamWaitEvent` / `cuStreamWaitEvent`.
    pub stream_wait_event: unsafe extern "C" fn(RawStream, RawEvent, c_uint) -> Status,
    /// `hipEventCreateWithFlags` / `cuEventCreate`.
    pub event_create: unsafe extern "C" fn(*mut RawEvent, c_uint) -> Status,
    /// `hipEventDestroy` / `cuEventDestroy_v2`.
    pub event_destroy: unsafe extern "C" fn(RawEvent) -> Status,
    /// `hipEventRecord` / `cuEventRecord`.
    pub event_record: unsafe extern "C" fn(RawEvent, RawStream) -> Status,
    /// `hipEventSynchronize` / `cuEventSynchronize`.
    pub event_synchronize: unsafe extern "C" fn(RawEvent) -> Status,
    /// `hipModuleLoadData` / `cuModuleLoadData`.
    pub module_load_data: unsafe extern "C" fn(*mut RawModule, *const c_void) -> Status,
    /// `hipModuleGetFunction` / `cuModuleGetFunction`.
    pub module_get_function:
        unsafe extern "C" fn(*mut RawFunction, RawModule, *const c_char) -> Status,
    /// `hipModuleUnload` / `cuModuleUnload`.
    pub module_unload: unsafe extern "C" fn(RawModule) -> Status,
    /// `hipModuleLaunchKernel` / `cuLaunchKernel`.
    pub launch_kernel: unsafe extern "C" fn(
        RawFunction,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        RawStream,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> Status,
    /// Stream capture into graphs, where the runtime has every call of it.
    pub graph: Option<GraphFns>,
}

/// Stream capture and graph replay (CUDA 11.4+; HIP runtimes that export the calls); optional,
/// so a runtime without them still loads and every frame's work is launched call by call.
#[derive(Clone, Copy)]
pub struct GraphFns {
    /// `hipStreamBeginCapture` / `cuStreamBeginCapture_v2`.
    pub begin_capture: unsafe extern "C" fn(RawStream, c_int) -> Status,
    /// `hipStreamEndCapture` / `cuStreamEndCapture`.
    pub end_capture: unsafe extern "C" fn(RawStream, *mut RawGraph) -> Status,
    /// `hipGraphInstantiateWithFlags` / `cuGraphInstantiateWithFlags`.
    pub instantiate: unsafe extern "C" fn(*mut RawGraphExec, RawGraph, u64) -> Status,
    /// `hipGraphLaunch` / `cuGraphLaunch`.
    pub launch: unsafe extern "C" fn(RawGraphExec, RawStream) -> Status,
    /// `hipGraphExecDestroy` / `cuGraphExecDestroy`.
    pub exec_destroy: unsafe extern "C" fn(RawGraphExec) -> Status,
    /// `hipGraphDestroy` / `cuGraphDestroy`.
    pub destroy: unsafe extern "C" fn(RawGraph) -> Status,
    /// Updating a recorded kernel's arguments, where the runtime has those calls.
    pub head: Option<HeadFns>,
}

/// The calls that find a recorded graph's first kernel and give it new arguments before a
/// launch of its exec (CUDA 10.1+; HIP runtimes that export them).
#[derive(Clone, Copy)]
pub struct HeadFns {
    /// `hipGraphGetRootNodes` / `cuGraphGetRootNodes`.
    pub root_nodes: unsafe extern "C" fn(RawGraph, *mut RawGraphNode, *mut usize) -> Status,
    /// `hipGraphNodeGetType` / `cuGraphNodeGetType`.
    pub node_type: unsafe extern "C" fn(RawGraphNode, *mut c_int) -> Status,
    /// `hipGraphExecKernelNodeSetParams` / `cuGraphExecKernelNodeSetParams` (the first version,
    /// which every driver since CUDA 10.1 exports); the two take differently laid-out structs.
    pub set_kernel: SetKernelFn,
}

/// A kernel node's launch, laid out as the vendor's update call takes it.
#[derive(Clone, Copy)]
pub enum SetKernelFn {
    Hip(unsafe extern "C" fn(RawGraphExec, RawGraphNode, *const HipKernelNodeParams) -> Status),
    Cuda(unsafe extern "C" fn(RawGraphExec, RawGraphNode, *const CudaKernelNodeParams) -> Status),
}

/// `hipKernelNodeParams`.
#[repr(C)]
pub struct HipKernelNodeParams {
    pub block: [c_uint; 3],
    pub extra: *mut *mut c_void,
    pub func: RawFunction,
    pub grid: [c_uint; 3],
    pub kernel_params: *mut *mut c_void,
    pub shared_mem_bytes: c_uint,
}

/// `CUDA_KERNEL_NODE_PARAMS_v1`.
#[repr(C)]
pub struct CudaKernelNodeParams {
    pub func: RawFunction,
    pub grid: [c_uint; 3],
    pub block: [c_uint; 3],
    pub shared_mem_bytes: c_uint,
    pub kernel_params: *mut *mut c_void,
    pub extra: *mut *mut c_void,
}

/// The graph calls of `lib` under `names` (in [`GraphFns`] field order), if it has them all,
/// with the head calls under `head` (root nodes, node type, kernel update) if it has those.
fn graph_fns(lib: &Library, names: [&str; 6], head: [&str; 3]) -> Option<GraphFns> {
    // SAFETY: every `get` below names the vendor's symbol whose C prototype is the
    // field's type (the two runtimes shape these calls alike); `lib` outlives the copies, as
    // it is kept in the same API table for the life of the process.
    unsafe {
        let sym = |n: &str| format!("{n}\0");
        Some(GraphFns {
            begin_capture: *lib.get(sym(names[0]).as_bytes()).ok()?,
            end_capture: *lib.get(sym(names[1]).as_bytes()).ok()?,
            instantiate: *lib.get(sym(names[2]).as_bytes()).ok()?,
            launch: *lib.get(sym(names[3]).as_bytes()).ok()?,
            exec_destroy: *lib.get(sym(names[4]).as_bytes()).ok()?,
            destroy: *lib.get(sym(names[5]).as_bytes()).ok()?,
            head: (|| {
                let set = sym(head[2]);
                Some(HeadFns {
                    root_nodes: *lib.get(sym(head[0]).as_bytes()).ok()?,
                    node_type: *lib.get(sym(head[1]).as_bytes()).ok()?,
                    set_kernel: if head[2].starts_with("hip") {
                        SetKernelFn::Hip(*lib.get(set.as_bytes()).ok()?)
                    } else {
                        SetKernelFn::Cuda(*lib.get(set.as_bytes()).ok()?)
                    },
                })
            })(),
        })
    }
}

impl HipFns {
    /// The same-shaped calls of this table (their pointers stay valid while `self` lives).
    fn common(&self) -> CommonFns {
        CommonFns {
            synchronize: self.device_synchronize,
            host_alloc: self.host_malloc,
            host_free: self.host_free,
            host_register: self.host_register,
            host_unregister: self.host_unregister,
            stream_create: self.stream_create,
            stream_destroy: self.stream_destroy,
            stream_synchronize: self.stream_synchronize,
            stream_wait_event: self.stream_wait_event,
            event_create: self.event_create,
            event_destroy: self.event_destroy,
            event_record: self.event_record,
            event_synchronize: self.event_synchronize,
            module_load_data: self.module_load_data,
            module_get_function: self.module_get_function,
            module_unload: self.module_unload,
            launch_kernel: self.module_launch_kernel,
            graph: graph_fns(
                &self._lib,
                [
                    "hipStreamBeginCapture",
                    "hipStreamEndCapture",
                    "hipGraphInstantiateWithFlags",
                    "hipGraphLaunch",
                    "hipGraphExecDestroy",
                    "hipGraphDestroy",
                ],
                [
                    "hipGraphGetRootNodes",
                    "hipGraphNodeGetType",
                    "hipGraphExecKernelNodeSetParams",
                ],
            ),
        }
    }
}

impl CudaFns {
    /// The same-shaped calls of this table (their pointers stay valid while `self` lives).
    fn common(&self) -> CommonFns {
        CommonFns {
            synchronize: self.ctx_synchronize,
            host_alloc: self.mem_host_alloc,
            host_free: self.mem_free_host,
            host_register: self.mem_host_register,
            host_unregister: self.mem_host_unregister,
            stream_create: self.stream_create,
            stream_destroy: self.stream_destroy,
            stream_synchronize: self.stream_synchronize,
            stream_wait_event: self.stream_wait_event,
            event_create: self.event_create,
            event_destroy: self.event_destroy,
            event_record: self.event_record,
            event_synchronize: self.event_synchronize,
            module_load_data: self.module_load_data,
            module_get_function: self.module_get_function,
            module_unload: self.module_unload,
            launch_kernel: self.launch_kernel,
            graph: graph_fns(
                &self._lib,
                [
                    "cuStreamBeginCapture_v2",
                    "cuStreamEndCapture",
                    "cuGraphInstantiateWithFlags",
                    "cuGraphLaunch",
                    "cuGraphExecDestroy",
                    "cuGraphDestroy",
                ],
                [
                    "cuGraphGetRootNodes",
                    "cuGraphNodeGetType",
                    "cuGraphExecKernelNodeSetParams",
                ],
            ),
        }
    }
}

fn_table! {
    /// hiprtc, nvrtc's twin (same shapes; `GetCode` returns a code object for the `--offload-arch`).
    HiprtcFns {
        version = "hiprtcVersion": fn(*mut c_int, *mut c_int) -> Status;
        create_program = "hiprtcCreateProgram": fn(
            *mut RawProgram, *const c_char, *const c_char, c_int,
            *const *const c_char, *const *const c_char,
        ) -> Status;
        compile_program = "hiprtcCompileProgram":
            fn(RawProgram, c_int, *const *const c_char) -> Status;
        get_program_log_size = "hiprtcGetProgramLogSize": fn(RawProgram, *mut usize) -> Status;
        get_program_log = "hiprtcGetProgramLog": fn(RawProgram, *mut c_char) -> Status;
        get_code_size = "hiprtcGetCodeSize": fn(RawProgram, *mut usize) -> Status;
        get_code = "hiprtcGetCode": fn(RawProgram, *mut c_char) -> Status;
        destroy_program = "hiprtcDestroyProgram": fn(*mut RawProgram) -> Status;
        get_error_string = "hiprtcGetErrorString": fn(Status) -> *const c_char;
    }
}

fn_table! {
    /// nvrtc: compiles CUDA C++ to a CUBIN for one `sm_XX`.
    NvrtcFns {
        version = "nvrtcVersion": fn(*mut c_int, *mut c_int) -> Status;
        create_program = "nvrtcCreateProgram": fn(
            *mut RawProgram, *const c_char, *const c_char, c_int,
            *const *const c_char, *const *const c_char,
        ) -> Status;
        compile_program = "nvrtcCompileProgram":
            fn(RawProgram, c_int, *const *const c_char) -> Status;
        get_program_log_size = "nvrtcGetProgramLogSize": fn(RawProgram, *mut usize) -> Status;
        get_program_log = "nvrtcGetProgramLog": fn(RawProgram, *mut c_char) -> Status;
        get_code_size = "nvrtcGetCUBINSize": fn(RawProgram, *mut usize) -> Status;
        get_code = "nvrtcGetCUBIN": fn(RawProgram, *mut c_char) -> Status;
        destroy_program = "nvrtcDestroyProgram": fn(*mut RawProgram) -> Status;
        get_error_string = "nvrtcGetErrorString": fn(Status) -> *const c_char;
    }
}

/// `hipGetDeviceProperties` is optional: its struct layout changed in ROCm 6 (`...R0600`), so
/// we call whichever exists into an oversized buffer and only scan it for the arch name.
pub type HipGetPropsFn = unsafe extern "C" fn(*mut c_void, c_int) -> Status;

/// A loaded, initialised HIP runtime.
pub struct HipApi {
    pub fns: HipFns,
    /// The calls shaped as in CUDA, from `fns`.
    pub common: CommonFns,
    pub get_props: Option<HipGetPropsFn>,
    /// Where it was loaded from.
    pub path: String,
    pub version: c_int,
}

/// A loaded, initialised CUDA driver.
pub struct CudaApi {
    pub fns: CudaFns,
    /// The calls shaped as in HIP, from `fns`.
    pub common: CommonFns,
    pub path: String,
    pub version: c_int,
}

/// A run-time compiler table and where it came from.
pub struct Rtc<T> {
    pub fns: T,
    pub path: String,
    /// (major, minor)
    pub version: (c_int, c_int),
}

/// One library candidate: a bare soname (searched by the dynamic loader) or a full path.
fn candidates(
    first: Option<&str>,
    names: &[&str],
    env_roots: &[PathBuf],
    dirs: &[&str],
) -> Vec<String> {
    let mut out: Vec<String> = first.map(str::to_string).into_iter().collect();
    out.extend(names.iter().map(|n| n.to_string()));
    let mut roots: Vec<PathBuf> = env_roots
        .iter()
        .flat_map(|p| [p.join("lib"), p.join("lib64")])
        .collect();
    roots.extend(dirs.iter().map(PathBuf::from));
    for root in roots {
        for n in names {
            let p = root.join(n);
            if p.exists() {
                out.push(p.to_string_lossy().into_owned());
            }
        }
    }
    out.dedup();
    out
}

/// Opens the first candidate that has every symbol of the table.
fn open_first<T>(
    what: &str,
    cands: &[String],
    resolve: impl Fn(Library) -> Result<T, String>,
) -> Result<(T, String), String> {
    let mut why = Vec::new();
    for c in cands {
        // SAFETY: these are the vendors' own runtime libraries; running their initialisers is
        // what loading them means. Nothing else is executed here.
        match unsafe { Library::new(c) } {
            Ok(lib) => match resolve(lib) {
                Ok(t) => return Ok((t, c.clone())),
                Err(e) => why.push(format!("{c}: {e}")),
            },
            // libloading's message already names the file.
            Err(e) => why.push(e.to_string()),
        }
    }
    Err(format!("{what} not loadable ({})", why.join("; ")))
}

/// The vendors to try, in order: `VMAF_HIP_VENDOR` if set to amd|nvidia, else AMD then NVIDIA.
pub fn vendor_order() -> Vec<Vendor> {
    match crate::settings::get().vendor {
        Some(v) => vec![v],
        None => vec![Vendor::Amd, Vendor::Nvidia],
    }
}

fn load_hip() -> Result<HipApi, String> {
    let s = crate::settings::get();
    let cands = candidates(
        s.amdhip_library.as_deref(),
        &["libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"],
        &s.rocm_roots,
        &["/opt/rocm/lib"],
    );
    let (fns, path) = open_first("HIP runtime (libamdhip64)", &cands, HipFns::resolve)?;
    // SAFETY: hipInit takes a flags word that must be 0.
    let st = unsafe { (fns.init)(0) };
    if st != 0 {
        return Err(format!(
            "hipInit failed with {} ({path})",
            hip_error_text(&fns, st)
        ));
    }
    let mut version = 0;
    // SAFETY: writes one int to a live local.
    let st = unsafe { (fns.driver_get_version)(&mut version) };
    if st != 0 || version < HIP_MIN_VERSION {
        return Err(format!(
            "HIP runtime version {version} at {path} is older than 5.0 (status {st})"
        ));
    }
    // The ROCm 6+ name first: there the unsuffixed symbol keeps the pre-6 layout.
    let get_props = ["hipGetDevicePropertiesR0600\0", "hipGetDeviceProperties\0"]
        .iter()
        // SAFETY: both symbols have the prototype `hipError_t f(props *, int)`; the library is
        // kept alive by `fns._lib` for as long as the pointer is used.
        .find_map(|s| unsafe { fns._lib.get::<HipGetPropsFn>(s.as_bytes()).ok().map(|f| *f) });
    Ok(HipApi {
        common: fns.common(),
        fns,
        get_props,
        path,
        version,
    })
}

fn load_cuda() -> Result<CudaApi, String> {
    let cands = candidates(
        crate::settings::get().cuda_library.as_deref(),
        &["libcuda.so.1", "libcuda.so"],
        &[],
        &[],
    );
    let (fns, path) = open_first("CUDA driver (libcuda.so.1)", &cands, CudaFns::resolve)?;
    let mut version = 0;
    // SAFETY: writes one int to a live local; valid before cuInit.
    let st = unsafe { (fns.driver_get_version)(&mut version) };
    if st != 0 || version < CUDA_MIN_DRIVER {
        return Err(format!(
            "CUDA driver at {path} supports CUDA {}.{}, 11.0 or newer is needed",
            version / 1000,
            version % 1000 / 10
        ));
    }
    ask_for_work_queues(&fns);
    // SAFETY: cuInit takes a flags word that must be 0.
    let st = unsafe { (fns.init)(0) };
    if st != 0 {
        return Err(format!(
            "cuInit failed with {} ({path})",
            cuda_error_text(&fns, st)
        ));
    }
    Ok(CudaApi {
        common: fns.common(),
        fns,
        path,
        version,
    })
}

/// `CUDA_ERROR_NOT_INITIALIZED`: what driver calls return before `cuInit`.
const CUDA_ERROR_NOT_INITIALIZED: Status = 3;

/// The variable through which the CUDA driver takes its count of hardware work queues per
/// context (8 unless set, 32 at most).
const CUDA_CONNECTIONS: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

/// The count to give [`CUDA_CONNECTIONS`]: `asked` (`VMAF_HIP_DEVICE_CONNECTIONS`) unless that
/// is 0 or the process has chosen a count (`current`) already.
fn work_queues(asked: usize, current: Option<std::ffi::OsString>) -> Option<usize> {
    (asked > 0 && current.is_none()).then_some(asked)
}

/// Sets [`CUDA_CONNECTIONS`] for the process, before the driver is initialised, as
/// [`work_queues`] says. Each worker thread queues a frame's copies and kernels on a stream of
/// its own; with more streams than work queues, streams share a queue, where a copy waits for
/// the kernels of another stream's frame queued before it.
fn ask_for_work_queues(fns: &CudaFns) {
    let Some(n) = work_queues(
        crate::settings::get().device_connections,
        std::env::var_os(CUDA_CONNECTIONS),
    ) else {
        return;
    };
    let mut count = 0;
    // SAFETY: writes one int to a live local; before cuInit it only reports that the driver
    // is not initialised.
    if unsafe { (fns.device_get_count)(&mut count) } != CUDA_ERROR_NOT_INITIALIZED {
        // The host program initialised the driver already: the variable has been read.
        crate::log_debug!("CUDA: driver initialised by the program, {CUDA_CONNECTIONS} left unset");
        return;
    }
    // Changing the environment races with any other thread of the process that reads or
    // changes it at the same moment (glibc may move `environ`; libc calls getenv internally).
    // This runs once, from the driver's one-time loading, and only when asked for; setting
    // the variable before starting the program avoids the race. Child processes inherit it,
    // and every CUDA context the process makes later gets as many queues.
    std::env::set_var(CUDA_CONNECTIONS, n.to_string());
    crate::log_debug!("CUDA: {CUDA_CONNECTIONS}={n} for the process (was unset)");
}

static HIP: OnceLock<Result<HipApi, String>> = OnceLock::new();
static CUDA: OnceLock<Result<CudaApi, String>> = OnceLock::new();
static HIPRTC: OnceLock<Result<Rtc<HiprtcFns>, String>> = OnceLock::new();
static NVRTC: OnceLock<Result<Rtc<NvrtcFns>, String>> = OnceLock::new();

/// The HIP runtime, loaded and initialised on first use.
pub fn hip() -> Result<&'static HipApi, &'static str> {
    HIP.get_or_init(|| {
        let api = load_hip()?;
        crate::log_debug!("HIP runtime {} (version {})", api.path, api.version);
        Ok(api)
    })
    .as_ref()
    .map_err(|e| e.as_str())
}

/// The CUDA driver, loaded and initialised on first use.
pub fn cuda() -> Result<&'static CudaApi, &'static str> {
    CUDA.get_or_init(|| {
        let api = load_cuda()?;
        crate::log_debug!("CUDA driver {} (version {})", api.path, api.version);
        Ok(api)
    })
    .as_ref()
    .map_err(|e| e.as_str())
}

fn rtc_version<T>(fns: &T, get: impl Fn(&T, *mut c_int, *mut c_int) -> Status) -> (c_int, c_int) {
    let (mut major, mut minor) = (0, 0);
    if get(fns, &mut major, &mut minor) != 0 {
        return (0, 0);
    }
    (major, minor)
}

/// `VMAF_HIP_HIPRTC=0`: behave as if hiprtc were not installed (a host with ROCm cannot
/// otherwise be made to lack it, as the runtime itself exports hiprtc before ROCm 5.3).
pub fn hiprtc_disabled() -> bool {
    !crate::settings::get().hiprtc
}

/// hiprtc: its own library since ROCm 5.3; before that the same symbols live in libamdhip64.
pub fn hiprtc() -> Result<&'static Rtc<HiprtcFns>, &'static str> {
    if hiprtc_disabled() {
        return Err("hiprtc disabled by VMAF_HIP_HIPRTC=0");
    }
    HIPRTC
        .get_or_init(|| {
            let s = crate::settings::get();
            let mut cands = candidates(
                s.hiprtc_library.as_deref(),
                &["libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5"],
                &s.rocm_roots,
                &["/opt/rocm/lib"],
            );
            // ROCm before 5.3 exports hiprtc from the runtime itself (no GPU needed for that).
            cands.extend(candidates(
                s.amdhip_library.as_deref(),
                &["libamdhip64.so.5"],
                &s.rocm_roots,
                &["/opt/rocm/lib"],
            ));
            let (fns, path) = open_first("hiprtc", &cands, HiprtcFns::resolve)?;
            // SAFETY: writes two ints to live locals.
            let version = rtc_version(&fns, |f, a, b| unsafe { (f.version)(a, b) });
            Ok(Rtc { fns, path, version })
        })
        .as_ref()
        .map_err(|e| e.as_str())
}

/// `VMAF_HIP_NVRTC=0`: behave as if nvrtc were not installed (so a test run can prove that a
/// host with only the driver gets working kernels from the embedded PTX).
pub fn nvrtc_disabled() -> bool {
    !crate::settings::get().nvrtc
}

/// nvrtc: ships with the CUDA toolkit, not the driver (CUDA 13 and 12 sonames, then any).
pub fn nvrtc() -> Result<&'static Rtc<NvrtcFns>, &'static str> {
    if nvrtc_disabled() {
        return Err("nvrtc disabled by VMAF_HIP_NVRTC=0");
    }
    NVRTC
        .get_or_init(|| {
            let s = crate::settings::get();
            let cands = candidates(
                s.nvrtc_library.as_deref(),
                &[
                    "libnvrtc.so.13",
                    "libnvrtc.so.12",
                    "libnvrtc.so.11.2",
                    "libnvrtc.so",
                ],
                &s.cuda_roots,
                &["/usr/local/cuda/lib64"],
            );
            let (fns, path) = open_first("nvrtc (CUDA toolkit)", &cands, NvrtcFns::resolve)?;
            // SAFETY: writes two ints to live locals.
            let version = rtc_version(&fns, |f, a, b| unsafe { (f.version)(a, b) });
            Ok(Rtc { fns, path, version })
        })
        .as_ref()
        .map_err(|e| e.as_str())
}

/// Copies a C string the runtime owns (static storage) into a `String`.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string that outlives the call.
pub unsafe fn c_text(p: *const c_char) -> String {
    if p.is_null() {
        return String::from("(no description)");
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// "description (code)" for a HIP status.
pub fn hip_error_text(fns: &HipFns, st: Status) -> String {
    // SAFETY: hipGetErrorString accepts any value and returns a static string.
    let s = unsafe { c_text((fns.get_error_string)(st)) };
    format!("{s} ({st})")
}

/// "description (code)" for a CUDA driver status.
pub fn cuda_error_text(fns: &CudaFns, st: Status) -> String {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: cuGetErrorString writes a pointer to a static string or leaves it NULL.
    let s = unsafe {
        (fns.get_error_string)(st, &mut p);
        c_text(p)
    };
    format!("{s} ({st})")
}

#[cfg(test)]
mod tests {
    use super::work_queues;

    #[test]
    fn work_queues_are_asked_for_only_when_nobody_chose() {
        assert_eq!(work_queues(32, None), Some(32));
        assert_eq!(work_queues(4, None), Some(4));
        assert_eq!(work_queues(0, None), None, "0 asks for nothing");
        assert_eq!(work_queues(32, Some("1".into())), None, "the process chose");
    }
}
