/* A stand-in for libcupti and the CUDA driver, for testing mlprof-inject without a GPU
 * (the pattern of parcagpu's test/mock_cupti.c). Built twice by crates/cli/tests/run_cupti.rs:
 *
 * - as libmock_cupti.so (-DMOCK_LIBRARY): the CUPTI entry points mlprof-inject calls.
 *   Activity buffers are requested from and completed to the injection's callbacks as
 *   CUPTI does; records of kinds not enabled are ignored; cuptiActivityGetNextRecord
 *   walks the offsets each record was written at.
 * - as fake_cuda_job (-DMOCK_JOB): a "CUDA program" that does what the driver does at
 *   cuInit (dlopen CUDA_INJECTION64_PATH, call InitializeInjection), waits for kernel
 *   recording to be enabled, then replays a script of records (written by the test
 *   with mlprof-cupti's layouts), placing each record's name in its own memory.
 *
 * Environment: MOCK_CUPTI_FORCED_ONLY=1 makes only a forced flush hand buffers back;
 * MOCK_CUPTI_SUBSCRIBED=1 makes cuptiSubscribe fail as with another
 * subscriber (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED); MOCK_CUPTI_DROPPED=N makes
 * the first drop count N. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*requested_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*completed_fn)(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid);

#ifdef MOCK_LIBRARY
#define SUCCESS 0
#define ERROR_MAX_LIMIT_REACHED 12
#define ERROR_MULTIPLE_SUBSCRIBERS 39
#define MAX_OFFSETS (1 << 16)
#define TABLE 128

/* Recursive: the completion callback asks for the drop count while a flush holds it. */
static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static requested_fn requested;
static completed_fn completed;
static uint64_t enabled[2];
static uint8_t *current;
static size_t current_size, current_used;
static uint32_t offsets[MAX_OFFSETS];
static size_t offset_count;
static size_t dropped_pending;
static int dropped_read;
/* Record offsets of completed buffers, for cuptiActivityGetNextRecord. */
static struct { uint8_t *buffer; uint32_t *offsets; size_t count; } table[TABLE];
static size_t table_next;

int cuptiGetVersion(uint32_t *v) { *v = 130001; return SUCCESS; }
int cuptiGetTimestamp(uint64_t *t) {
    struct timespec ts; clock_gettime(CLOCK_REALTIME, &ts);
    *t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec; return SUCCESS;
}
int cuptiSubscribe(void **handle, void *callback, void *user) {
    (void)callback; (void)user;
    const char *other = getenv("MOCK_CUPTI_SUBSCRIBED");
    if (other && strcmp(other, "1") == 0) return ERROR_MULTIPLE_SUBSCRIBERS;
    *handle = (void *)0x1; return SUCCESS;
}
int cuptiUnsubscribe(void *handle) { (void)handle; return SUCCESS; }
/* CUPTI 13's subscribe: names the subscriber already there when it refuses. */
typedef struct { size_t struct_size; const char *name; char *old_name; size_t old_size; } subscriber_params;
int cuptiSubscribe_v2(void **handle, void *callback, void *user, subscriber_params *params) {
    int result = cuptiSubscribe(handle, callback, user);
    if (result == ERROR_MULTIPLE_SUBSCRIBERS && params && params->struct_size >= sizeof(subscriber_params) && params->old_name && params->old_size > 0) {
        snprintf(params->old_name, params->old_size, "%s", "CUPTI for Nsight Systems");
    }
    return result;
}
int cuptiActivityRegisterCallbacks(requested_fn r, completed_fn c) { requested = r; completed = c; return SUCCESS; }
int cuptiActivityEnable(uint32_t kind) {
    if (kind >= 128) return 1;
    pthread_mutex_lock(&lock); enabled[kind / 64] |= 1ull << (kind % 64); pthread_mutex_unlock(&lock); return SUCCESS;
}
int cuptiActivityDisable(uint32_t kind) {
    if (kind >= 128) return 1;
    pthread_mutex_lock(&lock); enabled[kind / 64] &= ~(1ull << (kind % 64)); pthread_mutex_unlock(&lock); return SUCCESS;
}
static int is_enabled(uint32_t kind) { return kind < 128 && (enabled[kind / 64] >> (kind % 64)) & 1; }
int mock_cupti_enabled(uint32_t kind) { pthread_mutex_lock(&lock); int e = is_enabled(kind); pthread_mutex_unlock(&lock); return e; }

