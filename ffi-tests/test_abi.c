/* Layout and constant checks: every struct and enum of the installed headers must match
 * libvmaf 3.2's ABI on LP64 (sizes and offsets measured on an upstream build). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <libvmaf/libvmaf.h>
#include <libvmaf/version.h>
#include <libvmaf/libvmaf_cuda.h>

#define CHECK(cond) _Static_assert(cond, #cond)

CHECK(sizeof(VmafPicture) == 96);
CHECK(_Alignof(VmafPicture) == 8);
CHECK(offsetof(VmafPicture, pix_fmt) == 0);
CHECK(offsetof(VmafPicture, bpc) == 4);
CHECK(offsetof(VmafPicture, w) == 8);
CHECK(offsetof(VmafPicture, h) == 20);
CHECK(offsetof(VmafPicture, stride) == 32);
CHECK(offsetof(VmafPicture, data) == 56);
CHECK(offsetof(VmafPicture, ref) == 80);
CHECK(offsetof(VmafPicture, priv) == 88);
CHECK(sizeof(((VmafPicture *)0)->stride[0]) == sizeof(ptrdiff_t));

CHECK(sizeof(VmafConfiguration) == 32);
CHECK(_Alignof(VmafConfiguration) == 8);
CHECK(offsetof(VmafConfiguration, log_level) == 0);
CHECK(offsetof(VmafConfiguration, n_threads) == 4);
CHECK(offsetof(VmafConfiguration, n_subsample) == 8);
CHECK(offsetof(VmafConfiguration, cpumask) == 16);
CHECK(offsetof(VmafConfiguration, gpumask) == 24);

CHECK(sizeof(VmafModelConfig) == 16);
CHECK(offsetof(VmafModelConfig, name) == 0);
CHECK(offsetof(VmafModelConfig, flags) == 8);

CHECK(sizeof(VmafModelCollectionScore) == 40);
CHECK(offsetof(VmafModelCollectionScore, type) == 0);
CHECK(offsetof(VmafModelCollectionScore, bootstrap.bagging_score) == 8);
CHECK(offsetof(VmafModelCollectionScore, bootstrap.stddev) == 16);
CHECK(offsetof(VmafModelCollectionScore, bootstrap.ci.p95.lo) == 24);
CHECK(offsetof(VmafModelCollectionScore, bootstrap.ci.p95.hi) == 32);

CHECK(sizeof(VmafPictureConfiguration) == 20);
CHECK(_Alignof(VmafPictureConfiguration) == 4);
CHECK(offsetof(VmafPictureConfiguration, pic_params.w) == 0);
CHECK(offsetof(VmafPictureConfiguration, pic_params.h) == 4);
CHECK(offsetof(VmafPictureConfiguration, pic_params.bpc) == 8);
CHECK(offsetof(VmafPictureConfiguration, pic_params.pix_fmt) == 12);
CHECK(offsetof(VmafPictureConfiguration, pic_cnt) == 16);

/* libvmaf_cuda.h, measured on upstream v3.2.0's header. */
CHECK(sizeof(VmafCudaConfiguration) == 8);
CHECK(_Alignof(VmafCudaConfiguration) == 8);
CHECK(offsetof(VmafCudaConfiguration, cu_ctx) == 0);
CHECK(sizeof(VmafCudaPictureConfiguration) == 20);
CHECK(_Alignof(VmafCudaPictureConfiguration) == 4);
CHECK(offsetof(VmafCudaPictureConfiguration, pic_params.w) == 0);
CHECK(offsetof(VmafCudaPictureConfiguration, pic_params.h) == 4);
CHECK(offsetof(VmafCudaPictureConfiguration, pic_params.bpc) == 8);
CHECK(offsetof(VmafCudaPictureConfiguration, pic_params.pix_fmt) == 12);
CHECK(offsetof(VmafCudaPictureConfiguration, pic_prealloc_method) == 16);
CHECK(sizeof(enum VmafCudaPicturePreallocationMethod) == 4);
CHECK(VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_NONE == 0);
CHECK(VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_DEVICE == 1);
CHECK(VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_HOST == 2);
CHECK(VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_HOST_PINNED == 3);
/* The prototypes, as upstream declares them. */
static int (*const p_state_init)(VmafCudaState **, VmafCudaConfiguration) __attribute__((unused)) =
    vmaf_cuda_state_init;
static int (*const p_import)(VmafContext *, VmafCudaState *) __attribute__((unused)) =
    vmaf_cuda_import_state;
