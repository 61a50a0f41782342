//! The driver on small synthetic files: frame `k` of a reference has flat luma `4k`, frame `k`
//! of a distorted video flat luma `k`, so each frame's PSNR says which two frames were paired.

use std::io::ErrorKind;
use std::path::PathBuf;

use super::*;
use crate::context::Config;
use crate::feature::Dict;
use crate::log::LogLevel;
use crate::picture::PixelFormat;

const W: usize = 16;
const H: usize = 8;

/// A fresh directory for test `name`.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vmaf-driver-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One 4:2:0 frame's samples: luma `y`, chroma mid-grey, at `bpc` bits (little endian above 8).
fn planes(w: usize, h: usize, bpc: u32, y: u16) -> Vec<u8> {
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let mid = 1u16 << (bpc - 1);
    let samples = std::iter::repeat_n(y, w * h).chain(std::iter::repeat_n(mid, 2 * cw * ch));
    if bpc == 8 {
        samples.map(|v| v as u8).collect()
    } else {
        samples.flat_map(u16::to_le_bytes).collect()
    }
}

/// A y4m file of `lumas.len()` frames; `frame` is each frame's header line.
fn y4m_with(path: &Path, (w, h): (usize, usize), bpc: u32, lumas: &[u16], frame: &str) -> PathBuf {
    let cs = if bpc == 8 {
        "420jpeg".into()
    } else {
        format!("420p{bpc}")
    };
    let mut data = format!("YUV4MPEG2 W{w} H{h} F25:1 Ip A1:1 C{cs}\n").into_bytes();
    for &y in lumas {
        data.extend_from_slice(frame.as_bytes());
        data.extend(planes(w, h, bpc, y));
    }
    std::fs::write(path, data).unwrap();
    path.to_path_buf()
}

/// An 8-bit y4m file with bare `FRAME` headers (read by position).
fn y4m(path: &Path, lumas: &[u16]) -> PathBuf {
    y4m_with(path, (W, H), 8, lumas, "FRAME\n")
}

fn raw(path: &Path, lumas: &[u16]) -> PathBuf {
    let data: Vec<u8> = lumas.iter().flat_map(|&y| planes(W, H, 8, y)).collect();
    std::fs::write(path, data).unwrap();
    path.to_path_buf()
}

fn refs(n: u16) -> Vec<u16> {
    (0..n).map(|k| 4 * k).collect()
}

fn dists(n: u16) -> Vec<u16> {
    (0..n).collect()
}

/// The PSNR of flat `bpc`-bit planes `d` apart, as the psnr extractor computes it (capped at
/// `6 bpc + 12`).
fn psnr(d: i32, bpc: u32) -> f64 {
    let (peak, mse) = ((1u32 << bpc) - 1, f64::from(d * d));
    (10.0 * (f64::from(peak * peak) / mse.max(1e-16)).log10()).min(f64::from(6 * bpc + 12))
}

fn context(n_subsample: u32) -> Context {
    let mut ctx = Context::new(Config {
        log_level: LogLevel::Warning,
        n_subsample,
        ..Config::default()
    })
    .unwrap();
    ctx.use_feature("psnr", &Dict::new()).unwrap();
    ctx
}

fn psnr_y(ctx: &Context, n: usize) -> f64 {
    ctx.feature_score_at_index("psnr_y", n).unwrap()
}

/// What a [`Progress`] heard.
#[derive(Debug, Default, PartialEq)]
struct Heard {
    start: Option<Option<u64>>,
    advanced: usize,
    warnings: Vec<String>,
    finish: Option<usize>,
}

impl Progress for Heard {
    fn start(&mut self, frames: Option<u64>) {
        self.start = Some(frames);
    }
    fn advance(&mut self) {
        self.advanced += 1;
    }
    fn warning(&mut self, message: &str) {
        self.warnings.push(message.into());
    }
    fn finish(&mut self, frames: usize) {
        self.finish = Some(frames);
    }
}

/// Scores `opts` with a PSNR context; the frames scored and what progress heard.
fn run(opts: Options, ctx: &mut Context) -> (Result<usize, Error>, Heard) {
    let mut heard = Heard::default();
    let res = Inputs::open(opts).and_then(|i| i.score(ctx, &mut heard));
    (res, heard)
}

