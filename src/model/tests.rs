//! Model tests: built-in model parsing, prediction against full-precision upstream goldens
//! (shared docs, Appendix C), bootstrap statistics, transforms and loading by path.

use std::path::{Path, PathBuf};

use super::*;

/// Upstream per-frame values (`%.17g`): `[vmaf, adm2, motion2, vif0, vif1, vif2, vif3]`.
type Row = [f64; 7];

/// G8: 576x324 8-bit, 8 frames.
#[allow(clippy::excessive_precision)]
#[rustfmt::skip]
const G8: &[Row] = &[
    [86.010336843258131, 0.9480667971160901, 0.0, 0.39777830243110657, 0.97453099489212036, 0.98795759677886963, 0.99596810340881348],
    [97.44674278069472, 0.93560024176691492, 13.586912806632588, 0.39817845821380615, 0.97406250238418579, 0.9866710901260376, 0.99083185195922852],
    [98.768518424928018, 0.94181928246378765, 13.566933588726531, 0.39786064624786377, 0.97420781850814819, 0.98676925897598267, 0.99096560478210449],
    [95.845750448288527, 0.92614249034072482, 13.566933588726531, 0.39780887961387634, 0.97428673505783081, 0.98765319585800171, 0.99568712711334229],
    [98.965867693805706, 0.94296030339005787, 13.560588653522592, 0.39776685833930969, 0.97435903549194336, 0.98758554458618164, 0.99000966548919678],
    [98.630620540230225, 0.94050053140998402, 13.529131623779632, 0.3977382481098175, 0.97448235750198364, 0.98684990406036377, 0.99315273761749268],
    [97.846231645882909, 0.93688586628922255, 13.529131623779632, 0.39791828393936157, 0.97425436973571777, 0.98684805631637573, 0.9929843544960022],
    [96.806799056175791, 0.93269769321445561, 13.554857000238448, 0.39808598160743713, 0.97447794675827026, 0.98786890506744385, 0.99025923013687134],
];

/// G10: 576x324 10-bit, 6 frames.
#[allow(clippy::excessive_precision)]
#[rustfmt::skip]
const G10: &[Row] = &[
    [86.014959533586463, 0.94808833914492696, 0.0, 0.39779287576675415, 0.97453087568283081, 0.98794633150100708, 0.99597561359405518],
    [97.440724936843424, 0.93558860704491187, 13.586829898452235, 0.39820012450218201, 0.97406047582626343, 0.98667317628860474, 0.99078691005706787],
    [98.772475571188636, 0.94184898967850694, 13.567666136188272, 0.39787259697914124, 0.97421282529830933, 0.98677241802215576, 0.99092507362365723],
    [95.846494101238761, 0.92614786339979727, 13.567666136188272, 0.39782068133354187, 0.97428280115127563, 0.9876587986946106, 0.99567049741744995],
    [98.975061695362498, 0.94298833152586736, 13.561022765024862, 0.39779090881347656, 0.9743608832359314, 0.9875836968421936, 0.99004554748535156],
    [98.66572802821274, 0.94052337668892838, 13.561022765024862, 0.39775800704956055, 0.97447705268859863, 0.98684394359588623, 0.9931645393371582],
];

/// GS: 97x61 8-bit, 4 frames, scalar C.
#[allow(clippy::excessive_precision)]
#[rustfmt::skip]
const GS: &[Row] = &[
    [85.570658304654302, 0.94616608307298122, 0.0, 0.38704228401184082, 0.97437494993209839, 0.98758566379547119, 0.99526166915893555],
    [98.130631191731482, 0.93796431991447815, 13.943092994760859, 0.39066272974014282, 0.97336715459823608, 0.98588311672210693, 0.98955458402633667],
    [98.712769608487662, 0.94047662482834926, 13.971626378443467, 0.39009353518486023, 0.97466838359832764, 0.98704946041107178, 0.98914223909378052],
    [95.78111702475401, 0.92437132630865493, 14.128590686792293, 0.38964995741844177, 0.9750637412071228, 0.9873088002204895, 0.99337172508239746],
];

