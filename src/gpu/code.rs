//! Getting device code for a kernel source: the ahead-of-time object built by build.rs when it
//! fits the device, else a run-time compile (hiprtc / nvrtc) cached on disk, else (NVIDIA) the
//! clang PTX build.rs embedded, which the driver JIT-compiles. See [`load_order`] for why nvrtc
//! comes before the PTX.
//!
//! Cache entries live in `$VMAF_HIP_CACHE_DIR`, else `$XDG_CACHE_HOME/vmaf-hip`, else
//! `~/.cache/vmaf-hip`; `VMAF_HIP_CACHE=0` disables the cache. The file name carries a hash of
//! the source, prelude, arch, driver and compiler versions and options, so any change picks a new
//! entry. Each entry has a header with its length and checksum; a damaged entry, or one the
//! driver refuses, is compiled again and overwritten.

use std::ffi::{c_char, c_int, CString};
use std::path::PathBuf;
use std::sync::Arc;

use super::device::{Api, Device};
use super::module::Module;
use super::sys::{self, RawProgram, Status, Vendor};
use crate::error::{Error, Result};

/// One kernel source and what build.rs made of it.
#[derive(Debug)]
pub struct EmbeddedKernel {
    /// File stem under kernels/ (`psnr`).
    pub name: &'static str,
    pub source: &'static str,
    /// Clang offload bundle with one code object per arch of [`AMD_ARCHS`].
    pub amd_bundle: Option<&'static [u8]>,
    /// nvcc fatbin (SASS for [`CUDA_ARCHS`] and PTX).
    pub nvidia_fatbin: Option<&'static [u8]>,
    /// PTX text for [`PTX_ARCH`] from clang (CUDA device-only mode), for drivers without nvrtc.
    pub nvidia_ptx: Option<&'static str>,
}

include!(concat!(env!("OUT_DIR"), "/vmaf_kernels.rs"));

/// The embedded kernel `name`.
pub fn embedded(name: &str) -> Result<&'static EmbeddedKernel> {
    KERNELS
        .iter()
        .find(|k| k.name == name)
        .ok_or_else(|| Error::inval(format!("no GPU kernel source {name}")))
}

/// One entry of a clang offload bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntry<'a> {
    /// Target id, e.g. `hipv4-amdgcn-amd-amdhsa--gfx90a`.
    pub id: &'a str,
    pub data: &'a [u8],
}

impl BundleEntry<'_> {
    /// The gfx target of a device entry (`gfx90a`, `gfx90a:xnack+`), or None for the host one.
    pub fn gfx_target(&self) -> Option<&str> {
        let at = self.id.find("amdhsa-")? + "amdhsa-".len();
        Some(self.id[at..].trim_start_matches('-'))
    }
}

const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

/// Parses an uncompressed clang offload bundle (what `hipcc --genco` writes): the magic, an
/// entry count, then (offset, size, id length, id) per entry, all integers little-endian u64.
pub fn parse_bundle(b: &[u8]) -> Result<Vec<BundleEntry<'_>>> {
    let bad = || Error::inval("malformed offload bundle");
    if !b.starts_with(BUNDLE_MAGIC) {
        return Err(bad());
    }
    let mut pos = BUNDLE_MAGIC.len();
    let read_u64 = |pos: &mut usize| -> Result<usize> {
        let bytes: [u8; 8] = b
            .get(*pos..*pos + 8)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?;
        *pos += 8;
        usize::try_from(u64::from_le_bytes(bytes)).map_err(|_| bad())
    };
    let n = read_u64(&mut pos)?;
    if n > 4096 {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let off = read_u64(&mut pos)?;
        let size = read_u64(&mut pos)?;
        let id_len = read_u64(&mut pos)?;
        let id = b
            .get(pos..pos.checked_add(id_len).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        pos += id_len;
        let id = std::str::from_utf8(id).map_err(|_| bad())?;
        let data = b
            .get(off..off.checked_add(size).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        out.push(BundleEntry { id, data });
    }
    Ok(out)
}

/// Whether code built for `target` (`gfx90a`, `gfx90a:xnack+`) runs on a device whose
/// `gcnArchName` is `device` (`gfx90a:sramecc+:xnack-`): same base arch, and every feature the
/// code pins is set the same way on the device (an unpinned feature means "any").
pub fn gfx_compatible(target: &str, device: &str) -> bool {
    let mut t = target.split(':');
    let mut d = device.split(':');
    if t.next() != d.next() {
        return false;
    }
    let dev_features: Vec<&str> = d.collect();
    t.all(|f| dev_features.contains(&f))
}

/// The code object in `bundle` for `device_arch`, if any.
pub fn select_amd_object<'a>(bundle: &'a [u8], device_arch: &str) -> Option<&'a [u8]> {
    parse_bundle(bundle)
        .ok()?
        .into_iter()
        .find(|e| {
            e.gfx_target()
                .is_some_and(|t| gfx_compatible(t, device_arch))
        })
        .map(|e| e.data)
}

