//! Bodies of the fuzz targets, shared by `fuzz/fuzz_targets/*.rs` (cargo-fuzz, nightly) and the
//! stable replay test `tests/fuzz_regressions.rs`, which runs every committed corpus and
//! regression input through the same code.
//!
//! Every target must return normally for every input: errors are fine, panics (even ones the
//! C API boundary would catch: libFuzzer's panic hook aborts on them), hangs and unbounded
//! allocations are bugs.

#![allow(dead_code)]

use std::ffi::{c_uint, c_void, CStr};
use std::io::Cursor;
use std::ptr;

use vmaf_hip::ffi::feature::VmafFeatureDictionary;
use vmaf_hip::ffi::feature::{vmaf_feature_dictionary_free, vmaf_feature_dictionary_set};
use vmaf_hip::ffi::libvmaf::{
    vmaf_close, vmaf_feature_score_at_index, vmaf_feature_score_pooled,
    vmaf_fetch_preallocated_picture, vmaf_import_feature_score, vmaf_init,
    vmaf_preallocate_pictures, vmaf_read_pictures, vmaf_score_at_index,
    vmaf_score_at_index_model_collection, vmaf_score_pooled, vmaf_score_pooled_model_collection,
    vmaf_use_feature, vmaf_use_features_from_model, vmaf_use_features_from_model_collection,
    vmaf_write_output, VmafConfiguration, VmafContext, VmafPictureConfiguration, VmafPictureParams,
};
use vmaf_hip::ffi::model::{
    vmaf_model_collection_destroy, vmaf_model_collection_load, vmaf_model_destroy,
    vmaf_model_feature_overload, vmaf_model_load, VmafModel, VmafModelCollection,
    VmafModelCollectionScore, VmafModelConfig,
};
use vmaf_hip::ffi::picture::{vmaf_picture_alloc, vmaf_picture_unref, VmafPicture};
use vmaf_hip::io::{VideoInfo, VideoReader, Y4mReader, YuvReader};
use vmaf_hip::model::{Model, ModelCollection, ModelConfig, ModelFlags};
use vmaf_hip::picture::{Picture, PixelFormat};

/// A target's body.
pub type Target = fn(&[u8]);

/// The targets, by corpus directory name.
pub const TARGETS: &[(&str, Target)] = &[
    ("y4m", y4m),
    ("yuv", yuv),
    ("model_json", model_json),
    ("c_api", c_api),
];

/// Frames read per input at most, so a stream of tiny frames cannot run long.
const MAX_FRAMES: usize = 64;

/// Reads every sample of `pic` (so an inconsistent layout shows up as a panic) and checks the
/// samples fit the depth.
fn touch(pic: &Picture) {
    let max = (1u32 << pic.bpc) - 1;
    for p in 0..pic.pix_fmt.plane_count() {
        for y in 0..pic.h[p] {
            for x in 0..pic.w[p] {
                assert!(u32::from(pic.sample(p, x, y)) <= max);
            }
        }
    }
}

fn read_all(r: &mut dyn VideoReader) {
    let info = r.info();
    let _ = r.frames_left_hint();
    for _ in 0..MAX_FRAMES {
        match r.read_frame() {
            Ok(Some(pic)) => {
                assert_eq!((pic.w[0], pic.h[0]), (info.width, info.height));
                assert_eq!((pic.pix_fmt, pic.bpc), (info.pix_fmt, info.bpc));
                touch(&pic);
            }
            Ok(None) | Err(_) => break,
        }
    }
}

/// y4m: the input is a whole `.y4m` stream.
pub fn y4m(data: &[u8]) {
    if let Ok(mut r) = Y4mReader::new(Cursor::new(data), "fuzz.y4m") {
        read_all(&mut r);
    }
}