/// GID: G8 reference against itself (exercises the clip at 100).
#[allow(clippy::excessive_precision)]
#[rustfmt::skip]
const GID: &[Row] = &[
    [97.428627952777347, 1.000002729344041, 0.0, 1.0, 1.0, 1.0, 0.99999988079071045],
    [100.0, 1.0000021868702293, 13.586912806632588, 1.0, 0.99999988079071045, 1.0, 0.99999988079071045],
    [100.0, 1.0000027918211229, 13.566933588726531, 1.0, 1.0, 0.99999988079071045, 1.0],
    [100.0, 1.0000022554841179, 13.566933588726531, 1.0, 1.0, 1.0, 0.99999994039535522],
    [100.0, 1.000002740781238, 13.560588653522592, 1.0, 0.99999988079071045, 1.0, 0.99999988079071045],
    [100.0, 1.0000022566939852, 13.529131623779632, 1.0, 0.99999988079071045, 1.0, 1.0],
    [100.0, 1.0000027492416934, 13.529131623779632, 1.0, 1.0, 1.0, 0.99999988079071045],
    [100.0, 1.0000021877968572, 13.554857000238448, 1.0, 1.0, 1.0, 1.0],
];

const V061_FEATURES: [&str; 6] = [
    "VMAF_integer_feature_adm2_score",
    "VMAF_integer_feature_motion2_score",
    "VMAF_integer_feature_vif_scale0_score",
    "VMAF_integer_feature_vif_scale1_score",
    "VMAF_integer_feature_vif_scale2_score",
    "VMAF_integer_feature_vif_scale3_score",
];

fn cfg(name: Option<&str>, flags: ModelFlags) -> ModelConfig {
    ModelConfig {
        name: name.map(str::to_string),
        flags,
    }
}

fn features(row: &Row) -> Vec<f64> {
    row[1..].to_vec()
}

fn names(m: &Model) -> Vec<&str> {
    m.features.iter().map(|f| f.name.as_str()).collect()
}

/// Pooled mean as libvmaf computes it (sequential sum / count).
fn mean(v: &[f64]) -> f64 {
    let mut s = 0.0;
    for &x in v {
        s += x;
    }
    s / v.len() as f64
}

