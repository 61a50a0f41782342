/*
 * libvmaf_hip.h - feature extraction on AMD and NVIDIA GPUs (vmaf-hip).
 *
 * The GPU runtime (ROCm's libamdhip64, or the NVIDIA driver's libcuda.so.1) is
 * loaded when a state is created, so a program built against this header runs
 * on machines without any GPU: vmaf_hip_state_init() then returns -ENODEV and
 * the context keeps extracting on the CPU.
 *
 * Typical use:
 *
 *     VmafHipState *hip = NULL;
 *     VmafHipConfiguration hcfg = { .device_index = -1, .flags = 0 };
 *     if (vmaf_hip_state_init(&hip, hcfg) == 0)
 *         vmaf_hip_import_state(vmaf, hip);   // before registering features
 *     ...
 *     vmaf_close(vmaf);
 *     vmaf_hip_state_free(&hip);
 *
 * All functions return 0 or a negative errno value unless stated otherwise.
 */

#ifndef LIBVMAF_HIP_H_
#define LIBVMAF_HIP_H_

#include "libvmaf.h"
#include "picture.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One GPU device together with one compute stream. Opaque. */
typedef struct VmafHipState VmafHipState;

typedef struct VmafHipConfiguration {
    /* Device ordinal as printed by vmaf_hip_list_devices(); -1 selects the
     * first device that accepts compute work. */
    int device_index;
    /* Reserved for future use; must be 0. */
    int flags;
} VmafHipConfiguration;

/* Returns 1 when this library can drive a GPU. Loads nothing and touches no
 * device; whether a device is actually present is vmaf_hip_state_init()'s
 * answer. */
int vmaf_hip_available(void);

/* Opens the configured device and creates its compute stream.
 * On success stores a new state in *out and returns 0.
 * -ENODEV: no GPU runtime or device, or device_index is past the last device;
 *          *out is set to NULL.
 * -EINVAL: out is NULL, device_index < -1, or flags has unknown bits.
 * -ENOSYS: this build has no GPU support (never the case for vmaf-hip). */
int vmaf_hip_state_init(VmafHipState **out, VmafHipConfiguration cfg);

/* Makes vmaf extract on the state's device. Call it before features or
 * models are registered; those registered later use their GPU version where
 * one exists. The context holds its own reference to the device, valid for
 * the context's lifetime. A context made with n_threads 0 starts up to 4
 * threads of its own here, so vmaf_read_pictures() queues frames on the GPU
 * (several in flight) instead of waiting for each; as with worker threads,
 * scores are complete once the context is flushed.
 * -EINVAL: vmaf or state is NULL. */
int vmaf_hip_import_state(VmafContext *vmaf, VmafHipState *state);

/* Releases the state and sets *state to NULL. Accepts NULL and a pointer to
 * NULL. Call it after vmaf_close() of every context the state was imported
 * into. On NVIDIA the device's primary context, once no state uses it, is
 * released 2 s later on a background thread (VMAF_HIP_CONTEXT_LINGER_MS; 0
 * releases it here), so a state opened again soon skips its creation. */
void vmaf_hip_state_free(VmafHipState **state);

/* Writes one line per usable GPU to stdout (ordinal, name, vendor, compute
 * capability or gfx arch, memory) and returns how many there are; 0 when
 * there are none. */
int vmaf_hip_list_devices(void);

/* ------------------------------------------------------------------------
 * Extensions: vmaf-hip only, not part of upstream libvmaf. Test for them with
 * VMAF_HIP_HAVE_PREALLOCATED_PICTURES.
 * ------------------------------------------------------------------------ */
#define VMAF_HIP_HAVE_PREALLOCATED_PICTURES 1

