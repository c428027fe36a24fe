// Prototype CUPTI injection library: facts for mlprof-inject (issue 21).
// Loaded by the CUDA driver through CUDA_INJECTION64_PATH.
// INJ_MODE: "none" (log the call only), "activity" (register buffers and enable
// activities, no subscriber), "subscribe" (also cuptiSubscribe_v2 "mlprof").
// INJ_LOG: file appended with one line per event and a summary at exit.
#include <cupti.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static FILE *log_file;
static _Atomic uint64_t kinds[128];
static _Atomic uint64_t kernel_ns, memcpy_bytes, buffers, records, dropped_total;
static _Atomic uint64_t callbacks_seen;
static uint64_t first_ts = UINT64_MAX, last_ts;
static pthread_mutex_t ts_lock = PTHREAD_MUTEX_INITIALIZER;

static void logf_(const char *fmt, const char *a, long b) {
  if (!log_file) return;
  fprintf(log_file, "[inj pid=%d] ", getpid());
  fprintf(log_file, fmt, a, b);
  fputc('\n', log_file);
  fflush(log_file);
}

static const char *errname(CUptiResult r) {
  const char *s = "?";
  cuptiGetResultString(r, &s);
  return s;
}

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
  *size = 4u << 20;
  *buf = aligned_alloc(8, *size);
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid) {
  (void)size;
  buffers++;
  CUpti_Activity *rec = NULL;
  uint64_t lo = UINT64_MAX, hi = 0;
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    records++;
    if ((unsigned)rec->kind < 128) kinds[rec->kind]++;
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)rec;
      kernel_ns += k->end - k->start;
      if (k->start < lo) lo = k->start;
      if (k->end > hi) hi = k->end;
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      memcpy_bytes += ((CUpti_ActivityMemcpy6 *)rec)->bytes;
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
  dropped_total += dropped;
  pthread_mutex_lock(&ts_lock);
  if (lo < first_ts) first_ts = lo;
  if (hi > last_ts) last_ts = hi;
  pthread_mutex_unlock(&ts_lock);
  free(buf);
}

static void CUPTIAPI on_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data) {
  (void)user; (void)domain; (void)cbid; (void)data;
  callbacks_seen++;
}

static void summary(const char *when, int force) {
  CUptiResult r = force ? cuptiActivityFlushAll(1) : CUPTI_SUCCESS;
  if (!log_file) return;
  fprintf(log_file,
          "[inj pid=%d] summary(%s) flush=%s buffers=%lu records=%lu dropped=%lu kernels=%lu "
          "kernel_ns=%lu memcpy=%lu memcpy_bytes=%lu memset=%lu runtime=%lu driver=%lu sync=%lu "
          "extcorr=%lu overhead=%lu callbacks=%lu span_ns=%lu\n",
          getpid(), when, errname(r), (unsigned long)buffers, (unsigned long)records,
          (unsigned long)dropped_total, (unsigned long)kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL],
          (unsigned long)kernel_ns, (unsigned long)kinds[CUPTI_ACTIVITY_KIND_MEMCPY],
          (unsigned long)memcpy_bytes, (unsigned long)kinds[CUPTI_ACTIVITY_KIND_MEMSET],
          (unsigned long)kinds[CUPTI_ACTIVITY_KIND_RUNTIME], (unsigned long)kinds[CUPTI_ACTIVITY_KIND_DRIVER],
          (unsigned long)kinds[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION],
          (unsigned long)kinds[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION],
          (unsigned long)kinds[CUPTI_ACTIVITY_KIND_OVERHEAD], (unsigned long)callbacks_seen,
          (unsigned long)(last_ts > first_ts ? last_ts - first_ts : 0));
  fflush(log_file);
}

static void at_exit(void) { summary("atexit", 1); }

static void *periodic(void *arg) {
  (void)arg;
  uint64_t last = UINT64_MAX;
  for (;;) {
    sleep(1);
    cuptiActivityFlushAll(0);
    if (records != last) {
      last = records;
      struct timespec rt;
      clock_gettime(CLOCK_MONOTONIC, &rt);
      char when[64];
      snprintf(when, sizeof when, "periodic t=%.1f", rt.tv_sec + rt.tv_nsec / 1e9);
      summary(when, 0);
    }
  }
  return NULL;
}

int InitializeInjection(void) {
  const char *path = getenv("INJ_LOG");
  log_file = fopen(path ? path : "/tmp/inj.log", "a");
  const char *mode = getenv("INJ_MODE");
  if (!mode) mode = "activity";
  uint32_t version = 0;
  CUptiResult r = cuptiGetVersion(&version);
  logf_("InitializeInjection mode=%s cupti_version=%ld", mode, r == CUPTI_SUCCESS ? (long)version : -1L);
  {
    uint64_t cupti_ts = 0;
    struct timespec rt, mono, raw;
    cuptiGetTimestamp(&cupti_ts);
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_MONOTONIC_RAW, &raw);
    if (log_file) {
      fprintf(log_file, "[inj pid=%d] clocks cupti=%lu realtime=%lu monotonic=%lu monotonic_raw=%lu\n", getpid(),
              (unsigned long)cupti_ts, (unsigned long)(rt.tv_sec * 1000000000ull + rt.tv_nsec),
              (unsigned long)(mono.tv_sec * 1000000000ull + mono.tv_nsec),
              (unsigned long)(raw.tv_sec * 1000000000ull + raw.tv_nsec));
      fflush(log_file);
    }
  }
  if (strcmp(mode, "none") == 0) return 1;
  if (strcmp(mode, "subscribe") == 0) {
    CUpti_SubscriberHandle sub;
    char old[256] = {0};
    CUpti_SubscriberParams params;
    memset(&params, 0, sizeof params);
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "mlprof";
    params.oldSubscriberName = old;
    params.oldSubscriberSize = sizeof old;
    r = cuptiSubscribe_v2(&sub, on_callback, NULL, &params);
    logf_("cuptiSubscribe_v2 -> %s (%ld)", errname(r), (long)r);
    if (r != CUPTI_SUCCESS) logf_("old subscriber: %s%ld", old, 0);
    if (r == CUPTI_SUCCESS) {
      r = cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
      logf_("cuptiEnableDomain(runtime) -> %s (%ld)", errname(r), (long)r);
    }
  }
  r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  logf_("cuptiActivityRegisterCallbacks -> %s (%ld)", errname(r), (long)r);
  CUpti_ActivityKind wanted[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                 CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
                                 CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                 CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD};
  size_t n_wanted = sizeof wanted / sizeof wanted[0];
  const char *kinds_env = getenv("INJ_KINDS");
  if (kinds_env && *kinds_env) {
    n_wanted = 0;
    for (const char *p = kinds_env; *p && n_wanted < 7;) {
      wanted[n_wanted++] = (CUpti_ActivityKind)strtol(p, (char **)&p, 10);
      if (*p == ',') p++;
    }
  }
  for (size_t i = 0; i < n_wanted; i++) {
    logf_("enable %s%ld", "kind ", (long)wanted[i]);
    r = cuptiActivityEnable(wanted[i]);
    if (r != CUPTI_SUCCESS) logf_("cuptiActivityEnable -> %s (kind %ld)", errname(r), (long)wanted[i]);
  }
  r = cuptiActivityFlushPeriod(1000);
  logf_("cuptiActivityFlushPeriod(1000) -> %s (%ld)", errname(r), (long)r);
  atexit(at_exit);
  pthread_t t;
  pthread_create(&t, NULL, periodic, NULL);
  pthread_detach(t);
  return 1;
}