/// Raw yuv: byte 0 picks the pixel format (and 4:0:0), byte 1 the depth, bytes 2..4 the width
/// and 4..6 the height (little endian, so sizes up to 65535, which the frame-size check must
/// handle without allocating absurd buffers); the rest is the file.
pub fn yuv(data: &[u8]) {
    if data.len() < 6 {
        return;
    }
    let pix_fmt = match data[0] % 5 {
        0 => PixelFormat::Yuv420p,
        1 => PixelFormat::Yuv422p,
        2 => PixelFormat::Yuv444p,
        3 => PixelFormat::Yuv400p,
        _ => PixelFormat::Unknown,
    };
    let bpc = u32::from(data[1] % 20);
    let width = usize::from(u16::from_le_bytes([data[2], data[3]]));
    let height = usize::from(u16::from_le_bytes([data[4], data[5]]));
    // Keep frames small enough that an input can hold several; absurd sizes still reach the
    // constructor's checks (they only allocate one frame buffer, bounded by MAX_PIXELS).
    let info = VideoInfo {
        width,
        height,
        pix_fmt,
        bpc,
    };
    if let Ok(mut r) = YuvReader::new(Cursor::new(&data[6..]), "fuzz.yuv", info) {
        read_all(&mut r);
    }
}

/// Model JSON: byte 0 picks the flags and whether the text is a single model or a bootstrap
/// collection; the rest is the JSON text. Loaded models predict a few feature vectors.
pub fn model_json(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let cfg = ModelConfig {
        name: None,
        flags: ModelFlags::from_bits_retain(u64::from(sel & 7)),
    };
    let probes = [0.0, 0.5, 1.0, -1.0, 1e300];
    if sel & 8 == 0 {
        if let Ok(m) = Model::load_from_str(text, &cfg) {
            for v in probes {
                let values = vec![v; m.features.len()];
                let _ = m.predict(&values, cfg.flags);
            }
            let _ = m.predict(&[], cfg.flags);
        }
    } else if let Ok((m, mc)) = ModelCollection::load_from_str(text, &cfg) {
        for v in probes {
            let _ = m.predict(&vec![v; m.features.len()], cfg.flags);
            let values: Vec<Vec<f64>> = mc
                .models
                .iter()
                .map(|m| vec![v; m.features.len()])
                .collect();
            let _ = mc.predict(&values);
        }
        let _ = mc.predict(&[]);
    }
}

/// Byte reader for the operation stream; reads past the end give zeros.
struct Ops<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Ops<'_> {
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
    fn u8(&mut self) -> u8 {
        let v = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[usize::from(self.u8()) % from.len()]
    }
    /// A frame index: mostly small, sometimes huge (above the library's limit). Indices in
    /// between are valid and legitimately allocate score storage up to them, so they are
    /// kept below 2^16.
    fn index(&mut self) -> c_uint {
        match self.u8() % 8 {
            0 => match self.u32() {
                v if v as usize >= vmaf_hip::limits::MAX_FRAMES => v,
                v => v & 0xffff,
            },
            1 => c_uint::MAX - c_uint::from(self.u8() % 4),
            _ => c_uint::from(self.u8() % 16),
        }
    }
    /// A picture dimension: 1..=64 (mostly at least 33, which ADM needs), sometimes 0 or
    /// absurd.
    fn dim(&mut self) -> c_uint {
        match self.u8() % 16 {
            // Absurd sizes are all over the library's 65536-sample side limit (or 0): valid big
            // pictures are legitimate, just slow to score.
            0 => self.pick(&[0, (1 << 28) + 1, 1 << 29, 1 << 31, c_uint::MAX]),
            1 => c_uint::from(self.u8() % 4) + 1,
            2..=5 => c_uint::from(self.u8() % 64) + 1,
            _ => c_uint::from(self.u8() % 32) + 33,
        }
    }
}

/// What the harness knows of a picture it holds: the layout as allocated, so sample writes
/// stay in bounds even after the struct's fields were tampered with.
#[derive(Clone, Copy)]
struct Layout {
    bpc: c_uint,
    w: [c_uint; 3],
    h: [c_uint; 3],
    stride: [isize; 3],
    data: [*mut c_void; 3],
    /// Generation of the pool it came from; 0 for `vmaf_picture_alloc`.
    pool_gen: u64,
}

/// The current picture pool: its generation (bumped by every preallocation and close), size,
/// and how many of its pictures may still be out: fetched and not unref'd by us, or handed to
/// `vmaf_read_pictures` (the context may keep those). Fetching with all of them out would block
/// forever, which is the caller's fault, so the harness never does.
#[derive(Default)]
struct Pool {
    gen: u64,
    size: usize,
    out: usize,
}

