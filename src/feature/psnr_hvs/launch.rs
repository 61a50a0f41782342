//! Launchers for kernels/psnr_hvs.hip.

use crate::error::{Error, Result};
use crate::gpu::launch::{DevicePlane, Launch, Sample, Span};
use crate::gpu::{DeviceBuffer, GpuState, LaunchConfig};

/// `vmaf_psnr_hvs_terms_{u8,u16}(ref, ref_stride, dis, dis_stride, nbx, nby, tables, terms)`.
type TermsArgs<'a, T> = (
    Span<'a, T>,
    i32,
    Span<'a, T>,
    i32,
    i32,
    i32,
    Span<'a, f32>,
    Span<'a, f32>,
);
/// `vmaf_psnr_hvs_sum(terms, s0, s1, s2, s3, out)`.
type SumArgs<'a> = (Span<'a, f32>, u32, u32, u32, u32, Span<'a, f32>);

const TERMS_U8: &str = "vmaf_psnr_hvs_terms_u8";
const TERMS_U16: &str = "vmaf_psnr_hvs_terms_u16";
const SUM: &str = "vmaf_psnr_hvs_sum";

/// Threads per block of the terms kernel (`HVS_BLOCK_THREADS`) and of the sum kernel
/// (`HVS_SUM_THREADS`).
const BLOCK_THREADS: u32 = 64;
const SUM_THREADS: u32 = 256;

/// Floats per plane in the table buffer: the masking weights, then the CSF.
pub const TABLE_LEN: usize = 128;

/// The kernels of kernels/psnr_hvs.hip with the argument tuples their launchers pass.
#[cfg(test)]
pub(crate) fn signatures() -> Vec<crate::gpu::launch::Signature> {
    use crate::gpu::launch::sig;
    vec![
        sig::<TermsArgs<u8>>(TERMS_U8),
        sig::<TermsArgs<u16>>(TERMS_U16),
        sig::<SumArgs>(SUM),
    ]
}

/// 8x8 blocks along a side of `n` samples on the 7-sample grid.
pub fn blocks(n: usize) -> usize {
    if n >= 8 {
        (n - 8) / 7 + 1
    } else {
        0
    }
}

/// The 64 weighted squared errors of every block of a plane pair into
/// `terms[offset..][..64 * blocks]`, with `tables[table..][..TABLE_LEN]`.
pub fn psnr_hvs_terms<'a, T: Sample>(
    state: &GpuState,
    reference: DevicePlane<'a, T>,
    distorted: DevicePlane<'a, T>,
    tables: &'a DeviceBuffer<f32>,
    table: usize,
    terms: &'a DeviceBuffer<f32>,
    offset: usize,
) -> Result<Launch<'a>> {
    if (reference.w, reference.h) != (distorted.w, distorted.h) {
        return Err(Error::inval(
            "reference and distorted planes differ in size",
        ));
    }
    let (nbx, nby) = (blocks(reference.w), blocks(reference.h));
    let n = nbx * nby;
    if n == 0 {
        return Err(Error::inval("psnr_hvs: plane smaller than one block"));
    }
    let r = reference.span()?;
    let d = distorted.span()?;
    let tb = Span::of(tables, table, TABLE_LEN)?;
    let out = Span::of(terms, offset, 64 * n)?;
    let grid = u32::try_from(n.div_ceil(BLOCK_THREADS as usize))
        .map_err(|_| Error::inval("psnr_hvs: plane too large"))?;
    let cfg = LaunchConfig {
        grid: (grid, 1, 1),
        block: (BLOCK_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let dims = i32::try_from(nbx).and_then(|x| Ok((x, i32::try_from(nby)?)));
    let (nbx, nby) = dims.map_err(|_| Error::inval("psnr_hvs: plane too large"))?;
    // Block (bx, by) reads rows 7 * by .. + 8 and columns 7 * bx .. + 8 of both planes, inside
    // them as `blocks` counts; writes its 64 terms inside `out`.
    Launch::new::<TermsArgs<T>>(
        state,
        "psnr_hvs",
        T::pick(TERMS_U8, TERMS_U16),
        cfg,
        (
            r,
            reference.stride as i32,
            d,
            distorted.stride as i32,
            nbx,
            nby,
            tb,
            out,
        ),
    )
}

/// `out[p]` = the in-order float sum of `terms[starts[p]..starts[p + 1]]` for the three planes.
pub fn psnr_hvs_sum<'a>(
    state: &GpuState,
    terms: &'a DeviceBuffer<f32>,
    starts: [usize; 4],
    out: &'a DeviceBuffer<f32>,
) -> Result<Launch<'a>> {
    if starts.windows(2).any(|w| w[0] > w[1]) || starts[3] > terms.len() {
        return Err(Error::inval("psnr_hvs: bad term ranges"));
    }
    let mut s = [0u32; 4];
    for (d, &v) in s.iter_mut().zip(&starts) {
        *d = u32::try_from(v).map_err(|_| Error::inval("psnr_hvs: too many terms"))?;
    }
    let [s0, s1, s2, s3] = s;
    let t = Span::of(terms, 0, terms.len())?;
    let o = Span::of(out, 0, 3)?;
    let cfg = LaunchConfig {
        grid: (3, 1, 1),
        block: (SUM_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    // Block p reads terms[s_p..s_(p+1)] (ordered, inside the buffer as checked) and writes
    // out[p].
    Launch::new::<SumArgs>(state, "psnr_hvs", SUM, cfg, (t, s0, s1, s2, s3, o))
}