static int (*const p_prealloc)(VmafContext *, VmafCudaPictureConfiguration) __attribute__((unused)) =
    vmaf_cuda_preallocate_pictures;
static int (*const p_fetch)(VmafContext *, VmafPicture *) __attribute__((unused)) =
    vmaf_cuda_fetch_preallocated_picture;

CHECK(sizeof(enum VmafPixelFormat) == 4);
CHECK(sizeof(enum VmafLogLevel) == 4);
CHECK(sizeof(enum VmafPoolingMethod) == 4);
CHECK(sizeof(enum VmafOutputFormat) == 4);
CHECK(sizeof(enum VmafModelCollectionScoreType) == 4);

CHECK(VMAF_LOG_LEVEL_NONE == 0 && VMAF_LOG_LEVEL_ERROR == 1 && VMAF_LOG_LEVEL_WARNING == 2);
CHECK(VMAF_LOG_LEVEL_INFO == 3 && VMAF_LOG_LEVEL_DEBUG == 4);
CHECK(VMAF_OUTPUT_FORMAT_NONE == 0 && VMAF_OUTPUT_FORMAT_XML == 1 && VMAF_OUTPUT_FORMAT_JSON == 2);
CHECK(VMAF_OUTPUT_FORMAT_CSV == 3 && VMAF_OUTPUT_FORMAT_SUB == 4);
CHECK(VMAF_POOL_METHOD_UNKNOWN == 0 && VMAF_POOL_METHOD_MIN == 1 && VMAF_POOL_METHOD_MAX == 2);
CHECK(VMAF_POOL_METHOD_MEAN == 3 && VMAF_POOL_METHOD_HARMONIC_MEAN == 4);
CHECK(VMAF_POOL_METHOD_NB == 5);
CHECK(VMAF_PIX_FMT_UNKNOWN == 0 && VMAF_PIX_FMT_YUV420P == 1 && VMAF_PIX_FMT_YUV422P == 2);
CHECK(VMAF_PIX_FMT_YUV444P == 3 && VMAF_PIX_FMT_YUV400P == 4);
CHECK(VMAF_MODEL_FLAGS_DEFAULT == 0 && VMAF_MODEL_FLAG_DISABLE_CLIP == 1);
CHECK(VMAF_MODEL_FLAG_ENABLE_TRANSFORM == 2 && VMAF_MODEL_FLAG_DISABLE_TRANSFORM == 4);
CHECK(VMAF_MODEL_COLLECTION_SCORE_UNKNOWN == 0 && VMAF_MODEL_COLLECTION_SCORE_BOOTSTRAP == 1);

CHECK(VMAF_API_VERSION_MAJOR == 3 && VMAF_API_VERSION_MINOR == 2 && VMAF_API_VERSION_PATCH == 0);

/* Every public function, with upstream's exact prototype: assigning to a pointer of the
 * upstream type fails to compile on any mismatch. */
static int (*const fn_init)(VmafContext **, VmafConfiguration) = vmaf_init;
static int (*const fn_use_model)(VmafContext *, VmafModel *) = vmaf_use_features_from_model;
static int (*const fn_use_mc)(VmafContext *, VmafModelCollection *) =
    vmaf_use_features_from_model_collection;
static int (*const fn_use_feature)(VmafContext *, const char *, VmafFeatureDictionary *) =
    vmaf_use_feature;
static int (*const fn_import)(VmafContext *, const char *, double, unsigned) =
    vmaf_import_feature_score;
static int (*const fn_read)(VmafContext *, VmafPicture *, VmafPicture *, unsigned) =
    vmaf_read_pictures;
static int (*const fn_score)(VmafContext *, VmafModel *, double *, unsigned) = vmaf_score_at_index;
static int (*const fn_score_mc)(VmafContext *, VmafModelCollection *, VmafModelCollectionScore *,
                                unsigned) = vmaf_score_at_index_model_collection;
static int (*const fn_fscore)(VmafContext *, const char *, double *, unsigned) =
    vmaf_feature_score_at_index;
static int (*const fn_pooled)(VmafContext *, VmafModel *, enum VmafPoolingMethod, double *,
                              unsigned, unsigned) = vmaf_score_pooled;
static int (*const fn_pooled_mc)(VmafContext *, VmafModelCollection *, enum VmafPoolingMethod,
                                 VmafModelCollectionScore *, unsigned, unsigned) =
    vmaf_score_pooled_model_collection;