struct Slot {
    pic: VmafPicture,
    layout: Option<Layout>,
}

const FEATURES: &[&CStr] = &[
    c"vif",
    c"adm",
    c"motion",
    c"psnr",
    c"cambi",
    c"float_ssim",
    c"float_ms_ssim",
    c"speed_chroma",
    c"speed_temporal",
    c"psnr_hvs",
    c"ciede",
    c"float_vif",
    c"",
];
const OPT_KEYS: &[&CStr] = &[
    c"enable_chroma",
    c"enable_lcs",
    c"enable_db",
    c"clip_db",
    c"motion_force_zero",
    c"debug",
    c"enable_transform",
    c"adm_enhn_gain_limit",
    c"vif_enhn_gain_limit",
    c"window_size",
    c"tvi_threshold",
    c"full_ref",
    c"min_sigma",
    c"scales",
    c"bogus",
];
const OPT_VALS: &[&CStr] = &[
    c"true", c"false", c"0", c"1", c"-1", c"2", c"100", c"1e30", c"nan", c"abc", c"",
];
const MODELS: &[&CStr] = &[
    c"vmaf_v0.6.1",
    c"vmaf_v0.6.1neg",
    c"vmaf_4k_v0.6.1",
    c"nope",
];
const SCORE_NAMES: &[&CStr] = &[
    c"vmaf",
    c"VMAF_integer_feature_vif_scale0_score",
    c"VMAF_integer_feature_adm2_score",
    c"VMAF_integer_feature_motion2_score",
    c"integer_motion2",
    c"psnr_y",
    c"float_ssim",
    c"cambi",
    c"imported",
    c"",
];

const SLOTS: usize = 6;

/// A fuzzed option dictionary (NULL or a few entries).
///
/// # Safety
/// Only calls the dictionary API with valid pointers.
unsafe fn fuzz_dict(ops: &mut Ops) -> *mut VmafFeatureDictionary {
    let mut dict: *mut VmafFeatureDictionary = ptr::null_mut();
    for _ in 0..ops.u8() % 4 {
        let (k, v) = (ops.pick(OPT_KEYS), ops.pick(OPT_VALS));
        // SAFETY: `dict` is a valid (NULL or live) handle slot; key and value are C strings.
        unsafe { vmaf_feature_dictionary_set(&mut dict, k.as_ptr(), v.as_ptr()) };
    }
    dict
}

