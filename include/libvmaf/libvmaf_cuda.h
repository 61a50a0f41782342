/*
 * libvmaf_cuda.h - libvmaf 3.2's CUDA API, provided by vmaf-hip.
 *
 * Declarations, struct layouts and enum values are those of upstream libvmaf
 * v3.2.0, so programs written for its CUDA build (FFmpeg's libvmaf_cuda
 * filter, for one) compile and link against vmaf-hip unchanged. The work runs
 * on vmaf-hip's GPU backend (the NVIDIA driver, loaded at run time), with
 * scores identical to the CPU path. Without the CUDA driver or an NVIDIA GPU,
 * vmaf_cuda_state_init() returns -ENODEV.
 *
 * All functions return 0 or a negative errno value.
 */

#ifndef __VMAF_CUDA_H__
#define __VMAF_CUDA_H__

#include "libvmaf/libvmaf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One GPU and the CUDA context work runs in. Opaque. There is no free call:
 * the first context it is imported into takes its device over, and the
 * device is released with the last context that uses it. */
typedef struct VmafCudaState VmafCudaState;

typedef struct VmafCudaConfiguration {
    /* The CUcontext to run in, kept alive by the caller while contexts use
     * the state (FFmpeg passes its hardware device's context); NULL selects
     * the primary context of the first NVIDIA GPU. */
    void *cu_ctx;
} VmafCudaConfiguration;

/* Opens the GPU of cfg.cu_ctx into *cu_state.
 * -EINVAL: cu_state is NULL.
 * -ENODEV: no CUDA driver or NVIDIA GPU, or the driver refuses the context
 *          (*cu_state is then NULL). */
int vmaf_cuda_state_init(VmafCudaState **cu_state, VmafCudaConfiguration cfg);

/* Makes vmaf extract on the state's GPU; call it before features or models
 * are registered. -EINVAL: a NULL argument. */
int vmaf_cuda_import_state(VmafContext *vmaf, VmafCudaState *cu_state);

enum VmafCudaPicturePreallocationMethod {
    VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_NONE = 0,
    /* Device memory of the state's GPU: data[i] are CUdeviceptr values the
     * caller fills (cuMemcpy2D into stride[i]-byte rows; every plane is
     * dense). Copies on the legacy default stream, or synchronous ones, are
     * ordered before the library reads the picture; a caller copying on a
     * non-blocking stream of its own synchronises it before
     * vmaf_read_pictures(). */
    VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_DEVICE,
    /* Ordinary host memory. */
    VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_HOST,
    /* Page-locked host memory, read by the GPU in place. */
    VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_HOST_PINNED,
};

typedef struct VmafCudaPictureConfiguration {
    struct {
        unsigned w, h;
        unsigned bpc;
        enum VmafPixelFormat pix_fmt;
    } pic_params;
    enum VmafCudaPicturePreallocationMethod pic_prealloc_method;
} VmafCudaPictureConfiguration;

/* Allocates the context's picture pool (sized for its worker threads; a
 * dry pool lends three pictures more, then blocks). NONE does nothing.
 * -EINVAL: vmaf is NULL, a bad size, format or depth, an unknown method, or
 *          DEVICE / HOST_PINNED before vmaf_cuda_import_state().
 * -ENOMEM: memory could not be allocated. */
int vmaf_cuda_preallocate_pictures(VmafContext *vmaf,
                                   VmafCudaPictureConfiguration cfg);

/* Takes a picture from the pool into *pic, blocking while all are in use; it
 * returns to the pool when released (vmaf_picture_unref(), or by the
 * library once vmaf_read_pictures() has used it).
 * -EINVAL: a NULL argument, no pool, or the pool was closed by vmaf_close(). */
int vmaf_cuda_fetch_preallocated_picture(VmafContext *vmaf, VmafPicture *pic);

#ifdef __cplusplus
}
#endif

#endif /* __VMAF_CUDA_H__ */
