/* SPDX-License-Identifier: MIT */
/* tandem/tandem.h - the whole public API of libtandem-1. */
#ifndef TANDEM_H
#define TANDEM_H

#include <tandem/types.h>
#include <tandem/plugin.h>
#include <tandem/params.h>
#include <tandem/tensor.h>
#include <tandem/device.h>
#include <tandem/backend.h>
#include <tandem/ops.h>
#include <tandem/module.h>
#include <tandem/optim.h>
#include <tandem/transform.h>
#include <tandem/data.h>
#include <tandem/strategy.h>
#include <tandem/io.h>
#include <tandem/checkpoint.h>
#include <tandem/trainer.h>
#include <tandem/store.h>
#include <tandem/comm.h>

G_BEGIN_DECLS

/* Library version ("0.1.0", transfer none). */
TDM_API const char *tdm_version(void);

G_END_DECLS

#endif /* TANDEM_H */