#[test]
fn parses_builtin_models() {
    let m = Model::load("vmaf_v0.6.1", &ModelConfig::default()).unwrap();
    assert_eq!(m.name, "vmaf");
    assert_eq!(names(&m), V061_FEATURES);
    assert!(m.features.iter().all(|f| f.opts.is_empty()));
    let p = &m.params;
    assert_eq!(p.kind, ModelKind::SvmNuSvr);
    assert_eq!(p.norm, Norm::LinearRescale);
    assert_eq!(p.svm.len(), 211);
    assert_eq!(p.slope, 0.012020766332648465);
    assert_eq!(p.intercept, -0.3092981927591963);
    let slopes = [
        2.8098077502505414,
        0.06264407466686016,
        1.222763456258933,
        1.5360318811084146,
        1.7620864995501058,
        2.08656468286432,
    ];
    let intercepts = [
        -1.7993968597186747,
        -0.003017198086831897,
        -0.1728125095425364,
        -0.5294309090081222,
        -0.7577185792093722,
        -1.083428597549764,
    ];
    let want: Vec<(f64, f64)> = slopes.into_iter().zip(intercepts).collect();
    assert_eq!(p.feature_norm, want);
    assert_eq!(p.clip, Some((0.0, 100.0)));
    let t = &p.transform;
    assert!(!t.enabled);
    assert_eq!(
        (t.p0, t.p1, t.p2),
        (Some(1.70674692), Some(1.72643844), Some(-0.00705305))
    );
    assert!(t.out_gte_in && !t.out_lte_in && t.knots.is_none());
    assert_eq!(p.chroma_correction, None);

    let neg = Model::load(
        "vmaf_v0.6.1neg",
        &cfg(Some("vmaf_neg"), ModelFlags::empty()),
    )
    .unwrap();
    assert_eq!(neg.name, "vmaf_neg");
    assert_eq!(names(&neg), V061_FEATURES);
    assert_eq!(neg.params.svm.len(), 211);
    let opts: Vec<Vec<(&str, &str)>> = neg
        .features
        .iter()
        .map(|f| f.opts.iter().collect())
        .collect();
    assert_eq!(opts[0], [("adm_enhn_gain_limit", "1")]);
    assert!(opts[1].is_empty());
    for o in &opts[2..] {
        assert_eq!(o, &[("vif_enhn_gain_limit", "1")]);
    }

    let k4 = Model::load("vmaf_4k_v0.6.1", &ModelConfig::default()).unwrap();
    assert_eq!(names(&k4), V061_FEATURES);
    assert_eq!(k4.params.svm.len(), 262);
    assert_eq!(k4.params.slope, 0.012388059998472608);
    assert_eq!(
        k4.params.feature_norm[1],
        (0.05141551931924402, -0.01336836451078975)
    );
    // serde_json's default float parser is off by one ulp on this one; the crate enables
    // float_roundtrip so JSON numbers are correctly rounded like strtod.
    assert_eq!(k4.params.feature_norm[2].1, -0.09603743694887917);
    assert!(!k4.params.transform.enabled);

    let (m0, mc) = ModelCollection::load("vmaf_b_v0.6.3", &ModelConfig::default()).unwrap();
    assert_eq!(m0.name, "vmaf");
    assert_eq!(m0.params.svm.len(), 210);
    assert_eq!(m0.params.kind, ModelKind::BootstrapSvmNuSvr);
    assert_eq!(mc.name, "vmaf");
    assert_eq!(mc.models.len(), 20);
    assert_eq!(mc.models[0].name, "vmaf_0001");
    assert_eq!(mc.models[19].name, "vmaf_0020");
    assert_eq!(mc.models[0].params.svm.len(), 214);
    for m in &mc.models {
        assert_eq!(names(m), V061_FEATURES);
    }
    let (_, named) =
        ModelCollection::load("vmaf_b_v0.6.3", &cfg(Some("b"), ModelFlags::empty())).unwrap();
    assert_eq!(named.name, "b");
    assert_eq!(named.models[8].name, "b_0009");
    assert_eq!(named.models[9].name, "b_0010");

    assert_eq!(
        builtin_versions().collect::<Vec<_>>(),
        [
            "vmaf_float_v0.6.1",
            "vmaf_float_b_v0.6.3",
            "vmaf_float_v0.6.1neg",
            "vmaf_float_4k_v0.6.1",
            "vmaf_v0.6.1",
            "vmaf_b_v0.6.3",
            "vmaf_v0.6.1neg",
            "vmaf_4k_v0.6.1",
            "vmaf_4k_v0.6.1neg",
            "vmaf_v1.0.16_3d0h",
            "vmaf_v1.0.16_3d0h_2160",
            "vmaf_v1.0.16_5d0h",
            "vmaf_v1.0.16_1d5h_2160",
            "vmaf_v1.0.16_hfr_3d0h",
            "vmaf_v1.0.16_hfr_3d0h_2160",
            "vmaf_v1.0.16_hfr_5d0h",
            "vmaf_v1.0.16_hfr_1d5h_2160",
        ]
    );
    // Every built-in parses: the collections as collections, the others as models.
    for v in builtin_versions() {
        let c = ModelConfig::default();
        if v.contains("_b_") {
            assert!(ModelCollection::load(v, &c).is_ok(), "{v}");
        } else {
            assert!(Model::load(v, &c).is_ok(), "{v}");
        }
    }
    let e = Model::load("vmaf_v1.0.16", &ModelConfig::default()).unwrap_err();
    assert!(e.to_string().contains("vmaf_v1.0.16_3d0h,"), "{e}");
}

#[test]
fn load_errors() {
    let e = Model::load("vmaf_v9", &ModelConfig::default()).unwrap_err();
    assert!(matches!(&e, Error::Invalid(m) if m.contains("no such built-in model")));
    // A collection file is not a model, and a model file is not a collection.
    assert!(matches!(
        Model::load("vmaf_b_v0.6.3", &ModelConfig::default()),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        ModelCollection::load("vmaf_v0.6.1", &ModelConfig::default()),
        Err(Error::Invalid(_))
    ));
    let e = Model::load_from_path(Path::new("/nonexistent/model.pkl"), &ModelConfig::default())
        .unwrap_err();
    assert!(
        matches!(&e, Error::Invalid(m) if m.contains("pkl model files")),
        "{e}"
    );
    let e = Model::load_from_path(
        Path::new("/nonexistent/model.json"),
        &ModelConfig::default(),
    )
    .unwrap_err();
    assert!(matches!(&e, Error::Invalid(m) if !m.contains("pkl")), "{e}");
    for bad in [
        "",
        "[]",
        r#"{"model_dict": {"model_type": "XGBOOST"}}"#,
        r#"{"model_dict": {"norm_type": 1}}"#,
        r#"{"model_dict": {"score_clip": [0]}}"#,
        r#"{"model_dict": {"feature_names": ["a"]}}"#,
        r#"{"model_dict": {"model": "svm_type c_svc\nkernel_type rbf\nSV\n"}}"#,
        r#"{"model_dict": {"model": "svm_type nu_svr\nkernel_type rbf\ngamma 1\nnr_class 2\ntotal_sv 2\nrho 0\nSV\n1 1:1\n"}}"#,
        r#"{"model_dict": {"model": "svm_type nu_svr\nkernel_type rbf\ngamma 1\nnr_class 2\ntotal_sv 1\nrho 0\nSV\n1 2:1 1:1\n"}}"#,
        r#"{"model_dict": {"model": "svm_type nu_svr\nkernel_type rbf\nbogus 1\nSV\n"}}"#,
        r#"{"model_dict": {"model": "svm_type nu_svr\nnr_class 18446744073709551615\nrho 0\nSV\n"}}"#,
    ] {
        let r = Model::from_text(bad, &ModelConfig::default());
        assert!(
            matches!(r, Err(Error::Invalid(_)) | Err(Error::NotSupported(_))),
            "{bad}: {r:?}"
        );
    }
}

