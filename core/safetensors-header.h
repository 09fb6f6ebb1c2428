/* SPDX-License-Identifier: MIT */
/* core/safetensors-header.h - the JSON header of a safetensors file, read
 * through json-glib with the byte offset of every value (private to the
 * core; core/safetensors-header.c says how).
 */
#ifndef TDM_SAFETENSORS_HEADER_H
#define TDM_SAFETENSORS_HEADER_H

#include <json-glib/json-glib.h>

#include "internal.h"

typedef struct {
    JsonParser *parser;  /* owns the tree */
    JsonObject *root;    /* the header's object (transfer none) */
    size_t root_offset;  /* file offset of its '{' */
    GHashTable *offsets; /* JsonNode * -> file offset of the value's first byte */
} TdmStHeader;

/* Parses the `len` bytes at `text` (valid UTF-8), which start at file
 * offset `base` of `path`, into `h`. Anything that is not strict JSON, or
 * nests deeper than a header ever does, is a TDM_ERROR_CORRUPT naming the
 * file and the byte offset. Clear `h` after, also on failure. */
gboolean tdm_st_header_parse(TdmStHeader *h, const char *path, const char *text, size_t len,
                             size_t base, GError **error);
/* The file offset of `node`'s first byte (a node of h's tree). */
size_t tdm_st_header_offset(const TdmStHeader *h, JsonNode *node);
void tdm_st_header_clear(TdmStHeader *h);

#endif /* TDM_SAFETENSORS_HEADER_H */