/// Objects from `$VMAF_HIP_AOT_DIR/<kernel>.hipfb`, `.fatbin` and `.ptx`, which take the place
/// of the built-in ones: lets a hipcc/nvcc/clang build be tried on a machine without a Rust
/// toolchain.
struct External {
    amd: Option<Vec<u8>>,
    nv: Option<Vec<u8>>,
    ptx: Option<String>,
}

fn external_objects(name: &str) -> External {
    match crate::settings::get().aot_dir.as_deref() {
        Some(d) => External {
            amd: std::fs::read(d.join(format!("{name}.hipfb"))).ok(),
            nv: std::fs::read(d.join(format!("{name}.fatbin"))).ok(),
            ptx: std::fs::read_to_string(d.join(format!("{name}.ptx"))).ok(),
        },
        None => External {
            amd: None,
            nv: None,
            ptx: None,
        },
    }
}

/// Where a module's device code comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeSource {
    /// build.rs's hipcc offload bundle or nvcc fatbin (or `$VMAF_HIP_AOT_DIR`'s).
    Builtin,
    /// The disk cache, else hiprtc/nvrtc for the device's exact arch (stored in the cache).
    RunTime,
    /// build.rs's clang PTX for [`PTX_ARCH`], JIT-compiled by the CUDA driver.
    Ptx,
}

/// What a module load has to choose from.
#[derive(Debug, Clone, Copy)]
pub struct Supply {
    pub vendor: Vendor,
    /// A built-in bundle (AMD) or fatbin (NVIDIA) exists; whether it fits is up to the loader.
    pub builtin: bool,
    /// Embedded PTX exists (only NVIDIA uses it).
    pub ptx: bool,
    /// hiprtc/nvrtc can be opened (and is not disabled by `VMAF_HIP_NVRTC=0`).
    pub rtc_available: bool,
    /// `VMAF_HIP_FORCE_RTC=1`: only the run-time compiler.
    pub force_rtc: bool,
    /// `VMAF_HIP_NO_RTC=1`: never the run-time compiler.
    pub no_rtc: bool,
}

/// The sources to try, in order.
///
/// The built-in object first: nvcc/hipcc code for the device's arch needs no compile at all.
/// Then the cache / run-time compiler, then the PTX: the PTX gives bit-identical results (the
/// integer kernels have a single right answer, and float steps use explicitly rounded
/// intrinsics with contraction off in every compiler), but nvrtc targets the exact arch with
/// NVIDIA's own front end and its result is cached by us, while the PTX is sm_70 code the
/// driver JITs on every new process unless its own compute cache has it. So the PTX serves
/// hosts with only the driver, or an nvrtc that fails (say, one too old for the device).
///
/// The run-time compiler is left out when it is not available (its absence is then reported by
/// the caller), unless it is the only thing left to try, so that the error names it.
/// `VMAF_HIP_NO_RTC=1` still allows the PTX: like the PTX inside an nvcc fatbin, which the
/// driver JITs for a newer GPU, it is shipped code, not a compile of ours.
pub fn load_order(s: &Supply) -> Vec<CodeSource> {
    let mut order = Vec::with_capacity(3);
    if s.builtin && !s.force_rtc {
        order.push(CodeSource::Builtin);
    }
    let ptx = s.vendor == Vendor::Nvidia && s.ptx && !s.force_rtc;
    if !s.no_rtc && (s.rtc_available || (order.is_empty() && !ptx)) {
        order.push(CodeSource::RunTime);
    }
    if ptx {
        order.push(CodeSource::Ptx);
    }
    order
}

/// Loads `kernel` on `dev`, trying the sources in [`load_order`]; logs (debug) which one served.
/// `VMAF_HIP_FORCE_RTC=1` skips the built-in objects and the PTX; `VMAF_HIP_NO_RTC=1` forbids
/// run-time compilation (deployments that must run only the shipped code, and tests of the
/// AOT path); `VMAF_HIP_NVRTC=0` acts as if nvrtc were not installed.
pub fn load_module(dev: &Arc<Device>, kernel: &EmbeddedKernel) -> Result<Arc<Module>> {
    load_module_with_source(dev, kernel).map(|(m, _)| m)
}

