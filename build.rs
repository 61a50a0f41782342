//! Build script: embeds the GPU kernels.
//!
//! Every `kernels/*.hip` source (and the prelude) is always embedded as text, for run-time
//! compilation with hiprtc/nvrtc. When `hipcc` is found, each source is also compiled ahead of
//! time into one AMD offload bundle holding a code object per gfx arch; when `nvcc` is found,
//! into one NVIDIA fatbin (SASS per sm arch plus PTX). When a clang with the NVPTX backend is
//! found, each source is also compiled to PTX for [`PTX_ARCH`] (CUDA device-only mode, no CUDA
//! headers or libdevice needed): NVIDIA hosts with only the driver, no nvrtc, JIT that. Missing
//! tools, or a tool that fails, only produce a warning: the library then compiles at run time.
//!
//! Environment: `VMAF_HIP_ARCHS` (comma/space separated gfx list, empty = no AMD AOT),
//! `VMAF_HIP_CUDA_ARCHS` (sm_XX list, empty = no NVIDIA AOT), `VMAF_HIP_PTX=0` (no PTX),
//! `VMAF_HIP_AOT=0` (none of the three), `HIPCC`/`NVCC`/`CLANG` (explicit compiler paths),
//! `HIP_PATH`, `ROCM_PATH`, `CUDA_PATH`.
//!
//! The script reruns (and the crate rebuilds) when any of those variables or `PATH` change, and
//! when a compiler it found changes or disappears. A compiler that appears in a directory
//! already on `PATH` is noticed only after `touch build.rs` (cargo cannot watch for a file that
//! does not exist yet without rerunning on every build). One `cargo:warning` line says which
//! GPU code was embedded; the same text is `code::BUILD_SUMMARY` at run time.
//!
//! On ELF targets the cdylib gets the placeholder SONAME `libvmaf_hip.so` (what programs linked
//! against `target/*/libvmaf_hip.so` record as NEEDED, as without a SONAME); meson rewrites it
//! to `libvmaf.so.3` in the copy it installs (build-aux/set_soname.py), so one cargo build
//! serves `cargo test` and meson.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Probed against the hipcc found (see [`amd_archs`]): Debian 12's hipcc 5.2 takes gfx900 to
/// gfx1030; a hipcc 7 (ROCm 7, or Debian forky's through build-aux/forky-hipcc) takes the RDNA 3
/// (gfx110x), RDNA 3.5 (gfx1150/1151 APUs) and RDNA 4 (gfx120x) ones too.
const DEFAULT_AMD_ARCHS: &[&str] = &[
    "gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx1030", "gfx1100",
    "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1200", "gfx1201",
];
const DEFAULT_CUDA_ARCHS: &[&str] = &["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"];
/// The one arch of the clang PTX. The driver JITs PTX for its arch and every later one, so the
/// oldest arch worth serving wins: sm_70 rather than sm_75 keeps Volta (V100, still rented in
/// clouds) and costs nothing, as no instruction the kernels use is newer than sm_70; pre-Volta
/// parts are not a target (the nvcc list starts at sm_75). The JIT optimises for the actual
/// device either way.
const PTX_ARCH: &str = "sm_70";
/// PTX ISA of the clang PTX: 6.0 is the least sm_70 accepts (CUDA 9.0); drivers load every ISA
/// up to their own (7.0 for CUDA 11.0, our oldest), so the lowest one loads everywhere.
const PTX_ISA_FEATURE: &str = "+ptx60";

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let kdir = root.join("kernels");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=kernels");
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if env::var("CARGO_CFG_TARGET_FAMILY").is_ok_and(|f| f.split(',').any(|f| f == "unix"))
        && !matches!(
            target_os.as_str(),
            "macos" | "ios" | "tvos" | "watchos" | "visionos"
        )
    {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libvmaf_hip.so");
    }
    for v in [
        "VMAF_HIP_ARCHS",
        "VMAF_HIP_CUDA_ARCHS",
        "VMAF_HIP_AOT",
        "VMAF_HIP_PTX",
        "HIPCC",
        // build-aux/forky-hipcc's chroot, when HIPCC is that wrapper.
        "VMAF_FORKY_DIR",
        "NVCC",
        "CLANG",
        "HIP_PATH",
        "ROCM_PATH",
        "CUDA_PATH",
        "PATH",
    ] {
        println!("cargo:rerun-if-env-changed={v}");
    }

    let mut sources: Vec<PathBuf> = fs::read_dir(&kdir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "hip"))
                .collect()
        })
        .unwrap_or_default();
    sources.sort();

    let aot = env::var("VMAF_HIP_AOT").map_or(true, |v| v != "0");
    let hipcc = if aot {
        find_tool("HIPCC", "hipcc", &["HIP_PATH", "ROCM_PATH"], "/opt/rocm")
    } else {
        None
    };
    let nvcc = if aot {
        find_tool("NVCC", "nvcc", &["CUDA_PATH"], "/usr/local/cuda")
    } else {
        None
    };
    let ptx_wanted = aot && env::var("VMAF_HIP_PTX").map_or(true, |v| v != "0");
    let clang = if ptx_wanted { find_nvptx_clang() } else { None };

    let amd_archs = match &hipcc {
        Some(h) => amd_archs(h, &out),
        None => Vec::new(),
    };
    let cuda_archs = match &nvcc {
        Some(n) => cuda_archs(n),
        None => Vec::new(),
    };
    // A found compiler that changes (upgrade) or disappears reruns the probe.
    for tool in hipcc.iter().chain(nvcc.iter()).chain(clang.iter()) {
        if tool.is_absolute() && tool.is_file() {
            println!("cargo:rerun-if-changed={}", tool.display());
        }
    }
    let (mut amd_built, mut nv_built) = (0usize, 0usize);
    // All sources at once (vif alone takes about 2 s).
    let ptx: Vec<Option<PathBuf>> = match &clang {
        Some(c) => {
            let no_cuda = out.join("no-cuda");
            let _ = fs::create_dir_all(&no_cuda);
            let handles: Vec<_> = sources
                .iter()
                .map(|src| {
                    let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
                    let dst = out.join(format!("{stem}.ptx"));
                    let (c, kdir, src, no_cuda) =
                        (c.clone(), kdir.clone(), src.clone(), no_cuda.clone());
                    std::thread::spawn(move || build_ptx(&c, &kdir, &src, &dst, &no_cuda))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect()
        }
        None => vec![None; sources.len()],
    };
    let ptx_built = ptx.iter().filter(|p| p.is_some()).count();

    let mut table = String::new();
    let prelude = kdir.join("vmaf_prelude.h");
    writeln!(table, "/// The kernel prelude every source includes.").unwrap();
    if prelude.exists() {
        writeln!(
            table,
            "pub static PRELUDE: &str = include_str!({:?});",
            prelude
        )
        .unwrap();
    } else {
        writeln!(table, "pub static PRELUDE: &str = \"\";").unwrap();
    }
    writeln!(table, "/// gfx archs in each AMD bundle.").unwrap();
    writeln!(table, "pub static AMD_ARCHS: &[&str] = &{:?};", amd_archs).unwrap();
    writeln!(
        table,
        "/// sm archs (SASS) in each NVIDIA fatbin; PTX of the last one is added."
    )
    .unwrap();
    writeln!(table, "pub static CUDA_ARCHS: &[&str] = &{:?};", cuda_archs).unwrap();
    writeln!(table, "/// The arch of every embedded clang PTX.").unwrap();
    writeln!(table, "pub static PTX_ARCH: &str = {PTX_ARCH:?};").unwrap();
    writeln!(
        table,
        "/// Every kernels/*.hip source with what was built from it."
    )
    .unwrap();
    writeln!(table, "pub static KERNELS: &[EmbeddedKernel] = &[").unwrap();
    for (src, ptx) in sources.iter().zip(ptx) {
        let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
        let amd = match &hipcc {
            Some(h) if !amd_archs.is_empty() => build_amd(
                h,
                &kdir,
                src,
                &out.join(format!("{stem}.hipfb")),
                &amd_archs,
            ),
            _ => None,
        };
        let nv = match &nvcc {
            Some(n) if !cuda_archs.is_empty() => build_cuda(
                n,
                &kdir,
                src,
                &out.join(format!("{stem}.fatbin")),
                &cuda_archs,
            ),
            _ => None,
        };
        amd_built += usize::from(amd.is_some());
        nv_built += usize::from(nv.is_some());
        let embed = |p: Option<PathBuf>| match p {
            Some(p) => format!("Some(include_bytes!({p:?}))"),
            None => "None".to_string(),
        };
        let ptx = match ptx {
            Some(p) => format!("Some(include_str!({p:?}))"),
            None => "None".to_string(),
        };
        writeln!(
            table,
            "    EmbeddedKernel {{ name: {stem:?}, source: include_str!({src:?}), amd_bundle: {}, nvidia_fatbin: {}, nvidia_ptx: {ptx} }},",
            embed(amd),
            embed(nv)
        )
        .unwrap();
    }
    writeln!(table, "];").unwrap();

    let why = |tool: &str, found: bool, archs: &[String]| {
        if !aot {
            "VMAF_HIP_AOT=0".to_string()
        } else if !found {
            format!("{tool} not found")
        } else if archs.is_empty() {
            format!("{tool} targets no requested arch")
        } else {
            format!("{tool} failed")
        }
    };
    let part = |vendor: &str, what: &str, built: usize, archs: &[String], why: String| {
        let n = sources.len();
        if built == 0 {
            format!("no {vendor} {what} ({why})")
        } else if built < n {
            format!(
                "embedded {vendor} {what} for {} ({built} of {n} kernels)",
                archs.join(",")
            )
        } else {
            format!("embedded {vendor} {what} for {}", archs.join(","))
        }
    };
    let ptx_part = {
        let n = sources.len();
        let which = clang
            .as_deref()
            .and_then(Path::file_name)
            .map_or("clang".into(), |f| f.to_string_lossy());
        if !aot {
            "no NVIDIA PTX (VMAF_HIP_AOT=0)".to_string()
        } else if !ptx_wanted {
            "no NVIDIA PTX (VMAF_HIP_PTX=0)".to_string()
        } else if clang.is_none() {
            "no NVIDIA PTX (no clang with the NVPTX backend found)".to_string()
        } else if ptx_built == 0 {
            format!("no NVIDIA PTX ({which} failed)")
        } else if ptx_built < n {
            format!("embedded NVIDIA PTX for {PTX_ARCH} by {which} ({ptx_built} of {n} kernels)")
        } else {
            format!("embedded NVIDIA PTX for {PTX_ARCH} by {which}")
        }
    };
    let summary = format!(
        "vmaf-hip: {}; {}; {ptx_part}; other GPU archs compile the kernels at run time via \
         hiprtc/nvrtc{}",
        part(
            "AMD",
            "code objects",
            amd_built,
            &amd_archs,
            why("hipcc", hipcc.is_some(), &amd_archs)
        ),
        part(
            "NVIDIA",
            "fatbin",
            nv_built,
            &cuda_archs,
            why("nvcc", nvcc.is_some(), &cuda_archs)
        ),
        if ptx_built > 0 {
            ", or on NVIDIA without nvrtc the driver JITs the PTX"
        } else {
            ""
        },
    );
    println!("cargo:warning={summary}");
    writeln!(
        table,
        "/// What build.rs embedded (also printed as a cargo warning at build time)."
    )
    .unwrap();
    writeln!(table, "pub static BUILD_SUMMARY: &str = {summary:?};").unwrap();
    fs::write(out.join("gpu_probe.txt"), format!("{summary}\n")).unwrap();
    fs::write(out.join("vmaf_kernels.rs"), table).unwrap();
}

/// A clang that can emit PTX: `$CLANG`, else `clang` on PATH, else the newest `clang-NN` on
/// PATH; the first candidate whose `-print-targets` lists nvptx64 (distribution clangs do; ROCm's
/// own does not).
fn find_nvptx_clang() -> Option<PathBuf> {
    let mut cands: Vec<PathBuf> = Vec::new();
    if let Some(p) = env::var_os("CLANG").filter(|v| !v.is_empty()) {
        cands.push(PathBuf::from(p));
    } else if let Some(path) = env::var_os("PATH") {
        let dirs: Vec<PathBuf> = env::split_paths(&path).collect();
        cands.extend(dirs.iter().map(|d| d.join("clang")).filter(|p| p.is_file()));
        let mut versioned: Vec<(u32, PathBuf)> = dirs
            .iter()
            .filter_map(|d| fs::read_dir(d).ok())
            .flat_map(|rd| rd.filter_map(|e| e.ok()))
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let v: u32 = name.strip_prefix("clang-")?.parse().ok()?;
                Some((v, e.path()))
            })
            .collect();
        // Newest first; the stable sort keeps PATH order among equal versions.
        versioned.sort_by_key(|v| std::cmp::Reverse(v.0));
        cands.extend(versioned.into_iter().map(|(_, p)| p));
    }
    cands.into_iter().find(|c| {
        Command::new(c)
            .arg("-print-targets")
            .stderr(Stdio::null())
            .output()
            .is_ok_and(|o| {
                o.status.success() && String::from_utf8_lossy(&o.stdout).contains("nvptx64")
            })
    })
}

