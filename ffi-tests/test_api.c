/* A libvmaf consumer written the way FFmpeg's libvmaf filter drives the API: default model with
 * an option overload, an extra feature, pictures allocated per frame and filled row by row,
 * flush, pooled score, JSON log. The harness compares the log with upstream's.
 *
 * usage: test_api REF DIST OUT.json N_THREADS            (y4m input)
 *        test_api REF DIST OUT.json N_THREADS W H FMT BPC (raw input; FMT 420, 422 or 444) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvmaf.h> /* the way FFmpeg includes it: pkg-config adds include/libvmaf */

struct video {
    FILE *f;
    int y4m;
    unsigned w, h, bpc;
    enum VmafPixelFormat fmt;
    size_t plane_w[3], plane_h[3]; /* sizes in the file (chroma rounded up) */
    uint8_t *buf;
    size_t frame_bytes;
};

static int parse_y4m_header(struct video *v)
{
    char line[512];
    if (!fgets(line, sizeof(line), v->f) || strncmp(line, "YUV4MPEG2 ", 10)) return -1;
    v->fmt = VMAF_PIX_FMT_YUV420P;
    v->bpc = 8;
    for (char *tok = strtok(line + 10, " \n"); tok; tok = strtok(NULL, " \n")) {
        if (tok[0] == 'W') v->w = (unsigned)atoi(tok + 1);
        if (tok[0] == 'H') v->h = (unsigned)atoi(tok + 1);
        if (tok[0] == 'C') {
            if (!strncmp(tok + 1, "420", 3)) v->fmt = VMAF_PIX_FMT_YUV420P;
            else if (!strncmp(tok + 1, "422", 3)) v->fmt = VMAF_PIX_FMT_YUV422P;
            else if (!strncmp(tok + 1, "444", 3)) v->fmt = VMAF_PIX_FMT_YUV444P;
            else if (!strncmp(tok + 1, "mono", 4)) v->fmt = VMAF_PIX_FMT_YUV400P;
            else return -1;
            const char *p = strchr(tok, 'p');
            if (p && p[1] >= '0' && p[1] <= '9') v->bpc = (unsigned)atoi(p + 1);
        }
    }
    return v->w && v->h ? 0 : -1;
}

static int open_video(struct video *v, const char *path, char **raw_args)
{
    memset(v, 0, sizeof(*v));
    v->f = fopen(path, "rb");
    if (!v->f) return -1;
    if (!raw_args) {
        v->y4m = 1;
        if (parse_y4m_header(v)) return -1;
    } else {
        v->w = (unsigned)atoi(raw_args[0]);
        v->h = (unsigned)atoi(raw_args[1]);
        int f = atoi(raw_args[2]);
        v->fmt = f == 420 ? VMAF_PIX_FMT_YUV420P
               : f == 422 ? VMAF_PIX_FMT_YUV422P
               : f == 444 ? VMAF_PIX_FMT_YUV444P
                          : VMAF_PIX_FMT_UNKNOWN;
        v->bpc = (unsigned)atoi(raw_args[3]);
        if (!v->w || !v->h || v->fmt == VMAF_PIX_FMT_UNKNOWN) return -1;
    }
    unsigned sx = v->fmt == VMAF_PIX_FMT_YUV444P ? 0 : 1;
    unsigned sy = v->fmt == VMAF_PIX_FMT_YUV420P ? 1 : 0;
    size_t bps = v->bpc > 8 ? 2 : 1;
    v->plane_w[0] = v->w;
    v->plane_h[0] = v->h;
    for (int p = 1; p < 3; p++) {
        v->plane_w[p] = v->fmt == VMAF_PIX_FMT_YUV400P ? 0 : (v->w + sx) >> sx;
        v->plane_h[p] = v->fmt == VMAF_PIX_FMT_YUV400P ? 0 : (v->h + sy) >> sy;
    }
    for (int p = 0; p < 3; p++) v->frame_bytes += v->plane_w[p] * v->plane_h[p] * bps;
    v->buf = malloc(v->frame_bytes);
    return v->buf ? 0 : -1;
}

/* Reads the next frame into v->buf; 0 at end of file, 1 for a frame, -1 on error. */
static int read_frame(struct video *v)
{
    if (v->y4m) {
        char hdr[256];
        if (!fgets(hdr, sizeof(hdr), v->f)) return 0;
        if (strncmp(hdr, "FRAME", 5)) return -1;
    }
    size_t n = fread(v->buf, 1, v->frame_bytes, v->f);
    if (n == 0 && !v->y4m) return 0;
    return n == v->frame_bytes ? 1 : -1;
}

