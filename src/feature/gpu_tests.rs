//! Checks across the GPU features: their launcher modules against kernels/*.hip, and the kernel
//! model's time for a frame of the features a model scores.

use crate::gpu::launch::{signature, Signatures};

/// Every launcher module, by the kernels/*.hip file it launches.
const LAUNCHERS: &[(&str, Signatures)] = &[
    ("adm", super::adm::launch::signatures),
    ("cambi", super::cambi::launch::signatures),
    ("float_ssim", super::ssim::launch::signatures),
    ("motion", super::motion::launch::signatures),
    ("psnr", super::psnr::launch::signatures),
    ("psnr_hvs", super::psnr_hvs::launch::signatures),
    ("semiplanar", crate::picture::semiplanar::launch::signatures),
    ("speed", super::speed::launch::signatures),
    ("vif", super::vif::launch::signatures),
];

/// Every `VMAF_KERNEL` entry point of kernels/*.hip has a launcher module declaring it with
/// the same parameter types in the same order, and no launcher declares a kernel that is not
/// there. Runs without a GPU.
#[test]
fn launchers_match_kernel_signatures() {
    let (problems, kernels) = signature::check(LAUNCHERS);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Every entry point of today's nine sources (keeps the test from passing vacuously).
    assert!(kernels >= 37, "only {kernels} kernels checked");
}

mod hipcpu {
    use std::time::Instant;

    use crate::gpu::hipcpu::model_or_skip;
    use crate::testutil::load_parity_clip;

    /// Model time of one 576x324 8-bit frame per feature at 64 lanes (printed; run with
    /// `--nocapture`).
    #[test]
    fn model_time_per_576x324_frame() {
        let f = model_or_skip!();
        let (refs, dists) = load_parity_clip("natural_576x324_420p8");
        let (r, d) = (&refs[1], &dists[1]);
        let t = Instant::now();
        crate::feature::motion::hipcpu_tests::motion_on_model(f, &refs[0], r, 64);
        let motion = t.elapsed();
        let t = Instant::now();
        crate::feature::vif::hipcpu_tests::vif_on_model(f, r, d, 100.0, false, 64, false);
        let vif = t.elapsed();
        let adm = crate::feature::adm::Adm::new(&crate::feature::options::Dict::new()).unwrap();
        let t = Instant::now();
        crate::feature::adm::hipcpu_tests::adm_on_model(f, r, d, adm.params(), 64);
        let adm = t.elapsed();
        println!("576x324 at wave64: motion {motion:.1?}, vif {vif:.1?}, adm {adm:.1?}");
    }
}
