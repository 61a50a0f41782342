use super::*;
use crate::testutil::expected_text;

/// The stored (pre-alias) name libvmaf keeps for a printed name, so the writer's aliasing is
/// exercised too.
fn stored_name(printed: &str) -> String {
    let long = format!(
        "VMAF_{}_score",
        printed.replacen("integer_", "integer_feature_", 1)
    );
    if alias(&long) == printed {
        long
    } else {
        printed.to_string()
    }
}

/// Per-frame scores of an upstream JSON log, features in file order (serde_json's map would
/// sort them), read line by line from its fixed layout.
fn parse_frames(text: &str) -> Vec<FeatureVector> {
    let mut vectors: Vec<FeatureVector> = Vec::new();
    let mut frame = None;
    for line in text.lines() {
        let line = line.trim().trim_end_matches(',');
        if line.starts_with("\"pooled_metrics\"") {
            break;
        }
        let Some((key, val)) = line.split_once("\": ") else {
            continue;
        };
        let key = key.trim_start_matches('"');
        if key == "frameNum" {
            frame = Some(val.parse::<usize>().unwrap());
            continue;
        }
        let (Some(i), Ok(v)) = (frame, val.parse::<f64>()) else {
            continue;
        };
        let name = stored_name(key);
        let pos = match vectors.iter().position(|fv| fv.name == name) {
            Some(p) => p,
            None => {
                vectors.push(FeatureVector {
                    name,
                    scores: Vec::new(),
                });
                vectors.len() - 1
            }
        };
        let fv = &mut vectors[pos];
        if fv.scores.len() <= i {
            fv.scores.resize(i + 1, None);
        }
        fv.scores[i] = Some(v);
    }
    vectors
}

fn data_from(vectors: Vec<FeatureVector>, n_subsample: u32) -> OutputData<'static> {
    OutputData {
        version: "3.2.0",
        fps: 12.345,
        width: 576,
        height: 324,
        pic_cnt: 48,
        n_subsample,
        vectors,
        aggregate: Vec::new(),
    }
}

fn render(fmt: OutputFormat, d: &OutputData<'_>) -> String {
    let mut out = Vec::new();
    write(fmt, &mut out, d).unwrap();
    String::from_utf8(out).unwrap()
}

/// Splits a line into its text skeleton (numbers replaced by `#`) and its number tokens.
/// A number starts at a digit or '-' that does not continue a name.
fn split_numbers(line: &str) -> (String, Vec<&str>) {
    let b = line.as_bytes();
    let (mut skel, mut nums, mut i) = (String::new(), Vec::new(), 0);
    while i < b.len() {
        let starts = (b[i].is_ascii_digit() || b[i] == b'-')
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'));
        if starts {
            let j = i
                + 1
                + b[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit() || **c == b'.')
                    .count();
            nums.push(&line[i..j]);
            skel.push('#');
            i = j;
        } else {
            skel.push(b[i] as char);
            i += 1;
        }
    }
    (skel, nums)
}