/// Sequences of C API calls decoded from the input, one byte choosing each operation.
/// The harness keeps every pointer it passes valid (that is the caller's contract); everything
/// else — argument values, call order, picture fields — is fuzzed.
pub fn c_api(data: &[u8]) {
    let mut ops = Ops { data, pos: 0 };
    let mut ctx: *mut VmafContext = ptr::null_mut();
    let mut models: Vec<*mut VmafModel> = Vec::new();
    let mut collections: Vec<(*mut VmafModel, *mut VmafModelCollection)> = Vec::new();
    let mut slots: Vec<Slot> = (0..SLOTS)
        .map(|_| Slot {
            // SAFETY: VmafPicture is plain data; all-zero is its empty state.
            pic: unsafe { std::mem::zeroed() },
            layout: None,
        })
        .collect();
    let mut pool = Pool::default();
    let mut n_ops = 0;

    // SAFETY (for every block below): pointers passed are NULL, live handles created in this
    // function, or fields of `slots`; pictures are only written through `Layout`s captured
    // when they were allocated and still referenced.
    while !ops.done() && n_ops < 200 {
        n_ops += 1;
        let op = ops.u8() % 20;
        if tracing() {
            eprintln!("op {op} at byte {}", ops.pos - 1);
        }
        match op {
            0 => {
                if ctx.is_null() {
                    let cfg = VmafConfiguration {
                        log_level: u32::from(tracing()),
                        n_threads: c_uint::from(ops.u8() % 4),
                        n_subsample: c_uint::from(ops.u8() % 3),
                        cpumask: 0,
                        gpumask: u64::MAX,
                    };
                    // SAFETY: `ctx` is writable.
                    trace("init", unsafe { vmaf_init(&mut ctx, cfg) });
                }
            }
            1 => {
                let name = ops.pick(FEATURES);
                let dict = unsafe { fuzz_dict(&mut ops) };
                // SAFETY: see above; the dictionary is handed over (freed by the callee when
                // the name is known, else by us).
                let rc = unsafe { vmaf_use_feature(ctx, name.as_ptr(), dict) };
                if rc != 0 && (ctx.is_null() || !name_known(name)) {
                    let mut d = dict;
                    // SAFETY: `d` is NULL or a live dictionary the callee did not take.
                    unsafe { vmaf_feature_dictionary_free(&mut d) };
                }
            }
            2 => {
                let name = ops.pick(MODELS);
                let mut cfg = VmafModelConfig {
                    name: ptr::null(),
                    flags: u64::from(ops.u8() % 8),
                };
                let mut m: *mut VmafModel = ptr::null_mut();
                // SAFETY: see above.
                if unsafe { vmaf_model_load(&mut m, &mut cfg, name.as_ptr()) } == 0 {
                    models.push(m);
                    // SAFETY: see above.
                    unsafe { vmaf_use_features_from_model(ctx, m) };
                }
            }
            3 => {
                if let Some(&m) = models.last() {
                    let dict = unsafe { fuzz_dict(&mut ops) };
                    let name = ops.pick(FEATURES);
                    // SAFETY: see above; the dictionary is handed over.
                    unsafe { vmaf_model_feature_overload(m, name.as_ptr(), dict) };
                    // SAFETY: see above.
                    unsafe { vmaf_use_features_from_model(ctx, m) };
                }
            }
            4 => {
                if collections.is_empty() && ops.u8().is_multiple_of(4) {
                    let mut cfg = VmafModelConfig {
                        name: c"vmaf_b".as_ptr(),
                        flags: 0,
                    };
                    let mut m: *mut VmafModel = ptr::null_mut();
                    let mut mc: *mut VmafModelCollection = ptr::null_mut();
                    // SAFETY: see above.
                    let rc = unsafe {
                        vmaf_model_collection_load(
                            &mut m,
                            &mut mc,
                            &mut cfg,
                            c"vmaf_b_v0.6.3".as_ptr(),
                        )
                    };
                    if rc == 0 {
                        collections.push((m, mc));
                        // SAFETY: see above.
                        unsafe { vmaf_use_features_from_model_collection(ctx, mc) };
                    }
                }
            }
            5 | 6 => {
                let s = usize::from(ops.u8()) % SLOTS;
                let pix_fmt = c_uint::from(ops.u8() % 6);
                let bpc = match ops.u8() % 8 {
                    0 => c_uint::from(ops.u8()),
                    1..=4 => 8,
                    _ => 10,
                };
                let (w, h) = (ops.dim(), ops.dim());
                release(&mut slots[s], &mut pool);
                // SAFETY: see above.
                let rc = unsafe { vmaf_picture_alloc(&mut slots[s].pic, pix_fmt, bpc, w, h) };
                trace(&format!("alloc {s} fmt {pix_fmt} bpc {bpc} {w}x{h}"), rc);
                if rc == 0 {
                    slots[s].layout = Some(capture(&slots[s].pic, 0));
                }
            }
            7 | 8 => {
                let s = usize::from(ops.u8()) % SLOTS;
                let (mode, val) = (ops.u8(), ops.u16());
                if let Some(l) = slots[s].layout {
                    // SAFETY: the layout was captured from a live picture we still hold.
                    unsafe { write_samples(&l, mode, val) };
                }
            }
            9 | 10 => {
                let (a, b) = (usize::from(ops.u8()) % SLOTS, usize::from(ops.u8()) % SLOTS);
                let index = ops.index();
                let pa: *mut VmafPicture = &mut slots[a].pic;
                let pb: *mut VmafPicture = &mut slots[b].pic;
                // SAFETY: see above; both pictures are given up, whatever the result.
                trace("read", unsafe { vmaf_read_pictures(ctx, pa, pb, index) });
                for s in [a, b] {
                    if slots[s].pic.r#ref.is_null() {
                        slots[s].layout = None;
                    }
                }
            }
            11 => {
                // SAFETY: see above.
                trace("flush", unsafe {
                    vmaf_read_pictures(ctx, ptr::null_mut(), ptr::null_mut(), 0)
                });
            }
            12 => {
                let mut score = 0.0;
                let index = ops.index();
                let sel = ops.u8();
                if let Some(&m) = models.get(usize::from(sel) % models.len().max(1)) {
                    // SAFETY: see above.
                    trace("score", unsafe {
                        vmaf_score_at_index(ctx, m, &mut score, index)
                    });
                }
                if let Some(&(m, mc)) = collections.first() {
                    let mut s: VmafModelCollectionScore = unsafe { std::mem::zeroed() };
                    // SAFETY: see above.
                    unsafe {
                        vmaf_score_at_index(ctx, m, &mut score, index);
                        vmaf_score_at_index_model_collection(ctx, mc, &mut s, index);
                    }
                }
            }
            13 => {
                let mut score = 0.0;
                let method = c_uint::from(ops.u8() % 7);
                let (lo, hi) = (ops.index(), ops.index());
                let sel = ops.u8();
                if let Some(&m) = models.get(usize::from(sel) % models.len().max(1)) {
                    // SAFETY: see above.
                    trace("pooled", unsafe {
                        vmaf_score_pooled(ctx, m, method, &mut score, lo, hi)
                    });
                }
                if let Some(&(_, mc)) = collections.first() {
                    let mut s: VmafModelCollectionScore = unsafe { std::mem::zeroed() };
                    // SAFETY: see above.
                    unsafe { vmaf_score_pooled_model_collection(ctx, mc, method, &mut s, lo, hi) };
                }
            }
            14 => {
                let name = ops.pick(SCORE_NAMES);
                let mut score = 0.0;
                let (method, lo, hi) = (c_uint::from(ops.u8() % 7), ops.index(), ops.index());
                // SAFETY: see above.
                unsafe {
                    vmaf_feature_score_at_index(ctx, name.as_ptr(), &mut score, lo);
                    vmaf_feature_score_pooled(ctx, name.as_ptr(), method, &mut score, lo, hi);
                }
            }
            15 => {
                let name = ops.pick(SCORE_NAMES);
                let value = f64::from(ops.u16() as i16) / 7.0;
                let index = ops.index();
                // SAFETY: see above.
                trace("import", unsafe {
                    vmaf_import_feature_score(ctx, name.as_ptr(), value, index)
                });
            }
            16 => {
                let cfg = VmafPictureConfiguration {
                    pic_params: VmafPictureParams {
                        w: ops.dim(),
                        h: ops.dim(),
                        bpc: if ops.u8().is_multiple_of(4) { 10 } else { 8 },
                        pix_fmt: c_uint::from(ops.u8() % 6),
                    },
                    pic_cnt: c_uint::from(ops.u8() % 4),
                };
                // SAFETY: see above.
                if unsafe { vmaf_preallocate_pictures(ctx, cfg) } == 0 {
                    pool.gen += 1;
                    pool.size = cfg.pic_cnt as usize;
                    pool.out = 0;
                }
            }
            17 => {
                let s = usize::from(ops.u8()) % SLOTS;
                release(&mut slots[s], &mut pool);
                if pool.out < pool.size && !ctx.is_null() {
                    // SAFETY: see above.
                    if unsafe { vmaf_fetch_preallocated_picture(ctx, &mut slots[s].pic) } == 0 {
                        pool.out += 1;
                        slots[s].layout = Some(capture(&slots[s].pic, pool.gen));
                    }
                }
            }
            18 => {
                let s = usize::from(ops.u8()) % SLOTS;
                match ops.u8() % 6 {
                    // Tamper with a field: vmaf_read_pictures must refuse the picture.
                    0 => slots[s].pic.w[0] = slots[s].pic.w[0].wrapping_add(1),
                    1 => slots[s].pic.bpc ^= 2,
                    2 => slots[s].pic.pix_fmt = c_uint::from(ops.u8()),
                    3 => slots[s].pic.stride[1] += 1,
                    _ => release(&mut slots[s], &mut pool),
                }
            }
            _ => {
                if ops.u8().is_multiple_of(4) {
                    let fmt = c_uint::from(ops.u8() % 6);
                    // SAFETY: see above.
                    unsafe { vmaf_write_output(ctx, c"/dev/null".as_ptr(), fmt) };
                } else if !ctx.is_null() {
                    // SAFETY: see above; the handle is not used afterwards.
                    unsafe { vmaf_close(ctx) };
                    ctx = ptr::null_mut();
                    pool = Pool {
                        gen: pool.gen + 1,
                        ..Pool::default()
                    };
                }
            }
        }
    }

    for s in &mut slots {
        release(s, &mut pool);
    }
    // SAFETY: live handles created above, each freed once.
    unsafe {
        if !ctx.is_null() {
            vmaf_close(ctx);
        }
        for m in models {
            vmaf_model_destroy(m);
        }
        for (m, mc) in collections {
            vmaf_model_destroy(m);
            vmaf_model_collection_destroy(mc);
        }
    }
}

