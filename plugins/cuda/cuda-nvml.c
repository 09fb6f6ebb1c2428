/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-nvml.c - GPU utilisation from NVML, loaded at run time.
 *
 * The toolkit here has no nvml.h, and libnvidia-ml.so.1 exists only where a
 * driver is installed, so the plugin neither includes nor links NVML: it
 * dlopens the library on first use and declares the four entry points it
 * calls, with the types of NVIDIA's documented and stable C ABI (nvml.h:
 * nvmlReturn_t is an int-sized enum whose success value is 0, a device
 * handle is an opaque pointer, nvmlUtilization_t is two unsigned ints).
 * Any failure (no library, a missing symbol, nvmlInit_v2 failing) leaves
 * NVML disabled for the process: utilisation is then reported as -1.
 */
#include "config.h"

#include <dlfcn.h>
#include <glib.h>

#include "cuda-nvml.h"

typedef int NvmlReturn;                      /* nvmlReturn_t; NVML_SUCCESS = 0 */
typedef struct NvmlDeviceOpaque *NvmlDevice; /* nvmlDevice_t */
typedef struct {
    unsigned int gpu;    /* percent of time a kernel was running */
    unsigned int memory; /* percent of time device memory was read or written */
} NvmlUtilization;       /* nvmlUtilization_t */

static struct {
    void *lib;
    NvmlReturn (*init)(void);
    NvmlReturn (*shutdown)(void);
    NvmlReturn (*handle_by_pci)(const char *bus_id, NvmlDevice *device);
    NvmlReturn (*utilization)(NvmlDevice device, NvmlUtilization *util);
    gboolean ready;
} nvml;

static gpointer nvml_load(gpointer unused)
{
    nvml.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (nvml.lib == NULL) {
        return NULL;
    }
    /* dlsym returns void *; the function pointer types are NVML's. */
    *(void **)&nvml.init = dlsym(nvml.lib, "nvmlInit_v2");
    *(void **)&nvml.shutdown = dlsym(nvml.lib, "nvmlShutdown");
    *(void **)&nvml.handle_by_pci = dlsym(nvml.lib, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nvml.utilization = dlsym(nvml.lib, "nvmlDeviceGetUtilizationRates");
    if (nvml.init == NULL || nvml.shutdown == NULL || nvml.handle_by_pci == NULL ||
        nvml.utilization == NULL || nvml.init() != 0) {
        g_debug("cuda: NVML present but unusable: GPU utilisation is not reported");
        dlclose(nvml.lib);
        nvml.lib = NULL;
        return NULL;
    }
    nvml.ready = TRUE;
    return NULL;
}

/* NVML keeps a handle on the driver: release it when the plugin goes. */
__attribute__((destructor)) static void nvml_unload(void)
{
    if (nvml.ready) {
        nvml.ready = FALSE;
        nvml.shutdown();
    }
}

int cuda_nvml_utilization(const char *pci_bus_id)
{
    static GOnce once = G_ONCE_INIT;
    g_once(&once, nvml_load, NULL);
    if (!nvml.ready || pci_bus_id == NULL) {
        return -1;
    }
    NvmlDevice device = NULL;
    NvmlUtilization util = {0, 0};
    if (nvml.handle_by_pci(pci_bus_id, &device) != 0 || nvml.utilization(device, &util) != 0) {
        return -1;
    }
    return util.gpu <= 100 ? (int)util.gpu : -1;
}