/* Hands the current buffer back through the completion callback. Called with the lock. */
static void complete_current(void) {
    if (!current) return;
    uint8_t *buffer = current; size_t size = current_size, used = current_used;
    uint32_t *copy = malloc(offset_count * sizeof(uint32_t) + 1);
    memcpy(copy, offsets, offset_count * sizeof(uint32_t));
    size_t slot = table_next++ % TABLE;
    free(table[slot].offsets);
    table[slot].buffer = buffer; table[slot].offsets = copy; table[slot].count = offset_count;
    current = NULL; current_used = 0; offset_count = 0;
    completed(NULL, 0, buffer, size, used);
}

int cuptiActivityFlushAll(uint32_t flag) {
    /* MOCK_CUPTI_FORCED_ONLY=1: an unforced flush hands back nothing (the records are not
     * complete yet, as CUPTI may say of a kernel still running); only a forced one does. */
    const char *forced_only = getenv("MOCK_CUPTI_FORCED_ONLY");
    if (forced_only && *forced_only == '1' && !(flag & 1u)) return SUCCESS;
    pthread_mutex_lock(&lock); if (current_used > 0) complete_current(); pthread_mutex_unlock(&lock); return SUCCESS;
}

/* Writes one record into the current buffer, as CUPTI would; 0 when its kind is off. */
int mock_cupti_emit(const uint8_t *record, size_t len) {
    uint32_t kind; memcpy(&kind, record, 4);
    pthread_mutex_lock(&lock);
    if (!is_enabled(kind)) { pthread_mutex_unlock(&lock); return 0; }
    size_t aligned = (len + 7) & ~(size_t)7;
    if (current && (current_used + aligned > current_size || offset_count == MAX_OFFSETS)) complete_current();
    if (!current) {
        size_t max_records = 0;
        requested(&current, &current_size, &max_records);
        if (!current || current_size < aligned) { current = NULL; dropped_pending++; pthread_mutex_unlock(&lock); return 1; }
    }
    memcpy(current + current_used, record, len);
    offsets[offset_count++] = (uint32_t)current_used;
    current_used += aligned;
    pthread_mutex_unlock(&lock);
    return 1;
}

int cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, uint8_t **record) {
    pthread_mutex_lock(&lock);
    int result = ERROR_MAX_LIMIT_REACHED;
    for (size_t i = 0; i < TABLE; i++) {
        if (table[i].buffer != buffer || !table[i].offsets) continue;
        size_t next = 0;
        if (*record) {
            uint32_t at = (uint32_t)(*record - buffer);
            while (next < table[i].count && table[i].offsets[next] <= at) next++;
        }
        if (next < table[i].count && table[i].offsets[next] < valid) { *record = buffer + table[i].offsets[next]; result = SUCCESS; }
        break;
    }
    pthread_mutex_unlock(&lock);
    return result;
}
int cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *dropped) {
    (void)ctx; (void)stream;
    pthread_mutex_lock(&lock);
    *dropped = dropped_pending; dropped_pending = 0;
    const char *extra = getenv("MOCK_CUPTI_DROPPED");
    if (extra && !dropped_read) { *dropped += (size_t)atol(extra); dropped_read = 1; }
    pthread_mutex_unlock(&lock);
    return SUCCESS;
}
int cuptiGetCallbackName(uint32_t domain, uint32_t cbid, const char **name) {
    if (domain == 2) { *name = cbid == 211 ? "cudaLaunchKernel_v7000" : cbid == 31 ? "cudaMemcpy_v3020" : "cudaStreamSynchronize_v3020"; return SUCCESS; }
    if (domain == 1) { *name = "cuLaunchKernel"; return SUCCESS; }
    return 1;
}
int cuptiGetResultString(int result, const char **text) { (void)result; *text = "mock CUPTI error"; return SUCCESS; }
#endif

