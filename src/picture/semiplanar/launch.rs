//! Launchers for kernels/semiplanar.hip.

use crate::error::{Error, Result};
use crate::gpu::launch::{dims_u32, DevicePlane, Launch, Span, MAX_ROW_BLOCKS, ROW_BLOCK};
use crate::gpu::{DeviceBuffer, GpuState, LaunchConfig};

/// `vmaf_semiplanar_luma_u16(src, src_pitch, dst, w, h, shift)`.
type LumaArgs<'a> = (Span<'a, u16>, u32, Span<'a, u16>, u32, u32, u32);
/// The chroma kernels' arguments before the 16-bit one's shift: `(src, src_pitch, u, v, cw,
/// ch)`.
type ChromaArgs<'a, T> = (Span<'a, T>, u32, Span<'a, T>, Span<'a, T>, u32, u32);
/// `vmaf_semiplanar_chroma_u8(src, src_pitch, u, v, cw, ch)`.
type Chroma8Args<'a> = ChromaArgs<'a, u8>;
/// `vmaf_semiplanar_chroma_u16(src, src_pitch, u, v, cw, ch, shift)`.
type Chroma16Args<'a> = (
    Span<'a, u16>,
    u32,
    Span<'a, u16>,
    Span<'a, u16>,
    u32,
    u32,
    u32,
);

const LUMA_U16: &str = "vmaf_semiplanar_luma_u16";
const CHROMA_U8: &str = "vmaf_semiplanar_chroma_u8";
const CHROMA_U16: &str = "vmaf_semiplanar_chroma_u16";

/// The kernels of kernels/semiplanar.hip with the argument tuples their launchers pass.
#[cfg(test)]
pub(crate) fn signatures() -> Vec<crate::gpu::launch::Signature> {
    use crate::gpu::launch::sig;
    vec![
        sig::<LumaArgs>(LUMA_U16),
        sig::<Chroma8Args>(CHROMA_U8),
        sig::<Chroma16Args>(CHROMA_U16),
    ]
}

/// One thread per sample of a row, rows grid-strided.
fn rows(w: u32, h: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (w.div_ceil(ROW_BLOCK), h.min(MAX_ROW_BLOCKS), 1),
        block: (ROW_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `dst` (dense) = the samples of `src`'s 16-bit words shifted down by `shift`.
pub(crate) fn luma_u16<'a>(
    state: &GpuState,
    src: DevicePlane<'a, u16>,
    dst: &'a DeviceBuffer<u16>,
    shift: u32,
) -> Result<Launch<'a>> {
    let (w, h) = dims_u32(src.w, src.h)?;
    let s = src.span()?;
    let d = Span::of(dst, 0, src.w * src.h)?;
    // Reads rows < h, columns < w of `src`; writes the dense w x h `dst`.
    Launch::new::<LumaArgs>(
        state,
        "semiplanar",
        LUMA_U16,
        rows(w, h),
        (s, src.stride as u32, d, w, h, shift),
    )
}

/// The dense `u` and `v` planes (`src.w` / 2 samples per row) of the interleaved chroma plane
/// `src`, whose width counts samples (twice the pairs).
pub(crate) fn chroma<'a, T: ChromaSample>(
    state: &GpuState,
    src: DevicePlane<'a, T>,
    u: &'a DeviceBuffer<T>,
    v: &'a DeviceBuffer<T>,
    shift: u32,
) -> Result<Launch<'a>> {
    if !src.w.is_multiple_of(2) {
        return Err(Error::inval(
            "an interleaved chroma row of an odd sample count",
        ));
    }
    let (cw, ch) = dims_u32(src.w / 2, src.h)?;
    let s = src.span()?;
    let n = src.w / 2 * src.h;
    let (su, sv) = (Span::of(u, 0, n)?, Span::of(v, 0, n)?);
    T::launch(
        state,
        rows(cw, ch),
        (s, src.stride as u32, su, sv, cw, ch),
        shift,
    )
}

/// The sample types of the chroma kernels.
pub(crate) trait ChromaSample: crate::gpu::launch::Sample {
    fn launch<'a>(
        state: &GpuState,
        cfg: LaunchConfig,
        args: ChromaArgs<'a, Self>,
        shift: u32,
    ) -> Result<Launch<'a>>;
}

impl ChromaSample for u8 {
    fn launch<'a>(
        state: &GpuState,
        cfg: LaunchConfig,
        args: (Span<'a, u8>, u32, Span<'a, u8>, Span<'a, u8>, u32, u32),
        shift: u32,
    ) -> Result<Launch<'a>> {
        if shift != 0 {
            return Err(Error::inval("8-bit chroma is never shifted"));
        }
        // Reads rows < ch, samples < 2 cw of `src`; writes the dense cw x ch `u` and `v`.
        Launch::new::<Chroma8Args>(state, "semiplanar", CHROMA_U8, cfg, args)
    }
}

impl ChromaSample for u16 {
    fn launch<'a>(
        state: &GpuState,
        cfg: LaunchConfig,
        (s, sp, u, v, cw, ch): (Span<'a, u16>, u32, Span<'a, u16>, Span<'a, u16>, u32, u32),
        shift: u32,
    ) -> Result<Launch<'a>> {
        // As for u8, each word shifted down.
        Launch::new::<Chroma16Args>(
            state,
            "semiplanar",
            CHROMA_U16,
            cfg,
            (s, sp, u, v, cw, ch, shift),
        )
    }
}