/// With `VMAF_FUZZ_TRACE` set, prints each traced call's result (for looking into an input).
/// Error lines of the library are logged then too.
fn trace(what: &str, rc: std::ffi::c_int) {
    if tracing() {
        eprintln!("{what}: {rc}");
    }
}

fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("VMAF_FUZZ_TRACE").is_some())
}

fn name_known(name: &CStr) -> bool {
    name.to_str()
        .is_ok_and(|n| vmaf_hip::feature::extractor_names().any(|k| k == n))
}

fn capture(pic: &VmafPicture, pool_gen: u64) -> Layout {
    Layout {
        bpc: pic.bpc,
        w: pic.w,
        h: pic.h,
        stride: pic.stride,
        data: pic.data,
        pool_gen,
    }
}

/// Unrefs the picture in `slot` if we hold one (a pooled one goes back to its pool).
fn release(slot: &mut Slot, pool: &mut Pool) {
    if slot.pic.r#ref.is_null() {
        slot.layout = None;
        return;
    }
    // SAFETY: a picture filled by the library and still referenced.
    unsafe { vmaf_picture_unref(&mut slot.pic) };
    if slot
        .layout
        .is_some_and(|l| l.pool_gen != 0 && l.pool_gen == pool.gen)
    {
        pool.out = pool.out.saturating_sub(1);
    }
    slot.layout = None;
}