fn message(e: Error) -> String {
    match e.library() {
        crate::Error::Invalid(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Every frame pair in order, whichever way the inputs are read: y4m by position (several
/// threads, no frames ahead), y4m in order (frame headers with parameters), raw by position.
#[test]
fn scores_every_pair_in_order() {
    let d = dir("order");
    let cases = [
        (
            y4m(&d.join("r.y4m"), &refs(5)),
            y4m(&d.join("d.y4m"), &dists(5)),
            None,
        ),
        (
            y4m_with(&d.join("rp.y4m"), (W, H), 8, &refs(5), "FRAME Ip\n"),
            y4m_with(&d.join("dp.y4m"), (W, H), 8, &dists(5), "FRAME Ip\n"),
            None,
        ),
        (
            raw(&d.join("r.yuv"), &refs(5)),
            raw(&d.join("d.yuv"), &dists(5)),
            Some(VideoInfo {
                width: W,
                height: H,
                pix_fmt: PixelFormat::Yuv420p,
                bpc: 8,
            }),
        ),
    ];
    for (r, dist, raw) in cases {
        for (readers, depth) in [(Some(3), 0), (Some(1), READ_AHEAD), (None, 1)] {
            let opts = Options {
                raw,
                readers,
                read_ahead: depth,
                ..Options::new(&r, &dist)
            };
            let mut ctx = context(1);
            let (res, heard) = run(opts, &mut ctx);
            assert_eq!(res.unwrap(), 5, "{}", r.display());
            assert!(ctx.is_flushed());
            let got: Vec<f64> = (0..5).map(|n| psnr_y(&ctx, n)).collect();
            let want: Vec<f64> = (0..5).map(|n| psnr(3 * n, 8)).collect();
            assert_eq!(got, want, "{} with {readers:?} readers", r.display());
            assert_eq!(
                heard,
                Heard {
                    start: Some(Some(5)),
                    advanced: 5,
                    warnings: vec![],
                    finish: Some(5),
                }
            );
        }
    }
}

/// Each input skips its own first frames; the shorter one ends the scoring with a warning.
#[test]
fn skips_each_input_on_its_own() {
    let d = dir("skip");
    let (r, dist) = (
        y4m(&d.join("r.y4m"), &refs(5)),
        y4m(&d.join("d.y4m"), &dists(5)),
    );
    let mut ctx = context(1);
    let opts = Options {
        frame_skip_ref: 2,
        frame_skip_dist: 1,
        ..Options::new(&r, &dist)
    };
    let (res, heard) = run(opts, &mut ctx);
    assert_eq!(res.unwrap(), 3);
    // Pair n: reference frame n + 2 (luma 4n + 8), distorted frame n + 1.
    let got: Vec<f64> = (0..3).map(|n| psnr_y(&ctx, n)).collect();
    assert_eq!(got, [psnr(7, 8), psnr(10, 8), psnr(13, 8)]);
    assert!(ctx.feature_score_at_index("psnr_y", 3).is_err());
    assert_eq!(heard.start, Some(Some(3)));
    assert_eq!(
        heard.warnings,
        [format!(
            "{} ended before {}; scoring the first 3 frames",
            r.display(),
            dist.display()
        )]
    );
    assert_eq!(heard.finish, Some(3));

    // Skipping past an end leaves nothing to score.
    let opts = Options {
        frame_skip_dist: 9,
        ..Options::new(&r, &dist)
    };
    let (res, heard) = run(opts, &mut context(1));
    assert_eq!(
        message(res.unwrap_err()),
        "no frames to score in the inputs after skipping"
    );
    assert_eq!((heard.start, heard.finish), (Some(Some(0)), Some(0)));
}

/// The frame count stops the reading: a damaged frame past it is never read.
#[test]
fn frame_count_limits_the_frames_read() {
    let d = dir("count");
    let r = y4m(&d.join("r.y4m"), &refs(5));
    let full = y4m(&d.join("d.y4m"), &dists(5));
    let data = std::fs::read(&full).unwrap();
    let cut = d.join("cut.y4m");
    std::fs::write(&cut, &data[..data.len() - 10]).unwrap();
    for dist in [&full, &cut] {
        let mut ctx = context(1);
        let opts = Options {
            frame_cnt: 2,
            frame_skip_dist: 1,
            ..Options::new(&r, dist)
        };
        let (res, heard) = run(opts, &mut ctx);
        assert_eq!(res.unwrap(), 2);
        assert_eq!(psnr_y(&ctx, 0), psnr(1, 8));
        assert_eq!(psnr_y(&ctx, 1), psnr(2, 8));
        assert!(heard.warnings.is_empty());
        assert_eq!(heard.start, Some(Some(2)));
    }
}

/// A truncated last frame fails at that frame, naming the file; the frames before it were
/// scored. A file of no frames at all says so.
#[test]
fn truncated_and_empty_inputs_fail() {
    let d = dir("truncated");
    let r = y4m(&d.join("r.y4m"), &refs(5));
    let full = std::fs::read(y4m(&d.join("d.y4m"), &dists(5))).unwrap();
    let cut = d.join("cut.y4m");
    std::fs::write(&cut, &full[..full.len() - 10]).unwrap();
    let mut ctx = context(1);
    let mut heard = Heard::default();
    let e = Inputs::open(Options::new(&r, &cut))
        .unwrap()
        .score(&mut ctx, &mut heard)
        .unwrap_err();
    let frame = W * H * 3 / 2;
    assert_eq!(
        message(e),
        format!(
            "{}: frame 4: truncated: {} of {frame} bytes of frame data",
            cut.display(),
            frame - 10
        )
    );
    assert_eq!(heard.advanced, 4);
    assert_eq!(heard.finish, None);
    assert_eq!(psnr_y(&ctx, 3), psnr(9, 8));

    let empty = y4m(&d.join("empty.y4m"), &[]);
    let (res, _) = run(Options::new(&empty, &cut), &mut context(1));
    assert_eq!(
        message(res.unwrap_err()),
        format!("no frames to score in {}", empty.display())
    );
}

#[test]
fn mismatched_inputs_are_refused_before_reading() {
    let d = dir("mismatch");
    let r = y4m(&d.join("r.y4m"), &refs(2));
    let wide = y4m_with(&d.join("wide.y4m"), (2 * W, H), 8, &dists(2), "FRAME\n");
    let deep = y4m_with(&d.join("deep.y4m"), (W, H), 10, &dists(2), "FRAME\n");
    let e = Inputs::open(Options::new(&r, &wide)).err().unwrap();
    assert_eq!(
        message(e),
        format!(
            "{} and {} are incompatible: dimensions differ (16x8 vs 32x8)",
            r.display(),
            wide.display()
        )
    );
    let e = Inputs::open(Options::new(&r, &deep)).err().unwrap();
    assert!(
        message(e).ends_with("are incompatible: bit depths differ (8 vs 10)"),
        "bit depths"
    );
    let missing = d.join("missing.y4m");
    let e = Inputs::open(Options::new(&missing, &r)).err().unwrap();
    assert!(
        matches!(e.library(), crate::Error::Io { source, .. } if source.kind() == ErrorKind::NotFound),
        "{e}"
    );
}

/// With `common_bitdepth`, an 8-bit reference is scored against a 10-bit distorted video
/// at 10 bits: luma 4k becomes 16k.
#[test]
fn common_bitdepth_shifts_the_shallower_input() {
    let d = dir("depth");
    let r = y4m(&d.join("r.y4m"), &refs(3));
    let dist = y4m_with(&d.join("d10.y4m"), (W, H), 10, &[0, 20, 900], "FRAME\n");
    let mut ctx = context(1);
    let opts = Options {
        common_bitdepth: true,
        ..Options::new(&r, &dist)
    };
    let (res, _) = run(opts, &mut ctx);
    assert_eq!(res.unwrap(), 3);
    let got: Vec<f64> = (0..3).map(|n| psnr_y(&ctx, n)).collect();
    assert_eq!(got, [psnr(0, 10), psnr(16 - 20, 10), psnr(32 - 900, 10)]);
}

#[test]
fn shift_to_common_depth() {
    let mut p = PictureData::new(PixelFormat::Yuv420p, 8, 5, 3).unwrap();
    p.plane_u8_mut(0)[1] = 200;
    p.plane_u8_mut(2)[0] = 7;
    let q = Arc::new(PictureData::new(PixelFormat::Yuv420p, 10, 5, 3).unwrap());
    let (r, d) = common_depth(Arc::new(p), q).unwrap();
    assert_eq!((r.bpc, d.bpc), (10, 10));
    assert_eq!(r.sample(0, 1, 0), 800);
    assert_eq!(r.sample(2, 0, 0), 28);
    assert_eq!(r.sample(0, 4, 2), 0);
}

/// Every frame is read and handed over; the context scores every second one.
#[test]
fn subsampling_is_the_contexts() {
    let d = dir("subsample");
    let (r, dist) = (
        y4m(&d.join("r.y4m"), &refs(5)),
        y4m(&d.join("d.y4m"), &dists(5)),
    );
    let mut ctx = context(2);
    ctx.use_feature("float_psnr", &Dict::new()).unwrap();
    let (res, heard) = run(Options::new(&r, &dist), &mut ctx);
    assert_eq!(res.unwrap(), 5);
    assert_eq!(heard.advanced, 5);
    // psnr is temporal (its APSNR sums every frame): the context extracts it on each one.
    for n in 0..5 {
        assert_eq!(psnr_y(&ctx, n), psnr(3 * n as i32, 8));
    }
    for n in [2, 4] {
        let got = ctx.feature_score_at_index("float_psnr", n).unwrap();
        assert!(
            (got - psnr(3 * n as i32, 8)).abs() < 1e-4,
            "frame {n}: {got}"
        );
    }
    for n in [1, 3] {
        assert!(
            ctx.feature_score_at_index("float_psnr", n).is_err(),
            "frame {n}"
        );
    }
}

/// Pooling gives each model's mean over the frames scored, as `score_pooled` does.
#[test]
fn pools_each_model() {
    let d = dir("pool");
    // The model's extractors take pictures of 33x33 or more.
    let (r, dist) = (
        y4m_with(&d.join("r.y4m"), (48, 40), 8, &refs(3), "FRAME\n"),
        y4m_with(&d.join("d.y4m"), (48, 40), 8, &[7, 30, 2], "FRAME\n"),
    );
    let models = [crate::model::ModelSpec::default_model().load().unwrap()];
    let mut ctx = context(1);
    models[0].register(&mut ctx).unwrap();
    assert_eq!(
        message(pool(&ctx, &models, 0).unwrap_err()),
        "no frames were scored"
    );
    let (res, _) = run(Options::new(&r, &dist), &mut ctx);
    let frames = res.unwrap();
    let pooled = pool(&ctx, &models, frames).unwrap();
    let per_frame: Vec<f64> = (0..3)
        .map(|n| ctx.score_at_index(&models[0].model, n).unwrap())
        .collect();
    let mean = per_frame.iter().sum::<f64>() / 3.0;
    match &pooled[..] {
        [Pooled::Model { label, score }] => {
            assert_eq!(label, "vmaf_v0.6.1");
            assert!((score - mean).abs() < 1e-12, "{score} vs {mean}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn cancelling_stops_before_the_next_frame() {
    let d = dir("cancel");
    let (r, dist) = (
        y4m(&d.join("r.y4m"), &refs(3)),
        y4m(&d.join("d.y4m"), &dists(3)),
    );
    let flag = Arc::new(AtomicBool::new(true));
    let opts = Options {
        cancel: Some(flag),
        ..Options::new(&r, &dist)
    };
    let (res, heard) = run(opts, &mut context(1));
    let e = res.unwrap_err();
    match e.library() {
        crate::Error::Io { context, source } => {
            assert_eq!(context, "scoring cancelled at frame 0");
            assert_eq!(source.kind(), ErrorKind::Interrupted);
        }
        other => panic!("{other}"),
    }
    assert_eq!(heard.advanced, 0);
}

/// A step's name goes in front of the message, keeping the kind; as it is, the library's
/// error prints after it.
#[test]
fn errors_name_their_step() {
    let e = Error::within("frame 3")(crate::Error::NoMem("no room".into()));
    assert_eq!(e.to_string(), "frame 3: out of memory: no room");
    let lib: crate::Error = e.into();
    assert!(
        matches!(&lib, crate::Error::NoMem(m) if m == "frame 3: no room"),
        "{lib}"
    );
    let e = Error::from(crate::Error::inval("bad"));
    assert_eq!(crate::Error::from(e).to_string(), "invalid argument: bad");
}

/// GPU workers take the cores the two inputs' readers leave, at least 2 and at most 16.
#[test]
fn gpu_workers_leave_the_readers_their_cores() {
    assert_eq!(workers_beside_readers(16, 4), 8);
    assert_eq!(workers_beside_readers(8, 2), 4);
    assert_eq!(workers_beside_readers(4, 1), 2);
    assert_eq!(workers_beside_readers(2, 1), 2);
    assert_eq!(workers_beside_readers(1, 1), 2);
    assert_eq!(workers_beside_readers(64, 4), 16);
    assert_eq!(workers_beside_readers(20, 1), 16);
}

/// Without a GPU state the tool keeps the CPU's rule for `--threads 0`.
#[test]
fn gpu_workers_need_a_gpu_state() {
    assert_eq!(gpu_workers(None, &[]), None);
    assert_eq!(gpu_workers(Some(4), &[]), None);
}

/// A thread count asked for, or a GPU turned off by the mask, stands; without a GPU state the
/// CPU's rule (0) stands too.
#[test]
fn fed_contexts_keep_what_was_asked() {
    assert_eq!(fed_context_threads(6, 0, &[]), 6);
    assert_eq!(fed_context_threads(0, 1, &[]), 0);
    assert_eq!(fed_context_threads(0, 0, &[]), 0);
}