/// [`load_module`], also saying where the code came from.
pub fn load_module_with_source(
    dev: &Arc<Device>,
    kernel: &EmbeddedKernel,
) -> Result<(Arc<Module>, CodeSource)> {
    static SUMMARY: std::sync::Once = std::sync::Once::new();
    SUMMARY.call_once(|| crate::log::log(crate::log::LogLevel::Debug, BUILD_SUMMARY));
    let t = std::time::Instant::now();
    let info = dev.info();
    let ext = external_objects(kernel.name);
    let amd = ext.amd.as_deref().or(kernel.amd_bundle);
    let nv = ext.nv.as_deref().or(kernel.nvidia_fatbin);
    let ptx = ext.ptx.as_deref().or(kernel.nvidia_ptx);
    let mut supply = Supply {
        vendor: info.vendor,
        builtin: match info.vendor {
            Vendor::Amd => amd.is_some(),
            Vendor::Nvidia => nv.is_some(),
        },
        ptx: ptx.is_some(),
        // Not known yet: see below.
        rtc_available: false,
        force_rtc: crate::settings::get().force_rtc,
        no_rtc: crate::settings::get().no_rtc,
    };
    // Why each source that did not serve failed, for the log and the final error.
    let mut notes: Vec<String> = Vec::new();
    // A compile or load failure of the run-time compiler: returned if nothing else serves, and
    // worth a warning if something does (a kernel nvrtc rejects is a bug to report).
    let mut hard: Option<Error> = None;
    let mut attempt = |source: CodeSource| -> std::result::Result<(Arc<Module>, String), String> {
        match source {
            CodeSource::Builtin => match (info.vendor, amd, nv) {
                (Vendor::Amd, Some(bundle), _) => match select_amd_object(bundle, &info.arch) {
                    Some(obj) => Module::load(dev, obj)
                        .map(|m| (m, format!("built-in code object for {}", info.arch)))
                        .map_err(|e| {
                            format!("built-in code object for {} refused: {e}", info.arch)
                        }),
                    None => Err(format!("no built-in code object for {}", info.arch)),
                },
                (Vendor::Nvidia, _, Some(fatbin)) => Module::load(dev, fatbin)
                    .map(|m| (m, "built-in fatbin".to_string()))
                    .map_err(|e| format!("built-in fatbin refused for {}: {e}", info.arch)),
                _ => Err("no built-in object".to_string()),
            },
            CodeSource::RunTime => match compile_cached_traced(dev, kernel, cache_dir()) {
                Ok(found) => Ok(found),
                Err(Error::NoDevice(m)) => Err(m),
                Err(e) => {
                    let note = e.to_string();
                    hard.get_or_insert(e);
                    Err(note)
                }
            },
            CodeSource::Ptx => match ptx {
                Some(text) => load_ptx(dev, text)
                    .map(|m| (m, format!("embedded PTX ({PTX_ARCH}, JIT by the driver)")))
                    .map_err(|e| format!("embedded PTX refused for {}: {e}", info.arch)),
                None => Err("no embedded PTX".to_string()),
            },
        }
    };
    // The built-in object never depends on the run-time compiler, and when it serves, opening
    // hiprtc/nvrtc (a large library) would be wasted time; so it goes first, alone.
    let mut tried_builtin = false;
    let mut found = None;
    if load_order(&supply).first() == Some(&CodeSource::Builtin) {
        tried_builtin = true;
        match attempt(CodeSource::Builtin) {
            Ok(m) => found = Some((m, CodeSource::Builtin)),
            Err(note) => {
                crate::log_debug!("{}: {note}; trying the next source", kernel.name);
                notes.push(note);
            }
        }
    } else if !supply.builtin {
        notes.push("built without ahead-of-time objects".into());
    }
    if found.is_none() {
        let rtc_missing = rtc_unavailable(info.vendor);
        supply.rtc_available = rtc_missing.is_none();
        let order = load_order(&supply);
        if supply.no_rtc {
            notes.push("VMAF_HIP_NO_RTC=1 forbids compiling at run time".into());
        } else if let Some(why) = rtc_missing.filter(|_| !order.contains(&CodeSource::RunTime)) {
            notes.push(why);
        }
        for source in order {
            if source == CodeSource::Builtin && tried_builtin {
                continue;
            }
            match attempt(source) {
                Ok(m) => {
                    found = Some((m, source));
                    break;
                }
                Err(note) => {
                    crate::log_debug!("{}: {note}; trying the next source", kernel.name);
                    notes.push(note);
                }
            }
        }
    }
    if let Some(((m, what), source)) = found {
        if let Some(e) = &hard {
            crate::log_warn!("{}: {e}; using {what} instead", kernel.name);
        }
        crate::log_debug!(
            "{}: module from {what} in {:.1} ms",
            kernel.name,
            t.elapsed().as_secs_f64() * 1e3
        );
        return Ok((m, source));
    }
    if let Some(e) = hard {
        return Err(e);
    }
    Err(Error::NoDevice(format!(
        "{}: no usable device code: {}",
        kernel.name,
        notes.join("; ")
    )))
}