/// Fills a picture's planes: `mode` picks a pattern, `val` its value (possibly out of range
/// for the depth, which the library must reject or tolerate, never misbehave on).
///
/// # Safety
/// `l` describes a live picture.
unsafe fn write_samples(l: &Layout, mode: u8, val: u16) {
    // Big (absurd-size but allocatable) pictures keep their zeros: filling them is slow.
    if l.w[0] > 64 || l.h[0] > 64 {
        return;
    }
    let in_range = mode & 1 == 0;
    for p in 0..3 {
        if l.data[p].is_null() {
            continue;
        }
        for y in 0..l.h[p] as usize {
            for x in 0..l.w[p] as usize {
                let v = match mode >> 1 & 3 {
                    0 => val,
                    1 => val.wrapping_add((x * 7 + y * 13) as u16),
                    2 => val ^ ((x ^ y) as u16).wrapping_mul(0x9e37),
                    _ => (x as u16).wrapping_mul(val),
                };
                let v = if in_range {
                    v & ((1u32 << l.bpc.min(16)) - 1) as u16
                } else {
                    v
                };
                // SAFETY: (x, y) lies inside plane p of the live picture `l` describes.
                unsafe {
                    let row = l.data[p].cast::<u8>().offset(y as isize * l.stride[p]);
                    if l.bpc == 8 {
                        *row.add(x) = v as u8;
                    } else {
                        *row.cast::<u16>().add(x) = v;
                    }
                }
            }
        }
    }
}

/// Replays one input file against `target`.
pub fn replay(target: &str, data: &[u8]) {
    let f = TARGETS
        .iter()
        .find(|(n, _)| *n == target)
        .unwrap_or_else(|| panic!("no fuzz target {target}"))
        .1;
    f(data);
}
