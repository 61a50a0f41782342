//! Short names libvmaf prints for its long feature names.

const ALIASES: &[(&str, &str)] = &[
    ("VMAF_feature_adm2_score", "adm2"),
    ("VMAF_feature_aim_score", "aim"),
    ("VMAF_feature_adm3_score", "adm3"),
    ("VMAF_feature_adm_scale0_score", "adm_scale0"),
    ("VMAF_feature_adm_scale1_score", "adm_scale1"),
    ("VMAF_feature_adm_scale2_score", "adm_scale2"),
    ("VMAF_feature_adm_scale3_score", "adm_scale3"),
    ("VMAF_feature_motion_score", "motion"),
    ("VMAF_feature_motion2_score", "motion2"),
    ("VMAF_feature_motion3_score", "motion3"),
    ("VMAF_feature_vif_scale0_score", "vif_scale0"),
    ("VMAF_feature_vif_scale1_score", "vif_scale1"),
    ("VMAF_feature_vif_scale2_score", "vif_scale2"),
    ("VMAF_feature_vif_scale3_score", "vif_scale3"),
    ("VMAF_integer_feature_adm2_score", "integer_adm2"),
    ("VMAF_integer_feature_aim_score", "integer_aim"),
    ("VMAF_integer_feature_adm3_score", "integer_adm3"),
    ("VMAF_integer_feature_motion_score", "integer_motion"),
    ("VMAF_integer_feature_motion2_score", "integer_motion2"),
    ("VMAF_integer_feature_motion3_score", "integer_motion3"),
    (
        "VMAF_integer_feature_vif_scale0_score",
        "integer_vif_scale0",
    ),
    (
        "VMAF_integer_feature_vif_scale1_score",
        "integer_vif_scale1",
    ),
    (
        "VMAF_integer_feature_vif_scale2_score",
        "integer_vif_scale2",
    ),
    (
        "VMAF_integer_feature_vif_scale3_score",
        "integer_vif_scale3",
    ),
    ("Cambi_feature_cambi_score", "cambi"),
    (
        "Speed_chroma_feature_speed_chroma_u_score",
        "speed_chroma_u",
    ),
    (
        "Speed_chroma_feature_speed_chroma_v_score",
        "speed_chroma_v",
    ),
    (
        "Speed_chroma_feature_speed_chroma_uv_score",
        "speed_chroma_uv",
    ),
    (
        "Speed_temporal_feature_speed_temporal_score",
        "speed_temporal",
    ),
];

/// The printed name of `name` (itself when it has no alias).
pub fn alias(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, a)| *a)
        .unwrap_or(name)
}