/// Why the run-time compiler for `vendor` cannot be used, or None when it can.
fn rtc_unavailable(vendor: Vendor) -> Option<String> {
    match vendor {
        Vendor::Amd => sys::hiprtc().err().map(str::to_string),
        Vendor::Nvidia => sys::nvrtc().err().map(|e| {
            format!(
                "{e}; nvrtc comes with the CUDA toolkit, not the driver: install it, or use a \
                 build made with nvcc or with clang (embedded PTX)"
            )
        }),
    }
}

/// Hands PTX text to the driver, which JIT-compiles it for the device (and keeps the result in
/// its own compute cache, `~/.nv/ComputeCache` unless `CUDA_CACHE_PATH`/`CUDA_CACHE_DISABLE`
/// say otherwise, so we cache nothing ourselves).
fn load_ptx(dev: &Arc<Device>, text: &str) -> Result<Arc<Module>> {
    // cuModuleLoadData tells PTX from a binary by its text and reads it up to a NUL.
    let mut image = Vec::with_capacity(text.len() + 1);
    image.extend_from_slice(text.as_bytes());
    image.push(0);
    Module::load(dev, &image)
}

/// 64-bit FNV-1a: stable across Rust releases (unlike `DefaultHasher`), enough for cache keys
/// and entry checksums.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.iter().chain(std::iter::once(&0xffu8)) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Where compiled objects are cached, or None when caching is off.
pub fn cache_dir() -> Option<PathBuf> {
    crate::settings::get().cache_dir.clone()
}

const ENTRY_MAGIC: &[u8; 8] = b"VMAFHIP1";