/// Model files are read to at most 64 MiB: a device that never ends, a sparse file far past
/// that and a directory fail at once (a model or a collection alike), as does text that is not
/// UTF-8; a real model file is unaffected.
#[test]
fn model_files_are_read_within_a_bound() {
    let cfg = ModelConfig::default();
    let t = std::time::Instant::now();
    for path in ["/dev/zero", "/dev/urandom"] {
        let e = Model::load_from_path(Path::new(path), &cfg).unwrap_err();
        assert!(
            matches!(&e, Error::Invalid(m) if m.contains("larger than 64 MiB")),
            "{e}"
        );
    }
    let e = ModelCollection::load_from_path(Path::new("/dev/zero"), &cfg).unwrap_err();
    assert!(
        matches!(&e, Error::Invalid(m) if m.contains("larger than 64 MiB")),
        "{e}"
    );
    // Bounded reads, not a wait for the end of the device.
    assert!(t.elapsed() < std::time::Duration::from_secs(30));
    let dir = std::env::temp_dir().join(format!("vmaf-model-bound-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sparse = dir.join("sparse.json");
    let f = std::fs::File::create(&sparse).unwrap();
    f.set_len(2 << 30).unwrap();
    let e = Model::load_from_path(&sparse, &cfg).unwrap_err();
    assert!(
        matches!(&e, Error::Invalid(m) if m.contains("larger than 64 MiB")),
        "{e}"
    );
    // Just under the bound is read (and then found not to be a model).
    f.set_len(MAX_MODEL_FILE_BYTES as u64).unwrap();
    let e = Model::load_from_path(&sparse, &cfg).unwrap_err();
    assert!(
        matches!(&e, Error::Invalid(m) if !m.contains("larger than")),
        "{e}"
    );
    let e = Model::load_from_path(&dir, &cfg).unwrap_err();
    assert!(
        matches!(&e, Error::Invalid(m) if m.contains("directory")),
        "{e}"
    );
    let latin1 = dir.join("latin1.json");
    std::fs::write(&latin1, b"{\"model_dict\": \"\xe9\"}").unwrap();
    let e = Model::load_from_path(&latin1, &cfg).unwrap_err();
    assert!(
        matches!(&e, Error::Invalid(m) if m.contains("UTF-8")),
        "{e}"
    );
    let real = dir.join("vmaf_v0.6.1.json");
    std::fs::write(&real, builtin::json("vmaf_v0.6.1").unwrap()).unwrap();
    assert!(Model::load_from_path(&real, &cfg).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// libvmaf's test_predict: every feature at 60.0 gives 100 after the clip.
#[test]
fn predict_all_sixty_clips_to_100() {
    let m = Model::load("vmaf_v0.6.1", &ModelConfig::default()).unwrap();
    let v = m.predict(&[60.0; 6], ModelFlags::empty()).unwrap();
    assert_eq!(format!("{v:.6}"), "100.000000");
    assert_eq!(v, 100.0);
    // Unclipped it is far above 100; the load flag and the call flag both turn clipping off.
    let raw = m.predict(&[60.0; 6], ModelFlags::DISABLE_CLIP).unwrap();
    assert!(raw > 100.0, "{raw}");
    let nc = Model::load("vmaf_v0.6.1", &cfg(None, ModelFlags::DISABLE_CLIP)).unwrap();
    assert_eq!(nc.params.clip, None);
    assert_eq!(nc.predict(&[60.0; 6], ModelFlags::empty()).unwrap(), raw);
    assert!(matches!(
        m.predict(&[1.0; 5], ModelFlags::empty()),
        Err(Error::Invalid(_))
    ));
}

/// Bit-exact parity with upstream's scalar-C scores for every golden frame.
#[test]
fn predict_matches_upstream_goldens() {
    let m = Model::load("vmaf_v0.6.1", &ModelConfig::default()).unwrap();
    for (set, rows) in [("G8", G8), ("G10", G10), ("GS", GS), ("GID", GID)] {
        for (i, row) in rows.iter().enumerate() {
            let v = m.predict(&features(row), ModelFlags::empty()).unwrap();
            assert_eq!(
                v.to_bits(),
                row[0].to_bits(),
                "{set} frame {i}: {v:.17} vs {:.17}",
                row[0]
            );
        }
    }
    // Upstream's pooled mean, "96.290108429157996" at %.17g.
    let g8: Vec<f64> = G8.iter().map(|r| r[0]).collect();
    assert_eq!(mean(&g8), "96.290108429157996".parse::<f64>().unwrap());
}

/// Pooled G8 means of the other models (upstream CLI, 6 decimals, `--cpumask 255`).
#[test]
fn other_models_match_upstream_pooled_g8() {
    let pooled = |m: &Model| {
        let v: Vec<f64> = G8
            .iter()
            .map(|r| m.predict(&features(r), ModelFlags::empty()).unwrap())
            .collect();
        format!("{:.6}", mean(&v))
    };
    let k4 = Model::load("vmaf_4k_v0.6.1", &cfg(Some("vmaf_4k"), ModelFlags::empty())).unwrap();
    assert_eq!(pooled(&k4), "97.488040");
    let t = Model::load(
        "vmaf_v0.6.1",
        &cfg(Some("vmaf_t"), ModelFlags::ENABLE_TRANSFORM),
    )
    .unwrap();
    assert!(t.params.transform.enabled);
    assert_eq!(pooled(&t), "99.752675");
    // ENABLE_TRANSFORM does nothing for a model without a score_transform entry.
    let k4t = Model::load("vmaf_4k_v0.6.1", &cfg(None, ModelFlags::ENABLE_TRANSFORM)).unwrap();
    assert!(!k4t.params.transform.enabled);

    let (m0, mc) = ModelCollection::load("vmaf_b_v0.6.3", &ModelConfig::default()).unwrap();
    assert_eq!(pooled(&m0), "93.548361");
    let mut stats = [vec![], vec![], vec![], vec![]];
    for r in G8 {
        let vals = vec![features(r); mc.models.len()];
        let (members, b) = mc.predict(&vals).unwrap();
        for (m, s) in mc.models.iter().zip(&members) {
            assert_eq!(*s, m.predict(&features(r), ModelFlags::empty()).unwrap());
        }
        for (acc, v) in stats
            .iter_mut()
            .zip([b.bagging_score, b.stddev, b.ci_p95_lo, b.ci_p95_hi])
        {
            acc.push(v);
        }
    }
    let got: Vec<String> = stats.iter().map(|s| format!("{:.6}", mean(s))).collect();
    assert_eq!(got, ["93.614553", "2.312717", "89.212018", "96.904246"]);
}

/// A one-feature model whose raw prediction is exactly `score` (coefficient 0, `rho = -score`).
fn constant_model_json(score: f64, transform: &str, clip: &str) -> String {
    format!(
        r#"{{"model_dict": {{"model_type": "BOOTSTRAP_LIBSVMNUSVR", "norm_type": "none",
        "feature_names": ["f"], "slopes": [1.0, 1.0], "intercepts": [0.0, 0.0]{clip}{transform},
        "model": "svm_type nu_svr\nkernel_type rbf\ngamma 1\nnr_class 2\ntotal_sv 1\nrho {}\nSV\n0 1:0 \n"}}}}"#,
        -score
    )
}