/// Compiles `src` to PTX text for [`PTX_ARCH`]: CUDA device-only mode without the CUDA headers
/// (the prelude supplies what the kernels use) or libdevice. `no_cuda` is an empty directory
/// given as the CUDA install so that one on the machine cannot raise the PTX ISA version.
/// The result is checked to be PTX for that arch before it is embedded.
fn build_ptx(clang: &Path, kdir: &Path, src: &Path, dst: &Path, no_cuda: &Path) -> Option<PathBuf> {
    let mut cmd = Command::new(clang);
    // -ffp-contract=off: clang's CUDA default fuses a*b+c into fma; nvcc/nvrtc here run with
    // -fmad=false, and float steps must round as on the CPU.
    cmd.args([
        "-x",
        "cuda",
        "--cuda-device-only",
        "-S",
        "-nocudainc",
        "-nocudalib",
    ])
    .arg(format!("--cuda-gpu-arch={PTX_ARCH}"))
    .arg(format!("--cuda-path={}", no_cuda.display()))
    .args(["-Xclang", "-target-feature", "-Xclang", PTX_ISA_FEATURE])
    .args(["-O3", "-ffp-contract=off"])
    // The PTX serves whatever GPU the driver finds, fast FP64 or not (kernels/vif.hip).
    .arg("-DVIF_F64=0")
    .arg("-I")
    .arg(kdir)
    .arg(src)
    .arg("-o")
    .arg(dst);
    let built = run_tool(cmd, "clang (PTX)", src, dst)?;
    let text = fs::read_to_string(&built).unwrap_or_default();
    let target = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(".target"))
        .map(str::trim);
    if target != Some(PTX_ARCH) || !text.contains(".entry") {
        println!(
            "cargo:warning=clang PTX for {} is not {PTX_ARCH} PTX with entry points (target {target:?}); not embedded",
            src.display()
        );
        return None;
    }
    Some(built)
}