/* Where vmaf_hip_preallocate_pictures() puts picture memory. */
enum VmafHipPicturePreallocationMethod {
    /* No pool: the call does nothing and returns 0. */
    VMAF_HIP_PICTURE_PREALLOCATION_METHOD_NONE = 0,
    /* Device memory of the first imported state's GPU, filled by the caller:
     * data[i] are device addresses (CUdeviceptr on NVIDIA, HIP device
     * pointers on AMD), every plane dense (stride[i] = width times bytes per
     * sample). GPU extractors read the planes in place; CPU extractors in the
     * same context read host copies of only the planes they use. Writes on
     * the legacy default stream (synchronous copies such as cuMemcpy2D or
     * hipMemcpy2D) are ordered before the library's reads; a caller writing
     * on a non-blocking stream of its own synchronises it before
     * vmaf_read_pictures(). The data[] pointers cannot be moved. */
    VMAF_HIP_PICTURE_PREALLOCATION_METHOD_DEVICE = 1,
    /* Host memory, as vmaf_preallocate_pictures(): after
     * vmaf_hip_import_state(), pictures of 1 MiB or more are page-locked when
     * the pool is made where the system allows it (else their uploads go
     * through staging copies). */
    VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST = 2,
    /* Page-locked host memory: the GPU reads each luma plane in place, with
     * no staging copy (when its rows are back to back: luma widths that are
     * multiples of 32). */
    VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST_PINNED = 3,
};

typedef struct VmafHipPictureConfiguration {
    VmafPictureParams pic_params;
    enum VmafHipPicturePreallocationMethod pic_prealloc_method;
    /* Pictures in the pool (at most 1024); 0 picks 2 per worker thread plus 4, at most 1024
     * (a GPU context with n_threads 0 counts its pipeline threads). */
    unsigned pic_cnt;
} VmafHipPictureConfiguration;

/* Allocates the context's picture pool (replacing an earlier one, also one
 * from vmaf_preallocate_pictures()). HOST_PINNED and DEVICE need
 * vmaf_hip_import_state() first; HOST_PINNED page-locks the pictures for
 * every device, DEVICE allocates them on the first imported state's device.
 * -EINVAL: vmaf is NULL, bad size, format or depth, a count above 1024, unknown method, or
 *          HOST_PINNED / DEVICE without an imported state.
 * -ENOMEM: host or device memory could not be allocated or page-locked. */
int vmaf_hip_preallocate_pictures(VmafContext *vmaf, VmafHipPictureConfiguration cfg);

/* Takes a picture from the pool into *pic, blocking while all are in use (a
 * pool that runs dry first makes up to three pictures more, once, for the
 * previous pictures a context keeps). It goes back to the pool when
 * released: by vmaf_picture_unref(), or by the library after
 * vmaf_read_pictures() has used it. Safe from several threads.
 * -EINVAL: NULL arguments, no pool, or the pool was closed by vmaf_close(). */
int vmaf_hip_fetch_preallocated_picture(VmafContext *vmaf, VmafPicture *pic);

/* Tests for vmaf_hip_picture_wrap(). */
#define VMAF_HIP_HAVE_PICTURE_WRAP 1

/* Called once the library no longer reads a wrapped picture's memory (from any thread). */
typedef void (*VmafHipReleaseCallback)(void *opaque);

/* Makes *pic a picture that reads the caller's planes in place instead of a
 * copy: plane i starts at data[i], rows stride[i] bytes apart, and its memory
 * spans h[i] * stride[i] bytes, last row's padding included (chroma planes of
 * the size vmaf_picture_alloc() gives them; data[1] and data[2] are ignored
 * for VMAF_PIX_FMT_YUV400P). Samples are uint8_t for bpc 8, else
 * native-endian uint16_t (data[i] and stride[i] then even). Use it as a
 * picture from vmaf_picture_alloc(): pass it to vmaf_read_pictures() or
 * release it with vmaf_picture_unref(). The memory must stay valid and
 * unchanged until release(opaque) is called, exactly once, when neither the
 * caller's picture nor the library holds it any more (at the latest before the
 * flush or vmaf_close() returns); release may be NULL.
 * GPU extractors copy the luma plane to the device; CPU extractors read it
 * where it is.
 * -EINVAL: pic or a needed data[i] is NULL, unknown pix_fmt, bpc outside
 *          8..16, zero size or a side above 65536, a stride shorter than a
 *          row or negative, odd pointers or strides for bpc above 8.
 * -ENOMEM: no memory for the picture's bookkeeping.
 * On failure release is not called and *pic is left empty. */
