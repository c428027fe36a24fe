/* A stand-in for libnvidia-ml, for tests/nvml.rs: the NVML entry points mlprof-run's nvml
 * module calls, with the types and values of NVIDIA's public nvml.h written out here (no
 * NVIDIA header is needed). Its behaviour is fixed when it is built, by
 * -DMOCK_MODE=MODE_<name>; the test builds one library per mode, so tests running at once
 * share no state.
 *
 *   MODE_OK             two devices with the values below
 *   MODE_INIT_FAILS     nvmlInit_v2 returns NVML_ERROR_DRIVER_NOT_LOADED (9)
 *   MODE_NOT_SUPPORTED  device 0: utilization, power and the process query are not
 *                       supported; device 1: nothing is (not even its name)
 *   MODE_MANY_PROCESSES device 0 runs 300 processes: a smaller buffer gets
 *                       NVML_ERROR_INSUFFICIENT_SIZE and the count 300
 *   MODE_OLD_DRIVER     no nvmlDeviceGetComputeRunningProcesses_v3 (only _v2, which
 *                       every other mode leaves unsupported) and no nvmlDeviceGetPowerUsage
 *   MODE_HOSTILE        an absurd device count, names and UUIDs that fill their buffers
 *                       with no NUL, a process count far above the buffer it filled, and a
 *                       device that always wants a larger buffer
 *   MODE_NOT_NVML       no nvmlInit_v2 at all
 *
 * In MODE_OK, MOCK_NVML_PID in the environment (read at each query) replaces the pid of
 * device 0's first process, so that a test can put a real process on the mock GPU.
 *
 * mock_nvml_live() tells how many initializations are not yet shut down, and
 * mock_nvml_unbalanced() how many nvmlShutdown calls came without one.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MODE_OK 0
#define MODE_INIT_FAILS 1
#define MODE_NOT_SUPPORTED 2
#define MODE_MANY_PROCESSES 3
#define MODE_OLD_DRIVER 4
#define MODE_HOSTILE 5
#define MODE_NOT_NVML 6

#ifndef MOCK_MODE
#define MOCK_MODE MODE_OK
#endif

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_CLOCK_SM 1
#define NVML_TEMPERATURE_GPU 0
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_v2_t is 24 bytes");

#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * MiB)

struct mock_device {
    const char *name;
    const char *uuid;
    unsigned long long total, used;
    unsigned int util_gpu, util_memory, sm_clock, power, temperature;
    unsigned int processes;
    nvmlProcessInfo_t process[2];
};

static struct mock_device devices[2] = {
    {"Mock H100 0", "GPU-00000000-1111-2222-3333-444444444444", 80 * GiB, 3 * GiB, 87, 41, 1980,
     312000, 64, 2, {{4242, 512 * MiB, 0xFFFFFFFFu, 0xFFFFFFFFu}, {4343, 256 * MiB, 0xFFFFFFFFu, 0xFFFFFFFFu}}},
    {"Mock H100 1", "GPU-55555555-6666-7777-8888-999999999999", 80 * GiB, 0, 0, 0, 345, 70000, 33, 1,
     {{5151, NVML_VALUE_NOT_AVAILABLE, 0xFFFFFFFFu, 0xFFFFFFFFu}}},
};

static int live;
static int unbalanced;

int mock_nvml_live(void) { return live; }
int mock_nvml_unbalanced(void) { return unbalanced; }

static struct mock_device *device_of(void *handle) {
    if (handle == &devices[0] || handle == &devices[1]) return handle;
    return 0;
}

static int is_device(void *handle, int which) { return handle == &devices[which]; }

/* Whether `handle` lacks the counter `what` in this mode. */
static int unsupported(void *handle, const char *what) {
    if (MOCK_MODE != MODE_NOT_SUPPORTED) return 0;
    if (is_device(handle, 1)) return 1;
    return strcmp(what, "utilization") == 0 || strcmp(what, "power") == 0 || strcmp(what, "processes") == 0;
}

/* The device behind `handle` when its counter `what` can be read; else NULL, and why in
 * *status. */
static struct mock_device *lookup(void *handle, const char *what, nvmlReturn_t *status) {
    struct mock_device *d = device_of(handle);
    *status = !d ? NVML_ERROR_INVALID_ARGUMENT : unsupported(handle, what) ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
    return *status == NVML_SUCCESS ? d : 0;
}