/// `$ENV_VAR`, then `name` on PATH, then `<root>/bin/name` for each root variable, then
/// `<fallback>/bin/name`.
fn find_tool(var: &str, name: &str, roots: &[&str], fallback: &str) -> Option<PathBuf> {
    if let Some(p) = env::var_os(var).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    roots
        .iter()
        .filter_map(|r| env::var_os(r).filter(|v| !v.is_empty()))
        .map(PathBuf::from)
        .chain(std::iter::once(PathBuf::from(fallback)))
        .map(|r| r.join("bin").join(name))
        .find(|p| p.is_file())
}

fn list_from_env(var: &str) -> Option<Vec<String>> {
    let v = env::var(var).ok()?;
    Some(
        v.split(|c: char| c == ',' || c == ';' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// The requested AMD archs that this hipcc can target. Probing compiles an empty file per arch
/// (about 0.7 s each, in parallel): that runs the driver checks that reject an arch the clang or
/// the installed device libraries lack, without parsing the HIP headers.
fn amd_archs(hipcc: &Path, out: &Path) -> Vec<String> {
    if let Some(list) = list_from_env("VMAF_HIP_ARCHS") {
        return list;
    }
    let empty = out.join("vmaf_probe.hip");
    if fs::write(&empty, "").is_err() {
        return Vec::new();
    }
    let handles: Vec<_> = DEFAULT_AMD_ARCHS
        .iter()
        .map(|&arch| {
            let (hipcc, empty) = (hipcc.to_path_buf(), empty.clone());
            std::thread::spawn(move || {
                let ok = Command::new(&hipcc)
                    .arg("-fsyntax-only")
                    .arg("--cuda-device-only")
                    .arg("-nogpuinc")
                    .arg(format!("--offload-arch={arch}"))
                    .arg(&empty)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                ok.then(|| arch.to_string())
            })
        })
        .collect();
    let archs: Vec<String> = handles
        .into_iter()
        .filter_map(|h| h.join().ok().flatten())
        .collect();
    if archs.is_empty() {
        println!("cargo:warning=hipcc at {} accepts none of the default gfx archs; AMD kernels will be compiled at run time", hipcc.display());
    }
    archs
}

fn build_amd(
    hipcc: &Path,
    kdir: &Path,
    src: &Path,
    dst: &Path,
    archs: &[String],
) -> Option<PathBuf> {
    let mut cmd = Command::new(hipcc);
    cmd.arg("--genco").arg("-O3").arg("-I").arg(kdir);
    // A fixed compilation-unit id: clang 21 (hipcc 7) otherwise picks a random one, which names
    // a symbol in every object, so two builds of the same source would differ.
    if let Some(stem) = src.file_stem() {
        cmd.arg(format!("-cuid=vmaf_{}", stem.to_string_lossy()));
    }
    for a in archs {
        cmd.arg(format!("--offload-arch={a}"));
    }
    cmd.arg(src).arg("-o").arg(dst);
    run_tool(cmd, "hipcc", src, dst)
}

/// The requested sm archs this nvcc supports (`--list-gpu-code`, CUDA 11.5+; older ones get the
/// default list and fail loudly if it is too new).
fn cuda_archs(nvcc: &Path) -> Vec<String> {
    let wanted: Vec<String> = list_from_env("VMAF_HIP_CUDA_ARCHS")
        .unwrap_or_else(|| DEFAULT_CUDA_ARCHS.iter().map(|s| s.to_string()).collect());
    let listed = Command::new(nvcc)
        .arg("--list-gpu-code")
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    match listed {
        Some(text) => {
            let supported: Vec<&str> = text.split_whitespace().collect();
            wanted
                .into_iter()
                .filter(|a| supported.contains(&a.as_str()))
                .collect()
        }
        None => wanted,
    }
}

fn build_cuda(
    nvcc: &Path,
    kdir: &Path,
    src: &Path,
    dst: &Path,
    archs: &[String],
) -> Option<PathBuf> {
    let mut cmd = Command::new(nvcc);
    // -fmad=false: no fused multiply-add, so float steps round as on the CPU.
    cmd.arg("--fatbin")
        .arg("-O3")
        .arg("-fmad=false")
        .arg("-I")
        .arg(kdir)
        .arg("-x")
        .arg("cu");
    for a in archs {
        let n = a.trim_start_matches("sm_");
        cmd.arg(format!("-gencode=arch=compute_{n},code=sm_{n}"));
    }
    if let Some(last) = archs.last() {
        let n = last.trim_start_matches("sm_");
        cmd.arg(format!("-gencode=arch=compute_{n},code=compute_{n}"));
    }
    cmd.arg(src).arg("-o").arg(dst);
    run_tool(cmd, "nvcc", src, dst)
}

fn run_tool(mut cmd: Command, tool: &str, src: &Path, dst: &Path) -> Option<PathBuf> {
    let _ = fs::remove_file(dst);
    match cmd.output() {
        Ok(o) if o.status.success() && dst.is_file() => Some(dst.to_path_buf()),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let first = err.lines().find(|l| l.contains("error")).unwrap_or("");
            println!(
                "cargo:warning={tool} failed on {} ({}); it will be compiled at run time. {first}",
                src.display(),
                o.status
            );
            None
        }
        Err(e) => {
            println!("cargo:warning=could not run {tool}: {e}");
            None
        }
    }
}