int vmaf_hip_picture_wrap(VmafPicture *pic, enum VmafPixelFormat pix_fmt, unsigned bpc,
                          unsigned w, unsigned h, void *const data[3], const ptrdiff_t stride[3],
                          VmafHipReleaseCallback release, void *opaque);

/* Tests for vmaf_hip_picture_wrap_device(). */
#define VMAF_HIP_HAVE_PICTURE_WRAP_DEVICE 1

/* As vmaf_hip_picture_wrap(), for planes in GPU memory: data[i] are device
 * addresses (CUdeviceptr on NVIDIA, HIP device pointers on AMD) on the GPU of
 * the first state imported into vmaf, usable in that state's GPU context (on
 * NVIDIA the device's primary context, or the CUcontext a libvmaf_cuda.h
 * state was given), with rows stride[i] bytes apart (a decoder's pitched
 * surfaces, FFmpeg's CUDA frames of a planar format). Nothing is copied: GPU
 * extractors read the luma in place (a reference and a distorted picture of
 * different strides cost a copy through the host for the padded one), CPU
 * extractors read host copies of only the planes they use. Writes on the
 * legacy default stream (synchronous copies, a decoder's work on blocking
 * streams) are ordered before the library's reads; a caller writing on a
 * non-blocking stream of its own synchronises it before vmaf_read_pictures().
 * release(opaque) is called exactly once, from any thread, when neither the
 * caller's picture nor the library holds the picture any more and the GPU has
 * finished reading it (at the latest before the flush or vmaf_close()
 * returns); release may be NULL. The data[] pointers cannot be moved. Calls
 * on one context must not overlap (-EBUSY), as for other calls.
 * -EINVAL: vmaf, pic or a needed data[i] is NULL, no imported GPU state, or
 *          the argument errors of vmaf_hip_picture_wrap(); on NVIDIA also a
 *          plane that is host memory, runs past its allocation, or is memory
 *          of another GPU or of another CUDA context than the state's.
 * -EBUSY:  another call on vmaf is running.
 * -ENOMEM: no memory for the picture's bookkeeping.
 * On failure release is not called and *pic is left empty. */
int vmaf_hip_picture_wrap_device(VmafContext *vmaf, VmafPicture *pic,
                                 enum VmafPixelFormat pix_fmt, unsigned bpc, unsigned w,
                                 unsigned h, void *const data[3], const ptrdiff_t stride[3],
                                 VmafHipReleaseCallback release, void *opaque);

/* Tests for vmaf_hip_state_init_cuda(). */
#define VMAF_HIP_HAVE_STATE_INIT_CUDA 1

/* As vmaf_hip_state_init(), on NVIDIA, in the caller's CUDA context cu_ctx
 * (a CUcontext, such as FFmpeg's AVCUDADeviceContext.cuda_ctx), which must
 * outlive the state, every context it is imported into and every picture
 * wrapped on those (vmaf_hip_state_free() and vmaf_close() first, and each
 * picture's release). Memory of that context (a decoder's frames) can then
 * be wrapped with vmaf_hip_picture_wrap_device() and
 * vmaf_hip_picture_wrap_device_semiplanar() and is read in place. The library
 * makes cu_ctx current (cuCtxSetCurrent) on the threads that use the state,
 * the calling one included: a caller keeping another context current there
 * pushes it again afterwards.
 * cfg.device_index -1 takes the context's device; any other index (numbered
 * as vmaf_hip_list_devices() prints them) must name that device.
 * -EXDEV:  cu_ctx belongs to another GPU than cfg.device_index.
 * -ENODEV: no CUDA driver, or a context the driver refuses.
 * -EINVAL: out or cu_ctx is NULL, device_index < -1, or flags has unknown
 *          bits.
 * -ENOMEM: no host or device memory for the state.
 * *out is NULL after every failure. */
int vmaf_hip_state_init_cuda(VmafHipState **out, VmafHipConfiguration cfg, void *cu_ctx);

/* Tests for the semi-planar calls below. */
#define VMAF_HIP_HAVE_SEMIPLANAR 1

