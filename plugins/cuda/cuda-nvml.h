/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-nvml.h - GPU utilisation through NVML, when present.
 *
 * NVML (libnvidia-ml.so.1) comes with the NVIDIA driver, not with the
 * toolkit: cuda-nvml.c loads it at run time on first use, so that the
 * plugin builds and loads where it is missing.
 */
#ifndef TDM_CUDA_NVML_H
#define TDM_CUDA_NVML_H

#include <glib.h>

/* Percent of the last sample period during which a kernel ran on the GPU
 * at PCI bus id `pci_bus_id` ("0000:65:00.0", cudaDeviceGetPCIBusId's
 * form), or -1 when NVML or the device is not available. Thread-safe. */
int cuda_nvml_utilization(const char *pci_bus_id);

#endif /* TDM_CUDA_NVML_H */