fn constant_collection(scores: &[f64], transform: &str, clip: &str) -> (Model, ModelCollection) {
    let mut members = vec![format!("\"0\": {}", constant_model_json(0.0, "", ""))];
    for (i, &s) in scores.iter().enumerate() {
        members.push(format!(
            "\"{}\": {}",
            i + 1,
            constant_model_json(s, transform, clip)
        ));
    }
    let text = format!("{{{}}}", members.join(","));
    ModelCollection::from_text(&text, &ModelConfig::default()).unwrap()
}

#[test]
fn bootstrap_statistics() {
    // Members score 1..=20 in shuffled order.
    let scores: Vec<f64> = (0..20).map(|i| ((i * 7) % 20 + 1) as f64).collect();
    let clip = r#", "score_clip": [0.0, 100.0]"#;
    let (_, mc) = constant_collection(&scores, "", clip);
    let vals = vec![vec![0.0]; 20];
    let (members, b) = mc.predict(&vals).unwrap();
    assert_eq!(members, scores);
    assert_eq!(b.bagging_score, 10.5);
    // p = 2.5 * 19 / 100 = 0.475 between the two smallest; 18.525 between the two largest.
    assert_eq!(b.ci_p95_lo, 1.0 * (1.0 - 0.475) + 2.0 * 0.475);
    assert_eq!(b.ci_p95_hi, 19.0 * (19.0 - 18.525) + 20.0 * (18.525 - 18.0));
    let slope = ((10.5 + 0.01) - (10.5 - 0.01)) / 0.02;
    assert_eq!(b.stddev, (665.0f64 / 20.0).sqrt() * slope);

    // With transform 1 + 2y and clip [0, 30]: statistics on raw scores, mapped afterwards.
    let transform = r#", "score_transform": {"enabled": true, "p0": 1.0, "p1": 2.0, "p2": null}"#;
    let clip30 = r#", "score_clip": [0.0, 30.0]"#;
    let (_, mc) = constant_collection(&scores, transform, clip30);
    let (members, b) = mc.predict(&vals).unwrap();
    let want: Vec<f64> = scores.iter().map(|s| (1.0 + 2.0 * s).min(30.0)).collect();
    assert_eq!(members, want);
    assert_eq!(b.bagging_score, 22.0);
    assert_eq!(b.ci_p95_lo, 1.0 + 2.0 * 1.475);
    assert_eq!(b.ci_p95_hi, 30.0);
    let slope = ((0.0 + 1.0 + 2.0 * (10.5 + 0.01)) - (0.0 + 1.0 + 2.0 * (10.5 - 0.01))) / 0.02;
    assert_eq!(b.stddev, (665.0f64 / 20.0).sqrt() * slope);

    // One member: every percentile is that score; a non-bootstrap collection is refused.
    let (_, one) = constant_collection(&[42.0], "", clip);
    let (_, b) = one.predict(&[vec![0.0]]).unwrap();
    assert_eq!(
        (b.bagging_score, b.stddev, b.ci_p95_lo, b.ci_p95_hi),
        (42.0, 0.0, 42.0, 42.0)
    );
    assert!(matches!(one.predict(&[]), Err(Error::Invalid(_))));
    let text = format!(
        r#"{{"0": {m}, "1": {m}}}"#,
        m = constant_model_json(1.0, "", "").replace("BOOTSTRAP_LIBSVMNUSVR", "LIBSVMNUSVR")
    );
    let (_, plain) = ModelCollection::from_text(&text, &ModelConfig::default()).unwrap();
    assert!(matches!(
        plain.predict(&[vec![0.0]]),
        Err(Error::Invalid(_))
    ));
}