/* Semi-planar 4:2:0 layouts, as hardware decoders output them: a luma plane,
 * then one plane of interleaved (Cb, Cr) pairs ((w + 1) / 2 pairs per row and
 * (h + 1) / 2 rows as decoders store them). The picture made from one is
 * VMAF_PIX_FMT_YUV420P with the same samples, its chroma planes w / 2 by h / 2
 * as vmaf_picture_alloc() makes them, so it scores exactly as the planar frame
 * (yuv420p, yuv420p10le, yuv420p12le, yuv420p16le) would; only the first w / 2
 * pairs of the first h / 2 chroma rows are read, and the strides must hold at
 * least the samples read of a row (w, and 2 * (w / 2) for the chroma). */
enum VmafHipSemiPlanarFormat {
    /* 8-bit samples (bpc 8). */
    VMAF_HIP_SEMIPLANAR_NV12 = 1,
    /* 10-bit samples in the high bits of native-endian 16-bit words (bpc 10). */
    VMAF_HIP_SEMIPLANAR_P010 = 2,
    /* 12-bit samples in the high bits of 16-bit words (bpc 12). */
    VMAF_HIP_SEMIPLANAR_P012 = 3,
    /* 16-bit samples (bpc 16). */
    VMAF_HIP_SEMIPLANAR_P016 = 4,
};

/* Makes *pic the planar picture of a semi-planar frame in host memory: data[0]
 * and stride[0] (bytes) give the luma plane, data[1] and stride[1] the
 * interleaved chroma plane. The samples are unpacked into memory of the
 * library's during the call; release(opaque) is called once the picture is
 * released (by vmaf_picture_unref() or after vmaf_read_pictures()), as for
 * vmaf_hip_picture_wrap(); release may be NULL.
 * -EINVAL: pic, data, stride or a plane is NULL, an unknown format, zero size
 *          or a side above 65536, a stride shorter than the samples read of a
 *          row or negative, odd pointers or strides for 16-bit words.
 * -ENOMEM: no memory for the picture.
 * On failure release is not called and *pic is left empty. */
int vmaf_hip_picture_wrap_semiplanar(VmafPicture *pic, enum VmafHipSemiPlanarFormat fmt,
                                     unsigned w, unsigned h, void *const data[2],
                                     const ptrdiff_t stride[2], VmafHipReleaseCallback release,
                                     void *opaque);

/* As vmaf_hip_picture_wrap_device(), for a semi-planar frame in GPU memory (a
 * decoder's NV12 or P010 surface, FFmpeg's CUDA frames of those formats):
 * data[0]/stride[0] the luma, data[1]/stride[1] the interleaved chroma, as
 * device addresses of the first imported state's GPU context. NV12 and P016
 * luma is read in place; P010 and P012 luma is shifted to its sample values
 * on the device. The chroma is split into two planes on the device only when
 * a feature registered on vmaf when this is called reads chroma (register
 * models and features first); otherwise data[1] is not read. The unpacking is
 * queued at vmaf_read_pictures() behind the caller's writes, with the same
 * ordering rules as vmaf_hip_picture_wrap_device(); the picture's data[1] and
 * data[2] are the library's chroma planes, or NULL when none were made.
 * -EINVAL: vmaf is NULL or has no imported GPU state, or the argument errors
 *          of vmaf_hip_picture_wrap_semiplanar() (data[1] must be a valid
 *          address even when it is not read), or a plane that is not device
 *          memory of that GPU (on NVIDIA: or memory of another CUDA context
 *          on it).
 * -EBUSY:  another call on vmaf is running.
 * -ENOMEM: no host or device memory for the picture.
 * On failure release is not called and *pic is left empty. */
int vmaf_hip_picture_wrap_device_semiplanar(VmafContext *vmaf, VmafPicture *pic,
                                            enum VmafHipSemiPlanarFormat fmt, unsigned w,
                                            unsigned h, void *const data[2],
                                            const ptrdiff_t stride[2],
                                            VmafHipReleaseCallback release, void *opaque);

#ifdef __cplusplus
}
#endif

#endif /* LIBVMAF_HIP_H_ */