/// Compares a writer's output with upstream's: byte-exact everywhere except the fps value and
/// the pooled means, which upstream computed from unrounded scores (those must have the same
/// layout and agree within the 6-decimal rounding of the 48 inputs). Pooled min/max are exact.
fn assert_matches_upstream(actual: &str, expected: &str, what: &str) {
    let (a, e): (Vec<_>, Vec<_>) = (actual.lines().collect(), expected.lines().collect());
    assert_eq!(a.len(), e.len(), "{what}: line count");
    assert_eq!(
        actual.ends_with('\n'),
        expected.ends_with('\n'),
        "{what}: final newline"
    );
    let mut pooled = false;
    let mut json_key = "";
    for (k, (la, le)) in a.iter().zip(&e).enumerate() {
        if le.contains("pooled_metrics") {
            pooled = !le.contains("</pooled_metrics>");
        }
        if le.contains("fps") {
            let (sa, _) = split_numbers(la);
            let (se, _) = split_numbers(le);
            assert_eq!(sa, se, "{what}: fps line {k}");
            continue;
        }
        if !pooled || !le.chars().any(|c| c.is_ascii_digit()) {
            assert_eq!(la, le, "{what}: line {k}");
            continue;
        }
        let ((sa, na), (se, ne)) = (split_numbers(la), split_numbers(le));
        assert_eq!(sa, se, "{what}: pooled line {k} layout");
        assert_eq!(na.len(), ne.len());
        if let Some(key) = le.trim().strip_prefix('"') {
            json_key = key.split('"').next().unwrap_or("");
        }
        for (m, (x, y)) in na.iter().zip(&ne).enumerate() {
            // XML: min, max come first on the line; JSON: one method per line.
            let exact = if le.contains("<metric") {
                m < 2
            } else {
                json_key == "min" || json_key == "max"
            };
            assert_eq!(
                x.len() - x.find('.').unwrap(),
                y.len() - y.find('.').unwrap()
            );
            if exact {
                assert_eq!(x, y, "{what}: pooled line {k}");
            } else {
                let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                assert!(
                    (x - y).abs() <= 1.0000001e-6,
                    "{what}: line {k}: {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn default_run_matches_upstream_in_all_formats() {
    let vectors = parse_frames(&expected_text("natural_576x324_420p8.default.json"));
    assert_eq!(vectors.len(), 15);
    assert_eq!(vectors[0].name, "VMAF_integer_feature_adm2_score");
    assert_eq!(vectors[7].name, "VMAF_integer_feature_motion_sad_score");
    assert_eq!(vectors[3].name, "integer_adm_scale0");
    assert!(vectors.iter().all(|v| v.scores.len() == 48));
    let d = data_from(vectors, 1);
    for (fmt, ext) in [
        (OutputFormat::Xml, "xml"),
        (OutputFormat::Json, "json"),
        (OutputFormat::Csv, "csv"),
        (OutputFormat::Sub, "sub"),
    ] {
        let file = format!("natural_576x324_420p8.default.{ext}");
        assert_matches_upstream(&render(fmt, &d), &expected_text(&file), &file);
    }
    // CSV and SUB hold no fps or pooled values: fully byte-exact.
    assert_eq!(
        render(OutputFormat::Csv, &d),
        expected_text("natural_576x324_420p8.default.csv")
    );
    assert_eq!(
        render(OutputFormat::Sub, &d),
        expected_text("natural_576x324_420p8.default.sub")
    );
    let xml = render(OutputFormat::Xml, &d);
    assert!(xml.contains("  <fyi fps=\"12.35\" />\n"));
    assert!(xml.ends_with("  </pooled_metrics>\n  <aggregate_metrics />\n</VMAF>\n"));
    let json = render(OutputFormat::Json, &d);
    assert!(json.contains("  \"fps\": 12.35,\n"));
    assert!(json.ends_with("\n  },\n  \"aggregate_metrics\": {\n  }\n}\n"));
}

#[test]
fn subsampled_run_prints_only_every_nth_frame() {
    let mut vectors = parse_frames(&expected_text("natural_576x324_420p8.subsample3.json"));
    assert_eq!(vectors.len(), 15);
    assert_eq!(vectors[0].scores.len(), 46);
    // libvmaf's motion runs on every frame; those scores must be neither printed nor pooled.
    for v in vectors.iter_mut().filter(|v| v.name.contains("motion")) {
        v.scores.resize(48, None);
        for (i, s) in v.scores.iter_mut().enumerate() {
            if i % 3 != 0 {
                *s = Some(1000.0 + i as f64);
            }
        }
    }
    let d = data_from(vectors, 3);
    let json = render(OutputFormat::Json, &d);
    assert_matches_upstream(
        &json,
        &expected_text("natural_576x324_420p8.subsample3.json"),
        "subsample3.json",
    );
    let sub = render(OutputFormat::Sub, &d);
    assert_eq!(sub.lines().count(), 16);
    assert!(sub.starts_with("{0}{1}frame: 0|"));
    assert!(sub.contains("\n{3}{4}frame: 3|"));
    // No motion value from a skipped frame (all >= 1000) leaks into a printed one.
    for line in sub.lines() {
        for field in line.split('|').skip(1).filter(|f| !f.is_empty()) {
            let v: f64 = field.split_once(": ").unwrap().1.parse().unwrap();
            assert!(v < 1000.0, "{field}");
        }
    }
}

fn small(names: &[&str], scores: &[&[Option<f64>]]) -> OutputData<'static> {
    let vectors = names
        .iter()
        .zip(scores)
        .map(|(n, s)| FeatureVector {
            name: n.to_string(),
            scores: s.to_vec(),
        })
        .collect();
    OutputData {
        version: "3.2.0",
        fps: f64::INFINITY,
        width: 8,
        height: 6,
        pic_cnt: 2,
        n_subsample: 1,
        vectors,
        aggregate: Vec::new(),
    }
}

#[test]
fn missing_scores_shift_csv_columns_and_drop_pooled_methods() {
    let d = small(
        &["VMAF_integer_feature_adm2_score", "psnr_y"],
        &[&[Some(0.5), Some(0.25)], &[None, Some(1e-7), None, None]],
    );
    assert_eq!(
        render(OutputFormat::Csv, &d),
        "Frame,integer_adm2,psnr_y,\n0,0.500000,\n1,0.250000,0.0000001000000000,\n"
    );
    let xml = render(OutputFormat::Xml, &d);
    assert!(xml.contains("  <fyi fps=\"inf\" />\n"));
    assert!(xml.contains(
        "    <frame frameNum=\"0\" integer_adm2=\"0.500000\" />\n    <frame frameNum=\"1\" \
         integer_adm2=\"0.250000\" psnr_y=\"0.0000001000000000\" />\n  </frames>\n"
    ));
    // psnr_y lacks frame 0, so every pooling method fails and is left out.
    assert!(xml.contains(
        "    <metric name=\"integer_adm2\" min=\"0.250000\" max=\"0.500000\" mean=\"0.375000\" \
         harmonic_mean=\"0.363636\" />\n    <metric name=\"psnr_y\" />\n"
    ));
    let json = render(OutputFormat::Json, &d);
    assert!(json.starts_with("{\n  \"version\": \"3.2.0\",\n  \"fps\": null,\n  \"frames\": [\n"));
    assert!(json.contains("\n    },\n    \"psnr_y\": {\n    }\n  },\n"));
}

#[test]
fn non_finite_values_follow_upstream_quirks() {
    let mut d = small(
        &["a", "b", "c"],
        &[
            &[Some(f64::NAN), Some(1.0)],
            &[Some(f64::INFINITY), Some(-f64::NAN)],
            &[Some(-0.0), Some(2.0)],
        ],
    );
    d.fps = f64::NAN;
    d.aggregate = vec![("apsnr_y".into(), 40.5), ("apsnr_cb".into(), f64::INFINITY)];
    let json = render(OutputFormat::Json, &d);
    // A non-finite score loses its line break, as upstream prints it.
    assert!(json.contains(
        "      \"metrics\": {\n        \"a\": null,        \"b\": null,        \"c\": -0.000000\n      }\n"
    ));
    assert!(json.contains("  \"fps\": null,\n"));
    assert!(json.ends_with(
        "  \"aggregate_metrics\": {\n    \"apsnr_y\": 40.500000,\n    \"apsnr_cb\": null\n  }\n}\n"
    ));
    let xml = render(OutputFormat::Xml, &d);
    assert!(xml.contains("  <fyi fps=\"nan\" />\n"));
    assert!(xml.contains("<frame frameNum=\"0\" a=\"nan\" b=\"inf\" c=\"-0.000000\" />"));
    assert!(xml.contains("<frame frameNum=\"1\" a=\"1.000000\" b=\"-nan\" c=\"2.000000\" />"));
    assert!(xml.contains("  <aggregate_metrics apsnr_y=\"40.500000\" apsnr_cb=\"inf\" />\n"));
    assert_eq!(
        render(OutputFormat::Sub, &d),
        "{0}{1}frame: 0|a: nan|b: inf|c: -0.000000|\n{1}{2}frame: 1|a: 1.000000|b: -nan|c: 2.000000|\n"
    );
}

#[test]
fn json_frame_separator_is_keyed_on_frame_index() {
    let mut d = small(&["a"], &[&[None, Some(3.0)]]);
    d.fps = 1.0;
    let json = render(OutputFormat::Json, &d);
    assert!(json.contains("  \"frames\": [,\n    {\n      \"frameNum\": 1,\n"));
}

#[test]
fn no_pictures_and_no_format() {
    let mut d = small(&[], &[]);
    d.pic_cnt = 0;
    assert_eq!(render(OutputFormat::Csv, &d), "Frame,\n");
    assert_eq!(render(OutputFormat::Sub, &d), "");
    assert_eq!(
        render(OutputFormat::Json, &d),
        "{\n  \"version\": \"3.2.0\",\n  \"fps\": null,\n  \"frames\": [\n  ],\n  \
         \"pooled_metrics\": {\n  },\n  \"aggregate_metrics\": {\n  }\n}\n"
    );
    let mut out = Vec::new();
    assert!(write(OutputFormat::None, &mut out, &d).is_err());
}