/// Wraps a payload in the cache entry format: magic, length, checksum, payload.
pub fn encode_entry(payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(payload.len() + 24);
    v.extend_from_slice(ENTRY_MAGIC);
    v.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    v.extend_from_slice(&fnv1a(&[payload]).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// The payload of an intact entry.
pub fn decode_entry(bytes: &[u8]) -> Option<&[u8]> {
    if bytes.len() < 24 || &bytes[..8] != ENTRY_MAGIC {
        return None;
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().ok()?);
    let sum = u64::from_le_bytes(bytes[16..24].try_into().ok()?);
    let payload = &bytes[24..];
    (payload.len() as u64 == len && fnv1a(&[payload]) == sum && len > 0).then_some(payload)
}

/// What a run-time compile depends on.
struct RtcJob {
    options: Vec<String>,
    /// Identifies compiler and driver, for the cache key.
    toolchain: String,
}

fn rtc_job(api: Api, arch: &str) -> Result<RtcJob> {
    Ok(match api.vendor() {
        Vendor::Amd => {
            let rtc = sys::hiprtc().map_err(|e| Error::NoDevice(e.to_string()))?;
            let base = arch.split(':').next().unwrap_or(arch);
            RtcJob {
                options: vec![format!("--offload-arch={base}"), "-O3".into()],
                toolchain: format!(
                    "hiprtc {:?} {} hip {}",
                    rtc.version,
                    rtc.path,
                    api.version()
                ),
            }
        }
        Vendor::Nvidia => {
            let rtc = sys::nvrtc().map_err(|_| {
                Error::NoDevice(rtc_unavailable(Vendor::Nvidia).unwrap_or_default())
            })?;
            RtcJob {
                options: vec![format!("--gpu-architecture={arch}"), "-fmad=false".into()],
                toolchain: format!(
                    "nvrtc {:?} {} driver {}",
                    rtc.version,
                    rtc.path,
                    api.version()
                ),
            }
        }
    })
}

/// Loads `kernel` from the cache in `dir`, else compiles it and stores the result there.
pub fn compile_cached(
    dev: &Arc<Device>,
    kernel: &EmbeddedKernel,
    dir: Option<PathBuf>,
) -> Result<Arc<Module>> {
    compile_cached_traced(dev, kernel, dir).map(|(m, _)| m)
}

/// [`compile_cached`], also saying whether the cache or the compiler served (for the log).
fn compile_cached_traced(
    dev: &Arc<Device>,
    kernel: &EmbeddedKernel,
    dir: Option<PathBuf>,
) -> Result<(Arc<Module>, String)> {
    let arch = dev.info().arch.clone();
    if arch.is_empty() {
        return Err(Error::NoDevice(
            "device arch unknown: cannot compile kernels".into(),
        ));
    }
    let job = rtc_job(dev.api(), &arch)?;
    let key = fnv1a(&[
        kernel.name.as_bytes(),
        PRELUDE.as_bytes(),
        kernel.source.as_bytes(),
        arch.as_bytes(),
        job.toolchain.as_bytes(),
        job.options.join(" ").as_bytes(),
    ]);
    let safe_arch: String = arch
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let path = dir.map(|d| d.join(format!("{}-{safe_arch}-{key:016x}.bin", kernel.name)));

    if let Some(p) = &path {
        if let Ok(bytes) = std::fs::read(p) {
            match decode_entry(&bytes) {
                Some(obj) => match Module::load(dev, obj) {
                    Ok(m) => return Ok((m, format!("cache entry {}", p.display()))),
                    Err(e) => crate::log_warn!("cached {} refused ({e}); recompiling", p.display()),
                },
                None => crate::log_warn!("cache entry {} is damaged; recompiling", p.display()),
            }
        }
    }

    let obj = compile(dev.api(), kernel, &job.options)?;
    let module = Module::load(dev, &obj)?;
    if let Some(p) = &path {
        if let Err(e) = store(p, &obj) {
            crate::log_warn!("could not write kernel cache {}: {e}", p.display());
        }
    }
    let rtc = match dev.api().vendor() {
        Vendor::Amd => "hiprtc",
        Vendor::Nvidia => "nvrtc",
    };
    Ok((module, format!("{rtc} compile for {arch}")))
}

/// Writes via a temporary file and a rename, so readers never see half an entry.
fn store(path: &std::path::Path, obj: &[u8]) -> std::io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, encode_entry(obj))?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The shared shape of hiprtc and nvrtc.
struct RtcFns {
    create: unsafe extern "C" fn(
        *mut RawProgram,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Status,
    compile: unsafe extern "C" fn(RawProgram, c_int, *const *const c_char) -> Status,
    log_size: unsafe extern "C" fn(RawProgram, *mut usize) -> Status,
    log: unsafe extern "C" fn(RawProgram, *mut c_char) -> Status,
    code_size: unsafe extern "C" fn(RawProgram, *mut usize) -> Status,
    code: unsafe extern "C" fn(RawProgram, *mut c_char) -> Status,
    destroy: unsafe extern "C" fn(*mut RawProgram) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    name: &'static str,
}

fn rtc_fns(vendor: Vendor) -> Result<RtcFns> {
    let nodev = |e: &str| Error::NoDevice(e.to_string());
    Ok(match vendor {
        Vendor::Amd => {
            let f = &sys::hiprtc().map_err(nodev)?.fns;
            RtcFns {
                create: f.create_program,
                compile: f.compile_program,
                log_size: f.get_program_log_size,
                log: f.get_program_log,
                code_size: f.get_code_size,
                code: f.get_code,
                destroy: f.destroy_program,
                error_string: f.get_error_string,
                name: "hiprtc",
            }
        }
        Vendor::Nvidia => {
            let f = &sys::nvrtc().map_err(nodev)?.fns;
            RtcFns {
                create: f.create_program,
                compile: f.compile_program,
                log_size: f.get_program_log_size,
                log: f.get_program_log,
                code_size: f.get_code_size,
                code: f.get_code,
                destroy: f.destroy_program,
                error_string: f.get_error_string,
                name: "nvrtc",
            }
        }
    })
}

/// Destroys the program on every exit path.
struct Program<'a> {
    raw: RawProgram,
    fns: &'a RtcFns,
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: `raw` came from a successful create and is destroyed once.
        unsafe { (self.fns.destroy)(&mut self.raw) };
    }
}

/// Compiles `kernel` (with the prelude as a named header) to a loadable object.
fn compile(api: Api, kernel: &EmbeddedKernel, options: &[String]) -> Result<Vec<u8>> {
    compile_source(api.vendor(), kernel.name, kernel.source, options)
}