/* Like FFmpeg's copy_picture_data: one memcpy per row of each plane. */
static int to_picture(const struct video *v, VmafPicture *pic)
{
    int err = vmaf_picture_alloc(pic, v->fmt, v->bpc, v->w, v->h);
    if (err) return err;
    size_t bps = v->bpc > 8 ? 2 : 1;
    const uint8_t *src = v->buf;
    for (int p = 0; p < 3; p++) {
        for (unsigned y = 0; y < pic->h[p]; y++) {
            memcpy((uint8_t *)pic->data[p] + y * pic->stride[p], src + y * v->plane_w[p] * bps,
                   pic->w[p] * bps);
        }
        src += v->plane_w[p] * v->plane_h[p] * bps;
    }
    return 0;
}

#define TRY(call)                                                                          \
    do {                                                                                   \
        int err_ = (call);                                                                 \
        if (err_) {                                                                        \
            fprintf(stderr, "test_api: %s failed: %d\n", #call, err_);                    \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 9) {
        fprintf(stderr, "usage: %s REF DIST OUT.json N_THREADS [W H FMT BPC]\n", argv[0]);
        return 2;
    }
    struct video ref, dist;
    if (open_video(&ref, argv[1], argc == 9 ? argv + 5 : NULL) ||
        open_video(&dist, argv[2], argc == 9 ? argv + 5 : NULL)) {
        fprintf(stderr, "test_api: cannot read %s / %s\n", argv[1], argv[2]);
        return 1;
    }
    if (ref.w != dist.w || ref.h != dist.h || ref.fmt != dist.fmt || ref.bpc != dist.bpc) {
        fprintf(stderr, "test_api: inputs differ in format\n");
        return 1;
    }

    VmafConfiguration cfg = {
        .log_level = VMAF_LOG_LEVEL_WARNING,
        .n_threads = (unsigned)atoi(argv[4]),
        .n_subsample = 1,
        .cpumask = 0,
        .gpumask = 0,
    };
    VmafContext *vmaf = NULL;
    TRY(vmaf_init(&vmaf, cfg));

    VmafModelConfig model_cfg = { .name = "vmaf", .flags = VMAF_MODEL_FLAGS_DEFAULT };
    VmafModel *model = NULL;
    TRY(vmaf_model_load(&model, &model_cfg, "vmaf_v0.6.1"));

    /* "adm.adm_enhn_gain_limit=100|vif.vif_enhn_gain_limit=100" in FFmpeg's model option:
     * the defaults, so stored names and values stay those of the plain model. */
    VmafFeatureDictionary *d = NULL;
    TRY(vmaf_feature_dictionary_set(&d, "adm_enhn_gain_limit", "100"));
    TRY(vmaf_model_feature_overload(model, "adm", d));
    d = NULL;
    TRY(vmaf_feature_dictionary_set(&d, "vif_enhn_gain_limit", "100.0"));
    TRY(vmaf_model_feature_overload(model, "vif", d));

    TRY(vmaf_use_features_from_model(vmaf, model));
    TRY(vmaf_use_feature(vmaf, "psnr", NULL));

    unsigned frame_cnt = 0;
    for (;;) {
        int r = read_frame(&ref), s = read_frame(&dist);
        if (r < 0 || s < 0 || r != s) {
            fprintf(stderr, "test_api: truncated input at frame %u\n", frame_cnt);
            return 1;
        }
        if (!r) break;
        VmafPicture pic_ref, pic_dist;
        TRY(to_picture(&ref, &pic_ref));
        TRY(to_picture(&dist, &pic_dist));
        TRY(vmaf_read_pictures(vmaf, &pic_ref, &pic_dist, frame_cnt++));
    }
    TRY(vmaf_read_pictures(vmaf, NULL, NULL, 0));

    double score;
    TRY(vmaf_score_pooled(vmaf, model, VMAF_POOL_METHOD_MEAN, &score, 0, frame_cnt - 1));
    printf("VMAF score: %f (%u frames)\n", score, frame_cnt);
    TRY(vmaf_write_output(vmaf, argv[3], VMAF_OUTPUT_FORMAT_JSON));

    vmaf_model_destroy(model);
    TRY(vmaf_close(vmaf));
    fclose(ref.f);
    fclose(dist.f);
    free(ref.buf);
    free(dist.buf);
    return 0;
}
