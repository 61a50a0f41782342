//! Parity clip helpers shared by the unit tests (`src/testutil.rs` includes this file) and the
//! integration tests (`tests/common/mod.rs`), so both find, decompress and name clips one way.
//! Only std and serde_json: it is compiled into both the library's tests and each test crate.

// Each including crate uses its own part.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// Reports a GPU test that cannot run here: prints "skipped: no device (why)" and returns, or,
/// with `VMAF_TEST_REQUIRE_GPU=1` (device machines), fails so a skip cannot pass as success.
pub fn skip_no_device(why: &str) {
    if std::env::var("VMAF_TEST_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        panic!("VMAF_TEST_REQUIRE_GPU=1 but no usable device: {why}");
    }
    println!("skipped: no device ({why})");
}

/// Repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

static XZ_LOCK: Mutex<()> = Mutex::new(());

/// Path of decompressed clip `file` (e.g. `ref_natural_576x324_420p8.y4m`).
pub fn clip_path(file: &str) -> PathBuf {
    let out_dir = repo_root().join("target").join("testdata");
    let out = out_dir.join(file);
    let _g = XZ_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !out.exists() {
        std::fs::create_dir_all(&out_dir).expect("create target/testdata");
        let src = repo_root()
            .join("tests/data/clips")
            .join(format!("{file}.xz"));
        // Unique per process: other test binaries may decompress the same clip concurrently.
        let tmp = out_dir.join(format!("{file}.{}.part", std::process::id()));
        let data = Command::new("xz")
            .arg("-dc")
            .arg(&src)
            .output()
            .expect("run xz (install xz-utils)");
        assert!(data.status.success(), "xz failed on {}", src.display());
        std::fs::write(&tmp, &data.stdout).expect("write clip");
        std::fs::rename(&tmp, &out).expect("rename clip");
    }
    out
}

/// Parity clip names (without `ref_`/`dist_` prefix and extension).
pub const PARITY_CLIPS: &[&str] = &[
    "natural_576x324_420p8",
    "natural_640x360_420p10",
    "mandel_352x288_422p8",
    "testsrc_480x270_444p8",
    "natural_1920x1080_420p8",
    "testsrc_321x241_420p8",
    "natural_320x180_420p12",
    "life_320x240_420p8",
];

/// Geometry of a parity clip stored as raw planes (y4m clips carry theirs in the header).
#[derive(Debug, Clone, Copy)]
pub struct RawGeometry {
    pub w: usize,
    pub h: usize,
    /// Chroma subsampling as `vmaf -p` spells it: 420, 422 or 444.
    pub chroma: u32,
    pub bpc: u32,
}

impl RawGeometry {
    /// Width, height, chroma and bits as text: the values of `vmaf -w -h -p -b`, and the raw
    /// arguments of ffi-tests/test_api.c.
    pub fn texts(&self) -> [String; 4] {
        [self.w, self.h, self.chroma as usize, self.bpc as usize].map(|v| v.to_string())
    }
}

/// The decompressed reference and distorted files of parity clip `name`, and their geometry
/// when they are raw.
pub fn parity_files(name: &str) -> (PathBuf, PathBuf, Option<RawGeometry>) {
    // The 4:2:2 clip is the one stored raw.
    let (ext, raw) = if name.starts_with("mandel") {
        let g = RawGeometry {
            w: 352,
            h: 288,
            chroma: 422,
            bpc: 8,
        };
        ("yuv", Some(g))
    } else {
        ("y4m", None)
    };
    let r = clip_path(&format!("ref_{name}.{ext}"));
    let d = clip_path(&format!("dist_{name}.{ext}"));
    (r, d, raw)
}

/// File `name` of `tests/data/<dir>`, as text.
fn read_data(dir: &str, name: &str) -> String {
    let p = repo_root().join("tests/data").join(dir).join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// `text` parsed as JSON; a panic naming `what` when it is not.
pub fn parse_json(text: &str, what: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what} is not valid JSON: {e}"))
}

/// Expected upstream log `name` from `tests/data/expected`, as text.
pub fn expected_text(name: &str) -> String {
    read_data("expected", name)
}

/// Expected upstream JSON log `name` (file in `tests/data/expected`).
pub fn expected_json(name: &str) -> serde_json::Value {
    parse_json(&expected_text(name), name)
}

/// Expected log `name` of upstream's float build (`tests/data/expected_float`).
pub fn expected_float(name: &str) -> serde_json::Value {
    parse_json(&read_data("expected_float", name), name)
}