/// Runs hiprtc or nvrtc on `source`, offering [`PRELUDE`] as `vmaf_prelude.h`.
pub fn compile_source(
    vendor: Vendor,
    name: &str,
    source: &str,
    options: &[String],
) -> Result<Vec<u8>> {
    let fns = rtc_fns(vendor)?;
    // hiprtc (seen with HIP 5.2) crashes when two programs compile at once; nvrtc is documented
    // thread-safe. Compiles are rare (results are cached), so AMD's simply take turns.
    static HIPRTC_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn =
        (vendor == Vendor::Amd).then(|| HIPRTC_TURN.lock().unwrap_or_else(|e| e.into_inner()));
    let cstr = |s: &str| CString::new(s).map_err(|_| Error::inval("NUL in kernel text"));
    let src = cstr(source)?;
    let file = cstr(&format!("{name}.hip"))?;
    let header = cstr(PRELUDE)?;
    let header_name = cstr("vmaf_prelude.h")?;
    let opts: Vec<CString> = options.iter().map(|o| cstr(o)).collect::<Result<_>>()?;
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let fail = |call: &str, st: Status, log: &str| {
        // SAFETY: the error-string functions accept any status and return static text.
        let text = unsafe { sys::c_text((fns.error_string)(st)) };
        Error::gpu(
            format!("{} {call} for {name}", fns.name),
            st,
            format!("{text}{log}"),
        )
    };

    let mut raw: RawProgram = std::ptr::null_mut();
    // SAFETY: all strings are NUL-terminated and outlive the call; one header with its name.
    let st = unsafe {
        (fns.create)(
            &mut raw,
            src.as_ptr(),
            file.as_ptr(),
            1,
            &header.as_ptr(),
            &header_name.as_ptr(),
        )
    };
    if st != 0 {
        return Err(fail("create", st, ""));
    }
    let prog = Program { raw, fns: &fns };

    // SAFETY: the option array holds `opt_ptrs.len()` valid strings.
    let st = unsafe { (fns.compile)(prog.raw, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
    if st != 0 {
        let log = program_log(&prog);
        return Err(fail("compile", st, &format!(":\n{log}")));
    }
    let mut size = 0usize;
    // SAFETY: writes one size_t.
    let st = unsafe { (fns.code_size)(prog.raw, &mut size) };
    if st != 0 || size == 0 {
        return Err(fail("get code size", st, ""));
    }
    let mut code = vec![0u8; size];
    // SAFETY: the buffer holds the `size` bytes the compiler reported.
    let st = unsafe { (fns.code)(prog.raw, code.as_mut_ptr().cast()) };
    if st != 0 {
        return Err(fail("get code", st, ""));
    }
    Ok(code)
}

fn program_log(prog: &Program<'_>) -> String {
    let mut size = 0usize;
    // SAFETY: writes one size_t.
    if unsafe { (prog.fns.log_size)(prog.raw, &mut size) } != 0 || size == 0 {
        return String::new();
    }
    let mut buf = vec![0u8; size];
    // SAFETY: the buffer holds the `size` bytes reported (NUL included).
    if unsafe { (prog.fns.log)(prog.raw, buf.as_mut_ptr().cast()) } != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut head = BUNDLE_MAGIC.to_vec();
        head.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        let header_len = head.len() + entries.iter().map(|(id, _)| 24 + id.len()).sum::<usize>();
        let mut off = header_len;
        let mut body = Vec::new();
        for (id, data) in entries {
            head.extend_from_slice(&(off as u64).to_le_bytes());
            head.extend_from_slice(&(data.len() as u64).to_le_bytes());
            head.extend_from_slice(&(id.len() as u64).to_le_bytes());
            head.extend_from_slice(id.as_bytes());
            body.extend_from_slice(data);
            off += data.len();
        }
        head.extend(body);
        head
    }

    #[test]
    fn bundle_parse_and_select() {
        let b = bundle(&[
            ("host-x86_64-unknown-linux", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx1030", b"navi"),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", b"mi200x+"),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"mi200"),
        ]);
        let e = parse_bundle(&b).unwrap();
        assert_eq!(e.len(), 4);
        assert_eq!(e[0].gfx_target(), None);
        assert_eq!(e[1].gfx_target(), Some("gfx1030"));
        assert_eq!(select_amd_object(&b, "gfx1030"), Some(&b"navi"[..]));
        // xnack+ code must not be picked for an xnack- device; the feature-neutral one is.
        assert_eq!(
            select_amd_object(&b, "gfx90a:sramecc+:xnack-"),
            Some(&b"mi200"[..])
        );
        assert_eq!(
            select_amd_object(&b, "gfx90a:xnack+"),
            Some(&b"mi200x+"[..])
        );
        assert_eq!(select_amd_object(&b, "gfx1100"), None);
        // Truncation anywhere is an error, never a panic.
        for cut in 0..b.len() - 1 {
            let _ = parse_bundle(&b[..cut]);
        }
        assert!(parse_bundle(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn gfx_compat_rules() {
        assert!(gfx_compatible("gfx942", "gfx942:sramecc+:xnack-"));
        assert!(!gfx_compatible("gfx942:xnack+", "gfx942:sramecc+:xnack-"));
        assert!(!gfx_compatible("gfx940", "gfx942"));
        assert!(gfx_compatible("gfx1100", "gfx1100"));
    }

    #[test]
    fn cache_entries_detect_damage() {
        let obj = b"\x7fELF some code object".to_vec();
        let e = encode_entry(&obj);
        assert_eq!(decode_entry(&e), Some(&obj[..]));
        let mut flipped = e.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(decode_entry(&flipped), None);
        assert_eq!(decode_entry(&e[..e.len() - 1]), None);
        assert_eq!(decode_entry(b"garbage"), None);
        assert_eq!(decode_entry(&encode_entry(b"")), None);
    }

    #[test]
    fn every_kernel_source_is_embedded() {
        assert!(PRELUDE.contains("VMAF_SHFL_DOWN"));
        let psnr = embedded("psnr").unwrap();
        assert!(psnr.source.contains("vmaf_psnr_sse_u8"));
        assert!(psnr.source.contains("vmaf_psnr_sse_u16"));
        assert!(embedded("nonexistent").is_err());
    }

    /// CI proof that the AMD path compiles: when build.rs found hipcc, the bundle must hold code
    /// objects for a CDNA2 and an RDNA2 part.
    #[test]
    fn amd_code_objects_embedded() {
        let psnr = embedded("psnr").unwrap();
        let Some(bundle) = psnr.amd_bundle else {
            println!("skipped: built without hipcc (no AMD code objects embedded)");
            return;
        };
        let entries = parse_bundle(bundle).unwrap();
        for arch in ["gfx90a", "gfx1030"] {
            assert!(AMD_ARCHS.contains(&arch), "{arch} not in {AMD_ARCHS:?}");
            let obj = select_amd_object(bundle, arch).unwrap_or_else(|| {
                panic!(
                    "no {arch} object in {:?}",
                    entries.iter().map(|e| e.id).collect::<Vec<_>>()
                )
            });
            assert!(obj.starts_with(b"\x7fELF"), "{arch} object is not ELF");
        }
        // One device entry per built arch.
        let device_entries = entries.iter().filter(|e| e.gfx_target().is_some()).count();
        assert_eq!(device_entries, AMD_ARCHS.len());
    }

    /// The prelude and kernels compile under hiprtc whenever a HIP runtime with hiprtc is
    /// installed, GPU or not.
    #[test]
    fn hiprtc_compiles_psnr_for_gfx90a() {
        if sys::hiprtc().is_err() {
            println!("skipped: hiprtc not available");
            return;
        }
        let psnr = embedded("psnr").unwrap();
        let opts = vec!["--offload-arch=gfx90a".to_string(), "-O3".to_string()];
        let obj = compile_source(Vendor::Amd, psnr.name, psnr.source, &opts).unwrap();
        assert!(obj.len() > 64);
        let text = String::from_utf8_lossy(&obj);
        assert!(text.contains("vmaf_psnr_sse_u16"));
    }

    /// Likewise for nvrtc (on machines with the CUDA toolkit).
    #[test]
    fn nvrtc_compiles_psnr_for_sm90() {
        if sys::nvrtc_disabled() {
            println!("skipped: nvrtc disabled by VMAF_HIP_NVRTC=0");
            return;
        }
        if sys::nvrtc().is_err() {
            crate::testutil::skip_no_device("nvrtc not available");
            return;
        }
        let psnr = embedded("psnr").unwrap();
        let opts = vec![
            "--gpu-architecture=sm_90".to_string(),
            "-fmad=false".to_string(),
        ];
        let obj = compile_source(Vendor::Nvidia, psnr.name, psnr.source, &opts).unwrap();
        assert!(obj.starts_with(b"\x7fELF"), "CUBIN is an ELF image");
    }

    fn supply(vendor: Vendor) -> Supply {
        Supply {
            vendor,
            builtin: false,
            ptx: false,
            rtc_available: false,
            force_rtc: false,
            no_rtc: false,
        }
    }

    #[test]
    fn load_order_prefers_builtin_then_nvrtc_then_ptx() {
        use CodeSource::{Builtin, Ptx, RunTime};
        let nv = supply(Vendor::Nvidia);
        let full = Supply {
            builtin: true,
            ptx: true,
            rtc_available: true,
            ..nv
        };
        assert_eq!(load_order(&full), [Builtin, RunTime, Ptx]);
        // A driver-only host (or VMAF_HIP_NVRTC=0): straight to the PTX.
        let driver_only = Supply {
            rtc_available: false,
            builtin: false,
            ..full
        };
        assert_eq!(load_order(&driver_only), [Ptx]);
        assert_eq!(
            load_order(&Supply {
                builtin: true,
                ..driver_only
            }),
            [Builtin, Ptx]
        );
        // nvrtc present, no PTX in the build: as before.
        let no_ptx = Supply { ptx: false, ..full };
        assert_eq!(load_order(&no_ptx), [Builtin, RunTime]);
        // Nothing else to try: the run-time compiler stays, so its absence is the error.
        assert_eq!(
            load_order(&Supply {
                builtin: false,
                rtc_available: false,
                ..no_ptx
            }),
            [RunTime]
        );
        // NO_RTC keeps the shipped code, PTX included; FORCE_RTC drops all of it.
        assert_eq!(
            load_order(&Supply {
                no_rtc: true,
                ..full
            }),
            [Builtin, Ptx]
        );
        assert_eq!(
            load_order(&Supply {
                force_rtc: true,
                ..full
            }),
            [RunTime]
        );
        assert_eq!(load_order(&Supply { no_rtc: true, ..nv }), []);
        // AMD never uses PTX.
        let amd = Supply {
            vendor: Vendor::Amd,
            ..full
        };
        assert_eq!(load_order(&amd), [Builtin, RunTime]);
        assert_eq!(
            load_order(&Supply {
                rtc_available: false,
                builtin: false,
                ..amd
            }),
            [RunTime]
        );
    }

    /// (`.version` major, minor; `.target`) from a PTX header.
    fn ptx_header(ptx: &str) -> (Option<(u32, u32)>, Option<&str>) {
        let field = |key: &str| {
            ptx.lines()
                .map(str::trim)
                .find_map(|l| l.strip_prefix(key))
                .map(str::trim)
        };
        let version = field(".version").and_then(|v| {
            let (a, b) = v.split_once('.')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        });
        (version, field(".target"))
    }

    /// The bit width of each `.param` of entry `name`, or None if the PTX has no such entry.
    fn ptx_entry_params(ptx: &str, name: &str) -> Option<Vec<u32>> {
        let at = ptx.find(&format!(".entry {name}("))?;
        let body = &ptx[at..];
        let list = &body[..body.find(')')?];
        Some(
            list.lines()
                .filter_map(|l| l.trim().strip_prefix(".param"))
                .map(|l| {
                    let ty = l.split_whitespace().next().unwrap_or("");
                    ty.trim_start_matches(|c: char| !c.is_ascii_digit())
                        .parse()
                        .unwrap_or(0)
                })
                .collect(),
        )
    }

    /// When build.rs found a clang with NVPTX, every kernel carries PTX that a CUDA 11.0 driver
    /// loads (ISA <= 7.0, our oldest supported driver) for sm_70, with every entry point its
    /// source declares and parameter widths matching the declared types (which the launchers'
    /// argument types match: the signature test).
    #[test]
    fn ptx_embedded_for_every_kernel() {
        let with_ptx = KERNELS.iter().filter(|k| k.nvidia_ptx.is_some()).count();
        if with_ptx == 0 {
            println!("skipped: built without an NVPTX clang ({BUILD_SUMMARY})");
            return;
        }
        assert_eq!(with_ptx, KERNELS.len(), "{BUILD_SUMMARY}");
        assert!(BUILD_SUMMARY.contains("embedded NVIDIA PTX for sm_70"));
        assert_eq!(PTX_ARCH, "sm_70");
        let mut entries = 0;
        for k in KERNELS {
            let file = k.name;
            let ptx = k.nvidia_ptx.unwrap();
            let (version, target) = ptx_header(ptx);
            let version = version.unwrap_or_else(|| panic!("{file}: no .version"));
            assert!(
                ((6, 0)..=(7, 0)).contains(&version),
                "{file}: .version {version:?}"
            );
            assert_eq!(target, Some(PTX_ARCH), "{file}");
            assert!(ptx.contains(".address_size 64"), "{file}");
            // Fully linked: no calls into libdevice or anything else outside the module.
            assert!(
                !ptx.contains(".extern .func"),
                "{file}: unresolved functions"
            );
            for (name, types) in crate::gpu::launch::signature::parse_kernels(k.source).unwrap() {
                let widths = ptx_entry_params(ptx, &name)
                    .unwrap_or_else(|| panic!("{file}: no .entry {name} in the PTX"));
                let want: Vec<u32> = types
                    .iter()
                    .map(|t| match t.as_str() {
                        t if t.starts_with('*') => 64,
                        "i64" | "u64" | "f64" => 64,
                        "i32" | "u32" | "f32" => 32,
                        "i16" | "u16" => 16,
                        _ => 8,
                    })
                    .collect();
                assert_eq!(widths, want, "{file}: parameters of {name} ({types:?})");
                entries += 1;
            }
        }
        assert!(entries >= 25, "only {entries} entries checked");
    }

    #[test]
    fn ptx_header_parsing() {
        let p = "//\n.version 6.0\n.target sm_70\n.address_size 64\n\n\
                 .visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u32 k_param_1\n)\n{\n}\n";
        assert_eq!(ptx_header(p), (Some((6, 0)), Some("sm_70")));
        assert_eq!(ptx_entry_params(p, "k"), Some(vec![64, 32]));
        assert_eq!(ptx_entry_params(p, "j"), None);
        assert_eq!(ptx_header("garbage"), (None, None));
    }
}