#ifdef MOCK_JOB
/* The script: entries of u32 length, u32 name field offset (0xffffffff: none), u32 name
 * length, u32 count of time fields, that many u32 offsets, the record, the name. Times
 * in the script are relative: the job adds its clock at replay. A length of 0 is a
 * pause of `name length` milliseconds. */
static uint32_t u32(FILE *f) { uint32_t v = 0; if (fread(&v, 4, 1, f) != 1) exit(3); return v; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *injection = getenv("CUDA_INJECTION64_PATH");
    const char *cupti = getenv("MLPROF_CUPTI_PATH");
    if (!injection || !cupti) { fprintf(stderr, "fake_cuda_job: no injection or mock CUPTI\n"); return 2; }
    void *mock = dlopen(cupti, RTLD_NOW | RTLD_GLOBAL);
    void *inject = dlopen(injection, RTLD_NOW | RTLD_LOCAL);
    if (!mock || !inject) { fprintf(stderr, "fake_cuda_job: %s\n", dlerror()); return 2; }
    int (*init)(void) = (int (*)(void))dlsym(inject, "InitializeInjection");
    int (*emit)(const uint8_t *, size_t) = (int (*)(const uint8_t *, size_t))dlsym(mock, "mock_cupti_emit");
    int (*is_on)(uint32_t) = (int (*)(uint32_t))dlsym(mock, "mock_cupti_enabled");
    if (!init || !emit || !is_on || init() != 1) { fprintf(stderr, "fake_cuda_job: bad libraries\n"); return 2; }
    /* Wait (MOCK_JOB_WAIT_MS, default 5 s) for mlprof to start recording concurrent
     * kernels (kind 10): at once when it records from cuInit, else when its window is due. */
    const char *wait_ms = getenv("MOCK_JOB_WAIT_MS");
    int waits = (wait_ms ? atoi(wait_ms) : 5000) / 10;
    for (int i = 0; i < waits && !is_on(10); i++) usleep(10000);
    int recording = is_on(10);
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 2;
    struct timespec ts; clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t base = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    size_t emitted = 0;
    for (;;) {
        uint32_t len; if (fread(&len, 4, 1, f) != 1) break;
        uint32_t name_at = u32(f), name_len = u32(f), times = u32(f);
        if (len == 0) { usleep(name_len * 1000); continue; }
        uint32_t time_at[8]; if (times > 8) return 3;
        for (uint32_t i = 0; i < times; i++) time_at[i] = u32(f);
        uint8_t *record = malloc(len);
        if (fread(record, 1, len, f) != len) return 3;
        if (name_at != 0xffffffffu) {
            char *name = malloc(name_len + 1); /* lives as long as the process, as CUPTI's names do */
            if (fread(name, 1, name_len, f) != name_len) return 3;
            name[name_len] = 0;
            uint64_t p = (uint64_t)(uintptr_t)name; memcpy(record + name_at, &p, 8);
        }
        for (uint32_t i = 0; i < times; i++) { uint64_t t; memcpy(&t, record + time_at[i], 8); t += base; memcpy(record + time_at[i], &t, 8); }
        emitted += (size_t)emit(record, len);
        free(record);
    }
    fclose(f);
    /* MOCK_JOB_LOAD_LATE=PATH: load a library after CUDA started (a framework imported
     * late), then give the injection time to notice. */
    const char *late = getenv("MOCK_JOB_LOAD_LATE");
    if (late && *late) {
        if (!dlopen(late, RTLD_NOW | RTLD_LOCAL)) { fprintf(stderr, "fake_cuda_job: %s\n", dlerror()); return 2; }
        usleep(800000);
    }
    printf("fake_cuda_job: recording=%d emitted=%zu\n", recording, emitted);
    fflush(stdout);
    return 0;
}
#endif