static int (*const fn_fpooled)(VmafContext *, const char *, enum VmafPoolingMethod, double *,
                               unsigned, unsigned) = vmaf_feature_score_pooled;
static int (*const fn_prealloc)(VmafContext *, VmafPictureConfiguration) =
    vmaf_preallocate_pictures;
static int (*const fn_fetch)(VmafContext *, VmafPicture *) = vmaf_fetch_preallocated_picture;
static int (*const fn_close)(VmafContext *) = vmaf_close;
static int (*const fn_write)(VmafContext *, const char *, enum VmafOutputFormat) =
    vmaf_write_output;
static const char *(*const fn_version)(void) = vmaf_version;
static int (*const fn_mload)(VmafModel **, VmafModelConfig *, const char *) = vmaf_model_load;
static int (*const fn_mload_path)(VmafModel **, VmafModelConfig *, const char *) =
    vmaf_model_load_from_path;
static int (*const fn_moverload)(VmafModel *, const char *, VmafFeatureDictionary *) =
    vmaf_model_feature_overload;
static void (*const fn_mdestroy)(VmafModel *) = vmaf_model_destroy;
static int (*const fn_mcload)(VmafModel **, VmafModelCollection **, VmafModelConfig *,
                              const char *) = vmaf_model_collection_load;
static int (*const fn_mcload_path)(VmafModel **, VmafModelCollection **, VmafModelConfig *,
                                   const char *) = vmaf_model_collection_load_from_path;
static int (*const fn_mcoverload)(VmafModel *, VmafModelCollection **, const char *,
                                  VmafFeatureDictionary *) = vmaf_model_collection_feature_overload;
static void (*const fn_mcdestroy)(VmafModelCollection *) = vmaf_model_collection_destroy;
static int (*const fn_palloc)(VmafPicture *, enum VmafPixelFormat, unsigned, unsigned, unsigned) =
    vmaf_picture_alloc;
static int (*const fn_punref)(VmafPicture *) = vmaf_picture_unref;
static int (*const fn_dset)(VmafFeatureDictionary **, const char *, const char *) =
    vmaf_feature_dictionary_set;
static int (*const fn_dfree)(VmafFeatureDictionary **) = vmaf_feature_dictionary_free;

int main(void)
{
    const void *fns[] = {
        (const void *)fn_init, (const void *)fn_use_model, (const void *)fn_use_mc,
        (const void *)fn_use_feature, (const void *)fn_import, (const void *)fn_read,
        (const void *)fn_score, (const void *)fn_score_mc, (const void *)fn_fscore,
        (const void *)fn_pooled, (const void *)fn_pooled_mc, (const void *)fn_fpooled,
        (const void *)fn_prealloc, (const void *)fn_fetch, (const void *)fn_close,
        (const void *)fn_write, (const void *)fn_version, (const void *)fn_mload,
        (const void *)fn_mload_path, (const void *)fn_moverload, (const void *)fn_mdestroy,
        (const void *)fn_mcload, (const void *)fn_mcload_path, (const void *)fn_mcoverload,
        (const void *)fn_mcdestroy, (const void *)fn_palloc, (const void *)fn_punref,
        (const void *)fn_dset, (const void *)fn_dfree,
    };
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        if (!fns[i]) {
            fprintf(stderr, "function %zu unresolved\n", i);
            return 1;
        }
    }

    /* The runtime layout seen by the library: a picture it fills must land where C reads. */
    VmafPicture pic;
    memset(&pic, 0xff, sizeof(pic));
    if (vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV420P, 10, 33, 17)) return 1;
    int ok = pic.pix_fmt == VMAF_PIX_FMT_YUV420P && pic.bpc == 10 && pic.w[0] == 33 &&
             pic.w[1] == 16 && pic.w[2] == 16 && pic.h[0] == 17 && pic.h[1] == 8 &&
             pic.h[2] == 8 && pic.stride[0] == 64 * 2 && pic.stride[1] == 32 * 2 &&
             pic.stride[2] == 32 * 2 && pic.data[0] && pic.data[1] && pic.data[2] && pic.ref &&
             !pic.priv;
    if (vmaf_picture_unref(&pic)) return 1;
    if (!ok) {
        fprintf(stderr, "runtime picture layout mismatch\n");
        return 1;
    }
    const char *v = vmaf_version();
    if (!v || strcmp(v, "3.2.0")) {
        fprintf(stderr, "unexpected version %s\n", v ? v : "(null)");
        return 1;
    }
    printf("test_abi: ok\n");
    return 0;
}