#if MOCK_MODE != MODE_NOT_NVML
nvmlReturn_t nvmlInit_v2(void) {
    if (MOCK_MODE == MODE_INIT_FAILS) return NVML_ERROR_DRIVER_NOT_LOADED;
    live++;
    return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlShutdown(void) {
    if (live == 0) {
        unbalanced++;
        return NVML_ERROR_UNINITIALIZED;
    }
    live--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!live) return NVML_ERROR_UNINITIALIZED;
    *count = MOCK_MODE == MODE_HOSTILE ? 1000000u : 2u;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device) {
    if (!live) return NVML_ERROR_UNINITIALIZED;
    if (index >= 2) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(void *handle, const char *what, const char *text, char *out, unsigned int length) {
    nvmlReturn_t status;
    struct mock_device *d = lookup(handle, what, &status);
    if (!d) return status;
    if (MOCK_MODE == MODE_HOSTILE) {
        memset(out, what[0] == 'n' ? 'N' : 'U', length);
        return NVML_SUCCESS;
    }
    if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(void *handle, char *name, unsigned int length) {
    struct mock_device *d = device_of(handle);
    return copy_string(handle, "name", d ? d->name : "", name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(void *handle, char *uuid, unsigned int length) {
    struct mock_device *d = device_of(handle);
    return copy_string(handle, "uuid", d ? d->uuid : "", uuid, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(void *handle, nvmlMemory_t *memory) {
    nvmlReturn_t status;
    struct mock_device *d = lookup(handle, "memory", &status);
    if (!d) return status;
    memory->total = d->total;
    memory->used = d->used;
    memory->free = d->total - d->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(void *handle, nvmlUtilization_t *utilization) {
    nvmlReturn_t status;
    struct mock_device *d = lookup(handle, "utilization", &status);
    if (!d) return status;
    utilization->gpu = d->util_gpu;
    utilization->memory = d->util_memory;
    return NVML_SUCCESS;
}

/* One unsigned counter of `handle`: `field` of its device into *out, when `valid` (the
 * enum argument is one the mock knows) and the mode supports it. */
static nvmlReturn_t counter(void *handle, const char *what, int valid, size_t field, unsigned int *out) {
    nvmlReturn_t status;
    struct mock_device *d = lookup(handle, what, &status);
    if (!valid || !out) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d) return status;
    memcpy(out, (const char *)d + field, sizeof *out);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(void *handle, int type, unsigned int *clock) {
    return counter(handle, "clock", type == NVML_CLOCK_SM, offsetof(struct mock_device, sm_clock), clock);
}

#if MOCK_MODE != MODE_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetPowerUsage(void *handle, unsigned int *power) {
    return counter(handle, "power", 1, offsetof(struct mock_device, power), power);
}
#endif

nvmlReturn_t nvmlDeviceGetTemperature(void *handle, int sensor, unsigned int *temperature) {
    int valid = sensor == NVML_TEMPERATURE_GPU;
    return counter(handle, "temperature", valid, offsetof(struct mock_device, temperature), temperature);
}

static nvmlReturn_t processes(void *handle, unsigned int *count, nvmlProcessInfo_t *infos) {
    nvmlReturn_t status;
    struct mock_device *d = lookup(handle, "processes", &status);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d) return status;
    if (MOCK_MODE == MODE_HOSTILE) {
        if (is_device(handle, 1)) {
            *count = 1000000u;
            return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        for (unsigned int i = 0; i < *count; i++) {
            infos[i].pid = 1 + i;
            infos[i].usedGpuMemory = MiB;
        }
        *count = 0xFFFFFFFFu;
        return NVML_SUCCESS;
    }
    unsigned int wanted = d->processes;
    if (MOCK_MODE == MODE_MANY_PROCESSES && is_device(handle, 0)) wanted = 300;
    if (*count < wanted) {
        *count = wanted;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < wanted; i++) {
        if (wanted == 300) {
            infos[i].pid = 10000 + i;
            infos[i].usedGpuMemory = (i + 1) * MiB;
            infos[i].gpuInstanceId = 0xFFFFFFFFu;
            infos[i].computeInstanceId = 0xFFFFFFFFu;
        } else {
            infos[i] = d->process[i];
            const char *pid = getenv("MOCK_NVML_PID");
            if (MOCK_MODE == MODE_OK && pid && is_device(handle, 0) && i == 0) infos[i].pid = (unsigned int)atoi(pid);
        }
    }
    *count = wanted;
    return NVML_SUCCESS;
}

#if MOCK_MODE != MODE_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void *handle, unsigned int *count, nvmlProcessInfo_t *infos) {
    return processes(handle, count, infos);
}
#endif

/* Only the old driver answers through _v2: a caller that prefers it to _v3 sees nothing. */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(void *handle, unsigned int *count, nvmlProcessInfo_t *infos) {
    if (MOCK_MODE != MODE_OLD_DRIVER) return NVML_ERROR_NOT_SUPPORTED;
    return processes(handle, count, infos);
}