/// Bootstrap summaries recomputed from upstream's printed member scores
/// (natural_576x324_420p8, vmaf_b_v0.6.3), on frames where no member was clipped (so the printed
/// member score is the raw score rounded to 6 decimals). Each input carries at most 5e-7 of
/// rounding and mean, RMS deviation and percentile weights are all 1-Lipschitz in the max norm,
/// so the result is within 5e-7 of upstream's value, which is itself printed to within 5e-7.
#[test]
fn bootstrap_matches_upstream_log() {
    let (_, mc) = ModelCollection::load("vmaf_b_v0.6.3", &ModelConfig::default()).unwrap();
    let log = crate::testutil::expected_json("natural_576x324_420p8.b_v0.6.3.json");
    let frames = log["frames"].as_array().unwrap();
    let mut checked = 0;
    for (i, _) in frames.iter().enumerate() {
        let get = |k: &str| crate::testutil::expected_metric(&log, i, k).unwrap();
        let raw: Vec<f64> = (1..=20).map(|k| get(&format!("vmaf_{k:04}"))).collect();
        if raw.iter().any(|&s| s <= 0.0 || s >= 100.0) || get("vmaf_ci_p95_hi") >= 99.99 {
            continue;
        }
        let b = bootstrap(&mc.models[0], raw);
        for (got, key) in [
            (b.bagging_score, "vmaf_bagging"),
            (b.stddev, "vmaf_stddev"),
            (b.ci_p95_lo, "vmaf_ci_p95_lo"),
            (b.ci_p95_hi, "vmaf_ci_p95_hi"),
        ] {
            let want = get(key);
            assert!(
                (got - want).abs() <= 1e-6 + 1e-12,
                "frame {i} {key}: {got} vs {want}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} usable frames");
}

#[test]
fn piecewise_linear_knots() {
    let knots = [(0.0, 0.0), (50.0, 60.0), (100.0, 100.0)];
    assert_eq!(piecewise_linear(25.0, &knots), 60.0 / 50.0 * 25.0 + 0.0);
    let a = (100.0 - 60.0) / (100.0 - 50.0);
    assert_eq!(piecewise_linear(75.0, &knots), a * 75.0 + (60.0 - 50.0 * a));
    assert_eq!(piecewise_linear(-10.0, &knots), 60.0 / 50.0 * -10.0);
    assert_eq!(
        piecewise_linear(110.0, &knots),
        a * 110.0 + (60.0 - 50.0 * a)
    );
    // Horizontal segments hold their level, also outside the range.
    let flat = [(10.0, 5.0), (20.0, 5.0), (30.0, 9.0)];
    assert_eq!(piecewise_linear(0.0, &flat), 5.0);
    assert_eq!(piecewise_linear(15.0, &flat), 5.0);
    // Fewer than two knots: unchanged; a decreasing segment stops the walk.
    assert_eq!(piecewise_linear(3.0, &[(1.0, 1.0)]), 3.0);
    assert_eq!(
        piecewise_linear(3.0, &[(0.0, 0.0), (5.0, 10.0), (4.0, 1.0)]),
        6.0
    );
    assert_eq!(piecewise_linear(3.0, &[(5.0, 10.0), (4.0, 1.0)]), 0.0);

    // Through a model: knots apply only when enabled (here by the load flag), then
    // out_lte_in caps the result at the untransformed score.
    let load = |score: f64, t: &str, flags| {
        Model::from_text(&constant_model_json(score, t, ""), &cfg(None, flags)).unwrap()
    };
    let on = ModelFlags::ENABLE_TRANSFORM;
    let t = r#", "score_transform": {"enabled": false, "knots": [[0, 0], [50, 60], [100, 100]]}"#;
    assert_eq!(
        load(75.0, t, ModelFlags::empty())
            .predict(&[0.0], ModelFlags::empty())
            .unwrap(),
        75.0
    );
    let m = load(75.0, t, on);
    assert_eq!(
        m.predict(&[0.0], ModelFlags::empty()).unwrap(),
        a * 75.0 + (60.0 - 50.0 * a)
    );
    assert_eq!(
        m.predict(&[0.0], ModelFlags::DISABLE_TRANSFORM).unwrap(),
        75.0
    );
    let lte =
        r#", "score_transform": {"knots": [[0, 0], [50, 60], [100, 100]], "out_lte_in": "true"}"#;
    assert_eq!(
        load(75.0, lte, on)
            .predict(&[0.0], ModelFlags::empty())
            .unwrap(),
        75.0
    );
    let lte_low = r#", "score_transform": {"knots": [[0, 0], [100, 50]], "out_lte_in": "true"}"#;
    assert_eq!(
        load(75.0, lte_low, on)
            .predict(&[0.0], ModelFlags::empty())
            .unwrap(),
        37.5
    );
    let gte = r#", "score_transform": {"knots": [[0, 0], [100, 50]], "out_gte_in": "true"}"#;
    assert_eq!(
        load(75.0, gte, on)
            .predict(&[0.0], ModelFlags::empty())
            .unwrap(),
        75.0
    );
}

#[test]
fn feature_overload_targets_one_extractor() {
    let mut m = Model::load("vmaf_v0.6.1neg", &ModelConfig::default()).unwrap();
    let mut opts = Dict::new();
    opts.set("adm_enhn_gain_limit", "1.2");
    m.feature_overload("adm", &opts).unwrap();
    assert_eq!(m.features[0].opts.get("adm_enhn_gain_limit"), Some("1.2"));
    assert!(m.features[1].opts.is_empty());
    assert_eq!(m.features[2].opts.get("vif_enhn_gain_limit"), Some("1"));
    assert_eq!(m.features[2].opts.get("adm_enhn_gain_limit"), None);
    m.feature_overload("psnr", &opts).unwrap();
    assert_eq!(m.features[0].opts.len(), 1);

    let (mut m0, mut mc) = ModelCollection::load("vmaf_b_v0.6.3", &ModelConfig::default()).unwrap();
    let mut opts = Dict::new();
    opts.set("vif_enhn_gain_limit", "1.0");
    mc.feature_overload(&mut m0, "vif", &opts).unwrap();
    for m in mc.models.iter().chain([&m0]) {
        assert_eq!(m.features[3].opts.get("vif_enhn_gain_limit"), Some("1"));
        assert!(m.features[0].opts.is_empty());
    }
}

/// Every model file upstream ships (`/work/shared/models`, when present) loads by path; the
/// v0.6.1-family files predict exactly like the built-ins.
#[test]
fn loads_shared_model_files() {
    let dir = PathBuf::from("/work/shared/models");
    if !dir.is_dir() {
        eprintln!("skipping: {} does not exist", dir.display());
        return;
    }
    let mut files = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                files.push(e.unwrap().path());
            }
        } else if p.extension().is_some_and(|x| x == "json") {
            files.push(p);
        }
    }
    files.sort();
    assert!(files.len() >= 14, "{files:?}");
    let row = features(&G8[3]);
    for f in &files {
        let stem = f.file_stem().unwrap().to_str().unwrap();
        if stem.contains("_b_v") {
            let (m0, mc) = ModelCollection::load_from_path(f, &ModelConfig::default()).unwrap();
            let (b0, bmc) = ModelCollection::load(stem, &ModelConfig::default()).unwrap();
            let vals = vec![row.clone(); mc.models.len()];
            assert_eq!(mc.predict(&vals).unwrap(), bmc.predict(&vals).unwrap());
            assert_eq!(
                m0.predict(&row, ModelFlags::empty()).unwrap(),
                b0.predict(&row, ModelFlags::empty()).unwrap()
            );
            continue;
        }
        let m = Model::load_from_path(f, &ModelConfig::default())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if stem.starts_with("vmaf_v1.0.16") {
            assert_eq!(m.features.len(), 4, "{stem}");
            assert_eq!(m.features[2].name, "VMAF_integer_feature_adm3_score");
            assert_eq!(m.features[2].opts.get("adm_csf_mode"), Some("2"));
            assert_eq!(m.params.chroma_correction, Some(120.0));
            assert!(m.params.transform.enabled);
            check_chroma_correction(&m);
        } else {
            // The float model reads VMAF_feature_* names; the rest are integer features.
            let want: Vec<String> = V061_FEATURES
                .iter()
                .map(|n| match stem.starts_with("vmaf_float") {
                    true => n.replace("VMAF_integer_feature_", "VMAF_feature_"),
                    false => n.to_string(),
                })
                .collect();
            assert_eq!(names(&m), want, "{stem}");
            let v = m.predict(&row, ModelFlags::empty()).unwrap();
            assert!((0.0..=100.0).contains(&v), "{stem}: {v}");
            if let Ok(b) = Model::load(stem, &ModelConfig::default()) {
                assert_eq!(v, b.predict(&row, ModelFlags::empty()).unwrap(), "{stem}");
            }
        }
    }
}

/// A zero speed_chroma score is replaced by `c - c * adm3` before the SVM.
fn check_chroma_correction(m: &Model) {
    let (cambi, adm3, motion3) = (0.3, 0.95, 4.0);
    let zero = m
        .predict(&[cambi, 0.0, adm3, motion3], ModelFlags::empty())
        .unwrap();
    // The model sees adm3 after a normalise/denormalise round trip.
    let (s, i) = m.params.feature_norm[2];
    let adm3_seen = ((s * adm3 + i) - i) / s;
    let corrected = (-120.0 * adm3_seen) + 120.0;
    let direct = m
        .predict(&[cambi, corrected, adm3, motion3], ModelFlags::empty())
        .unwrap();
    assert_eq!(zero, direct);
    let other = m
        .predict(&[cambi, 0.5, adm3, motion3], ModelFlags::empty())
        .unwrap();
    assert_ne!(zero, other);
}
