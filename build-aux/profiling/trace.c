/* CUPTI kernel/memcpy tracer, loaded by the driver through CUDA_INJECTION64_PATH.
 * Writes "K start end stream name" / "C start end stream kind bytes" lines to $TRACE_OUT;
 * with TRACE_API=1 also "A start end thread cbid" for every driver API call. */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
static FILE *out;
static void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max) {
  *size = 32 << 20; *buf = aligned_alloc(8, *size); *max = 0;
}
static void CUPTIAPI completed(CUcontext c, uint32_t s, uint8_t *buf, size_t size, size_t valid) {
  (void)c; (void)s; (void)size;
  CUpti_Activity *r = NULL;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      KERNEL_T *k = (KERNEL_T *)r;
      fprintf(out, "K %llu %llu %u %s\n", (unsigned long long)k->start, (unsigned long long)k->end, k->streamId, k->name);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      MEMCPY_T *m = (MEMCPY_T *)r;
      fprintf(out, "C %llu %llu %u %u %llu\n", (unsigned long long)m->start, (unsigned long long)m->end, m->streamId, (unsigned)m->copyKind, (unsigned long long)m->bytes);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      MEMSET_T *m = (MEMSET_T *)r;
      fprintf(out, "S %llu %llu %u %llu\n", (unsigned long long)m->start, (unsigned long long)m->end, m->streamId, (unsigned long long)m->bytes);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
      fprintf(out, "A %llu %llu %u %u\n", (unsigned long long)a->start, (unsigned long long)a->end, a->threadId, (unsigned)a->cbid);
    }
  }
  free(buf);
}
static void fin(void) { cuptiActivityFlushAll(1); if (out) fflush(out); }
int InitializeInjection(void) {
  const char *p = getenv("TRACE_OUT");
  out = fopen(p ? p : "/tmp/trace.txt", "w");
  cuptiActivityRegisterCallbacks(requested, completed);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  const char *api = getenv("TRACE_API");
  if (api && *api == '1')
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
  atexit(fin);
  return 1;
}
