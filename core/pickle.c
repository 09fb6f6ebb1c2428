/* SPDX-License-Identifier: MIT */
/* core/pickle.c - a strict, non-executing reader of the pickles torch.save
 * writes for a state dict.
 *
 * A pickle is a program for a small stack machine; Python's own reader
 * runs it and may call any function it names, which is why loading a
 * stranger's .pth with plain torch.load is unsafe. This reader runs only
 * the opcodes a state dict needs (protocol 2, as torch.save emits it, plus
 * the framing and short-string forms of protocols 4 and 5) and builds plain
 * values in an arena that the TdmPickle owns. Globals are looked up in a
 * fixed allow-list, never resolved: collections.OrderedDict (a dict),
 * torch._utils._rebuild_tensor_v2 and _rebuild_parameter (a tensor view
 * described by storage, offset, shape and strides, whose arguments are
 * checked here), and the torch.*Storage classes, which may only appear in
 * the ('storage', class, key, location, numel) persistent ids that point
 * at data/<key> in the archive. BUILD is accepted on dicts only (torch
 * puts a state dict's _metadata there) and its state is dropped. Every
 * refusal is TDM_ERROR_CORRUPT naming the input, the byte offset and the
 * opcode or global. There is no recursion, and every length is checked
 * against the bytes left, so no input can make it read out of bounds,
 * loop, or allocate much more than the input's size.
 */
#include "config.h"

#include <string.h>

#include "pickle.h"

struct TdmPickle {
    GPtrArray *values; /* TdmPv * (owned): every value made */
    TdmPv *root;
};

static const TdmPickleStorageType storage_types[] = {
    {"FloatStorage", TDM_DTYPE_F32, 4},   {"HalfStorage", TDM_DTYPE_F16, 2},
    {"BFloat16Storage", TDM_DTYPE_BF16, 2}, {"LongStorage", TDM_DTYPE_I64, 8},
    {"IntStorage", TDM_DTYPE_I32, 4},     {"ByteStorage", TDM_DTYPE_U8, 1},
    {"DoubleStorage", -1, 8},             {"ShortStorage", -1, 2},
    {"CharStorage", -1, 1},               {"BoolStorage", -1, 1},
};

/* The allowed globals that are callables; the storage classes follow them
 * at index G_STORAGE + i. */
enum { G_ORDERED_DICT, G_REBUILD_TENSOR_V2, G_REBUILD_PARAMETER, G_STORAGE };
static const char *const callables[][2] = {
    {"collections", "OrderedDict"},
    {"torch._utils", "_rebuild_tensor_v2"},
    {"torch._utils", "_rebuild_parameter"},
};

/* Opcode names, for messages about the ones refused too. */
static const struct {
    guint8 code;
    const char *name;
} opcode_names[] = {
    {'(', "MARK"},         {'.', "STOP"},          {'0', "POP"},          {'1', "POP_MARK"},
    {'2', "DUP"},          {'F', "FLOAT"},         {'I', "INT"},          {'J', "BININT"},
    {'K', "BININT1"},      {'L', "LONG"},          {'M', "BININT2"},      {'N', "NONE"},
    {'P', "PERSID"},       {'Q', "BINPERSID"},     {'R', "REDUCE"},       {'S', "STRING"},
    {'T', "BINSTRING"},    {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"},    {'X', "BINUNICODE"},
    {'a', "APPEND"},       {'b', "BUILD"},         {'c', "GLOBAL"},       {'d', "DICT"},
    {'}', "EMPTY_DICT"},   {'e', "APPENDS"},       {'g', "GET"},          {'h', "BINGET"},
    {'i', "INST"},         {'j', "LONG_BINGET"},   {'l', "LIST"},         {']', "EMPTY_LIST"},
    {'o', "OBJ"},          {'p', "PUT"},           {'q', "BINPUT"},       {'r', "LONG_BINPUT"},
    {'s', "SETITEM"},      {'t', "TUPLE"},         {')', "EMPTY_TUPLE"},  {'u', "SETITEMS"},
    {'G', "BINFLOAT"},     {'B', "BINBYTES"},      {'C', "SHORT_BINBYTES"},
    {0x80, "PROTO"},       {0x81, "NEWOBJ"},       {0x82, "EXT1"},        {0x83, "EXT2"},
    {0x84, "EXT4"},        {0x85, "TUPLE1"},       {0x86, "TUPLE2"},      {0x87, "TUPLE3"},
    {0x88, "NEWTRUE"},     {0x89, "NEWFALSE"},     {0x8a, "LONG1"},       {0x8b, "LONG4"},
    {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"},
    {0x8f, "EMPTY_SET"},   {0x90, "ADDITEMS"},     {0x91, "FROZENSET"},   {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"},     {0x95, "FRAME"},       {0x96, "BYTEARRAY8"},
    {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
};

/* The longest module or name in a GLOBAL; torch's are far shorter. */
#define MAX_GLOBAL_LINE 256

typedef struct {
    const char *what;
    const guint8 *data;
    size_t len;
    size_t pos;     /* next byte to read */
    size_t op_at;   /* offset of the opcode being run */
    guint8 op;
    TdmPickle *out;
    GPtrArray *stack; /* TdmPv * (borrowed from out->values) */
    GArray *marks;    /* guint: stack length at each MARK */
    GHashTable *memo; /* index -> TdmPv * */
} Reader;

const char *tdm_pickle_kind_name(TdmPvKind kind)
{
    static const char *const names[] = {"None",  "bool", "int",  "float",  "str",     "bytes",
                                        "tuple", "list", "dict", "global", "storage", "tensor"};
    return (guint)kind < G_N_ELEMENTS(names) ? names[kind] : "?";
}

static const char *opcode_name(guint8 code)
{
    for (size_t i = 0; i < G_N_ELEMENTS(opcode_names); i++) {
        if (opcode_names[i].code == code) {
            return opcode_names[i].name;
        }
    }
    return "unknown";
}

/* Set `error` to a message about the current opcode; returns FALSE. */
G_GNUC_PRINTF(3, 4)
static gboolean fail(Reader *r, GError **error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT, "%s: byte %zu: opcode 0x%02x %s: %s",
                r->what, r->op_at, r->op, opcode_name(r->op), msg);
    return FALSE;
}

static void value_free(gpointer p)
{
    TdmPv *v = p;
    g_free(v->s);
    g_free(v->location);
    if (v->items != NULL) {
        g_ptr_array_free(v->items, TRUE);
    }
    g_free(v);
}

void tdm_pickle_free(TdmPickle *p)
{
    if (p != NULL) {
        g_ptr_array_free(p->values, TRUE);
        g_free(p);
    }
}

const TdmPv *tdm_pickle_root(const TdmPickle *p)
{
    g_return_val_if_fail(p != NULL, NULL);
    return p->root;
}

static TdmPv *value_new(Reader *r, TdmPvKind kind)
{
    TdmPv *v = g_new0(TdmPv, 1);
    v->kind = kind;
    v->at = r->op_at;
    if (kind == TDM_PV_TUPLE || kind == TDM_PV_LIST || kind == TDM_PV_DICT) {
        v->items = g_ptr_array_new();
    }
    g_ptr_array_add(r->out->values, v);
    return v;
}

static void push(Reader *r, TdmPv *v)
{
    g_ptr_array_add(r->stack, v);
}

/* The stack length below which the current opcode may not pop: the last
 * MARK's, as in Python, where a MARK starts a fresh stack. */
static guint stack_base(const Reader *r)
{
    return r->marks->len > 0 ? g_array_index(r->marks, guint, r->marks->len - 1) : 0;
}

static gboolean need_stack(Reader *r, guint n, GError **error)
{
    if (r->stack->len < stack_base(r) + n) {
        return fail(r, error, "needs %u value%s on the stack, finds %u", n, n == 1 ? "" : "s",
                    r->stack->len - stack_base(r));
    }
    return TRUE;
}

static TdmPv *pop(Reader *r)
{
    return g_ptr_array_steal_index(r->stack, r->stack->len - 1);
}

static TdmPv *top(Reader *r)
{
    return r->stack->pdata[r->stack->len - 1];
}

/* The bytes of the current opcode's argument, or NULL (error set) when the
 * pickle ends first. */
static const guint8 *take(Reader *r, guint64 n, GError **error)
{
    if (n > r->len - r->pos) {
        fail(r, error, "its %" G_GUINT64_FORMAT "-byte argument runs past the end of the "
             "pickle (%zu bytes)", n, r->len);
        return NULL;
    }
    const guint8 *p = r->data + r->pos;
    r->pos += (size_t)n;
    return p;
}

static gboolean take_uint(Reader *r, int nbytes, guint64 *out, GError **error)
{
    const guint8 *p = take(r, (guint64)nbytes, error);
    if (p == NULL) {
        return FALSE;
    }
    guint64 v = 0;
    for (int i = nbytes - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    *out = v;
    return TRUE;
}

/* The items above the last MARK, removed from the stack with the mark
 * (transfer full of the array, none of the items). */
static GPtrArray *pop_mark(Reader *r, GError **error)
{
    if (r->marks->len == 0) {
        fail(r, error, "no MARK before it");
        return NULL;
    }
    guint base = stack_base(r);
    g_array_set_size(r->marks, r->marks->len - 1);
    GPtrArray *items = g_ptr_array_new();
    for (guint i = base; i < r->stack->len; i++) {
        g_ptr_array_add(items, r->stack->pdata[i]);
    }
    g_ptr_array_set_size(r->stack, base);
    return items;
}

static TdmPv *make_str(Reader *r, TdmPvKind kind, const guint8 *p, size_t n, GError **error)
{
    if (kind == TDM_PV_STR && !g_utf8_validate((const char *)p, (gssize)n, NULL)) {
        fail(r, error, "the string is not valid UTF-8");
        return NULL;
    }
    if (kind == TDM_PV_STR && memchr(p, 0, n) != NULL) {
        fail(r, error, "the string holds a NUL byte");
        return NULL;
    }
    TdmPv *v = value_new(r, kind);
    v->s = g_malloc(n + 1);
    memcpy(v->s, p, n);
    v->s[n] = '\0';
    v->len = n;
    return v;
}

static gboolean op_string(Reader *r, TdmPvKind kind, int len_bytes, GError **error)
{
    guint64 n = 0;
    const guint8 *p;
    if (!take_uint(r, len_bytes, &n, error) || (p = take(r, n, error)) == NULL) {
        return FALSE;
    }
    TdmPv *v = make_str(r, kind, p, (size_t)n, error);
    if (v != NULL) {
        push(r, v);
    }
    return v != NULL;
}

static gboolean push_int(Reader *r, gint64 i)
{
    TdmPv *v = value_new(r, TDM_PV_INT);
    v->i = i;
    push(r, v);
    return TRUE;
}

/* LONG1: a little-endian two's complement integer of n bytes; only what
 * fits in 64 bits is a size or count anyone saves. */
static gboolean op_long1(Reader *r, GError **error)
{
    guint64 n = 0;
    const guint8 *p;
    if (!take_uint(r, 1, &n, error) || (p = take(r, n, error)) == NULL) {
        return FALSE;
    }
    if (n > 8) {
        return fail(r, error, "a %" G_GUINT64_FORMAT "-byte integer does not fit in 64 bits", n);
    }
    guint64 v = 0;
    for (int i = (int)n - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    if (n > 0 && n < 8 && (p[n - 1] & 0x80)) {
        v |= ~G_GUINT64_CONSTANT(0) << (8 * n); /* sign-extend */
    }
    return push_int(r, (gint64)v);
}

static gboolean push_global(Reader *r, const char *module, const char *name, GError **error)
{
    int found = -1;
    for (size_t i = 0; i < G_N_ELEMENTS(callables); i++) {
        if (strcmp(module, callables[i][0]) == 0 && strcmp(name, callables[i][1]) == 0) {
            found = (int)i;
        }
    }
    for (size_t i = 0; found < 0 && strcmp(module, "torch") == 0 && i < G_N_ELEMENTS(storage_types);
         i++) {
        if (strcmp(name, storage_types[i].name) == 0) {
            found = G_STORAGE + (int)i;
        }
    }
    if (found < 0) {
        return fail(r, error, "global '%s.%s' is not allowed: a state dict of tensors needs only "
                    "collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
                    "torch._utils._rebuild_parameter and torch.*Storage (save "
                    "model.state_dict(), not the model)", module, name);
    }
    TdmPv *v = value_new(r, TDM_PV_GLOBAL);
    v->global = found;
    push(r, v);
    return TRUE;
}

/* One newline-terminated line of GLOBAL's argument (transfer full). */
static char *take_line(Reader *r, GError **error)
{
    size_t left = MIN(r->len - r->pos, (size_t)MAX_GLOBAL_LINE + 1);
    const guint8 *nl = memchr(r->data + r->pos, '\n', left);
    if (nl == NULL) {
        fail(r, error, "no newline within %d bytes", MAX_GLOBAL_LINE + 1);
        return NULL;
    }
    size_t n = (size_t)(nl - (r->data + r->pos));
    char *line = g_strndup((const char *)r->data + r->pos, n);
    r->pos += n + 1;
    if (strlen(line) != n || !g_utf8_validate(line, -1, NULL)) {
        fail(r, error, "the global's name is not valid UTF-8 text");
        g_free(line);
        return NULL;
    }
    return line;
}

static gboolean op_global(Reader *r, GError **error)
{
    g_autofree char *module = take_line(r, error);
    if (module == NULL) {
        return FALSE;
    }
    g_autofree char *name = take_line(r, error);
    return name != NULL && push_global(r, module, name, error);
}

static gboolean op_stack_global(Reader *r, GError **error)
{
    if (!need_stack(r, 2, error)) {
        return FALSE;
    }
    TdmPv *name = pop(r), *module = pop(r);
    if (module->kind != TDM_PV_STR || name->kind != TDM_PV_STR) {
        return fail(r, error, "module and name are %s and %s, not strings",
                    tdm_pickle_kind_name(module->kind), tdm_pickle_kind_name(name->kind));
    }
    return push_global(r, module->s, name->s, error);
}

static gboolean op_tuple_n(Reader *r, guint n, GError **error)
{
    if (!need_stack(r, n, error)) {
        return FALSE;
    }
    TdmPv *t = value_new(r, TDM_PV_TUPLE);
    guint first = r->stack->len - n;
    for (guint i = first; i < r->stack->len; i++) {
        g_ptr_array_add(t->items, r->stack->pdata[i]);
    }
    g_ptr_array_set_size(r->stack, first);
    push(r, t);
    return TRUE;
}

/* The container from a MARK: TUPLE, LIST or DICT. */
static gboolean op_from_mark(Reader *r, TdmPvKind kind, GError **error)
{
    g_autoptr(GPtrArray) items = pop_mark(r, error);
    if (items == NULL) {
        return FALSE;
    }
    if (kind == TDM_PV_DICT && items->len % 2 != 0) {
        return fail(r, error, "an odd number of items (%u) for keys and values", items->len);
    }
    TdmPv *v = value_new(r, kind);
    g_ptr_array_extend(v->items, items, NULL, NULL);
    push(r, v);
    return TRUE;
}

/* APPEND, APPENDS, SETITEM, SETITEMS: add `items` to the container below
 * them, which must be a list (append) or a dict (set). */
static gboolean add_items(Reader *r, GPtrArray *items, gboolean set, GError **error)
{
    if (r->stack->len <= stack_base(r)) {
        return fail(r, error, "no %s below the items", set ? "dict" : "list");
    }
    TdmPv *c = top(r);
    if (c->kind != (set ? TDM_PV_DICT : TDM_PV_LIST)) {
        return fail(r, error, "adds to a %s (made at byte %zu), not a %s",
                    tdm_pickle_kind_name(c->kind), c->at, set ? "dict" : "list");
    }
    if (set && items->len % 2 != 0) {
        return fail(r, error, "an odd number of items (%u) for keys and values", items->len);
    }
    g_ptr_array_extend(c->items, items, NULL, NULL);
    return TRUE;
}

static gboolean op_add_one(Reader *r, gboolean set, GError **error)
{
    guint n = set ? 2 : 1;
    if (!need_stack(r, n + 1, error)) {
        return FALSE;
    }
    g_autoptr(GPtrArray) items = g_ptr_array_new();
    for (guint i = r->stack->len - n; i < r->stack->len; i++) {
        g_ptr_array_add(items, r->stack->pdata[i]);
    }
    g_ptr_array_set_size(r->stack, r->stack->len - n);
    return add_items(r, items, set, error);
}

static gboolean op_add_mark(Reader *r, gboolean set, GError **error)
{
    g_autoptr(GPtrArray) items = pop_mark(r, error);
    return items != NULL && add_items(r, items, set, error);
}

static gboolean op_put(Reader *r, guint64 index, GError **error)
{
    if (r->stack->len <= stack_base(r)) {
        return fail(r, error, "nothing on the stack to remember");
    }
    g_hash_table_insert(r->memo, GSIZE_TO_POINTER((gsize)index), top(r));
    return TRUE;
}

static gboolean op_get(Reader *r, guint64 index, GError **error)
{
    TdmPv *v = g_hash_table_lookup(r->memo, GSIZE_TO_POINTER((gsize)index));
    if (v == NULL) {
        return fail(r, error, "memo entry %" G_GUINT64_FORMAT " was never set", index);
    }
    push(r, v);
    return TRUE;
}

static gboolean is_int(const TdmPv *v, gint64 lo)
{
    return v->kind == TDM_PV_INT && v->i >= lo;
}

/* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
 * backward_hooks[, metadata]): the view, checked for form here and against
 * its storage's size by the caller, who knows the archive. */
static TdmPv *rebuild_tensor(Reader *r, const TdmPv *args, GError **error)
{
    guint n = args->items->len;
    TdmPv **a = (TdmPv **)args->items->pdata;
    if (n != 6 && n != 7) {
        fail(r, error, "_rebuild_tensor_v2 takes 6 or 7 arguments, not %u", n);
        return NULL;
    }
    if (a[0]->kind != TDM_PV_STORAGE || !is_int(a[1], 0) || a[2]->kind != TDM_PV_TUPLE ||
        a[3]->kind != TDM_PV_TUPLE || a[4]->kind != TDM_PV_BOOL || a[5]->kind != TDM_PV_DICT ||
        (n == 7 && a[6]->kind != TDM_PV_DICT && a[6]->kind != TDM_PV_NONE)) {
        fail(r, error, "_rebuild_tensor_v2 takes (storage, offset >= 0, size tuple, stride "
             "tuple, bool, dict), not (%s, %s, %s, %s, %s, %s)", tdm_pickle_kind_name(a[0]->kind),
             tdm_pickle_kind_name(a[1]->kind), tdm_pickle_kind_name(a[2]->kind),
             tdm_pickle_kind_name(a[3]->kind), tdm_pickle_kind_name(a[4]->kind),
             tdm_pickle_kind_name(a[5]->kind));
        return NULL;
    }
    guint ndim = a[2]->items->len;
    if (ndim > TDM_MAX_DIMS || a[3]->items->len != ndim) {
        fail(r, error, "a tensor of %u dimensions with %u strides (at most %d dimensions)", ndim,
             a[3]->items->len, TDM_MAX_DIMS);
        return NULL;
    }
    TdmPv *t = value_new(r, TDM_PV_TENSOR);
    t->storage = a[0];
    t->offset = a[1]->i;
    t->ndim = (int)ndim;
    for (guint d = 0; d < ndim; d++) {
        const TdmPv *size = a[2]->items->pdata[d], *stride = a[3]->items->pdata[d];
        if (!is_int(size, 0) || !is_int(stride, 0)) {
            fail(r, error, "dimension %u: size and stride must be integers >= 0", d);
            return NULL;
        }
        t->size[d] = size->i;
        t->stride[d] = stride->i;
    }
    return t;
}

/* REDUCE: apply one of the allowed callables to its argument tuple. */
static gboolean op_reduce(Reader *r, GError **error)
{
    if (!need_stack(r, 2, error)) {
        return FALSE;
    }
    TdmPv *args = pop(r), *fn = pop(r);
    if (fn->kind != TDM_PV_GLOBAL || fn->global >= G_STORAGE) {
        return fail(r, error, "calls a %s%s, not collections.OrderedDict or a torch._utils "
                    "rebuild function", fn->kind == TDM_PV_GLOBAL ? "storage class " : "",
                    tdm_pickle_kind_name(fn->kind));
    }
    if (args->kind != TDM_PV_TUPLE) {
        return fail(r, error, "the arguments are a %s, not a tuple",
                    tdm_pickle_kind_name(args->kind));
    }
    TdmPv *result = NULL;
    if (fn->global == G_ORDERED_DICT) {
        if (args->items->len != 0) {
            return fail(r, error, "OrderedDict takes no arguments here, not %u",
                        args->items->len);
        }
        result = value_new(r, TDM_PV_DICT);
    } else if (fn->global == G_REBUILD_TENSOR_V2) {
        result = rebuild_tensor(r, args, error);
    } else {
        /* _rebuild_parameter(data, requires_grad, backward_hooks): the
         * tensor itself, for a state dict. */
        TdmPv **a = (TdmPv **)args->items->pdata;
        if (args->items->len != 3 || a[0]->kind != TDM_PV_TENSOR || a[1]->kind != TDM_PV_BOOL ||
            a[2]->kind != TDM_PV_DICT) {
            return fail(r, error, "_rebuild_parameter takes (tensor, bool, dict)");
        }
        result = a[0];
    }
    if (result != NULL) {
        push(r, result);
    }
    return result != NULL;
}

/* BUILD: torch sets a state dict's _metadata this way; the state is
 * parsed like everything else and dropped. */
static gboolean op_build(Reader *r, GError **error)
{
    if (!need_stack(r, 2, error)) {
        return FALSE;
    }
    TdmPv *state = pop(r);
    TdmPv *inst = top(r);
    if (inst->kind != TDM_PV_DICT) {
        return fail(r, error, "sets the state of a %s (made at byte %zu); only dicts are "
                    "accepted", tdm_pickle_kind_name(inst->kind), inst->at);
    }
    if (state->kind != TDM_PV_DICT && state->kind != TDM_PV_NONE) {
        return fail(r, error, "the state is a %s, not a dict", tdm_pickle_kind_name(state->kind));
    }
    return TRUE;
}

/* BINPERSID: ('storage', torch.XStorage, key, location, numel). */
static gboolean op_persid(Reader *r, GError **error)
{
    if (!need_stack(r, 1, error)) {
        return FALSE;
    }
    TdmPv *pid = pop(r);
    TdmPv **a = pid->kind == TDM_PV_TUPLE ? (TdmPv **)pid->items->pdata : NULL;
    if (a == NULL || pid->items->len != 5 || a[0]->kind != TDM_PV_STR ||
        strcmp(a[0]->s, "storage") != 0) {
        return fail(r, error, "the persistent id (made at byte %zu) is not a 5-tuple "
                    "('storage', class, key, location, numel)", pid->at);
    }
    if (a[1]->kind != TDM_PV_GLOBAL || a[1]->global < G_STORAGE) {
        return fail(r, error, "the storage class is a %s, not torch.*Storage",
                    tdm_pickle_kind_name(a[1]->kind));
    }
    if (a[2]->kind != TDM_PV_STR || a[2]->len == 0 || strchr(a[2]->s, '/') != NULL ||
        a[3]->kind != TDM_PV_STR || !is_int(a[4], 0)) {
        return fail(r, error, "the storage's key, location and numel must be a name without "
                    "'/', a string and an integer >= 0");
    }
    TdmPv *s = value_new(r, TDM_PV_STORAGE);
    s->storage_type = &storage_types[a[1]->global - G_STORAGE];
    s->s = g_strdup(a[2]->s);
    s->len = a[2]->len;
    s->location = g_strdup(a[3]->s);
    s->numel = a[4]->i;
    push(r, s);
    return TRUE;
}

/* Run one opcode; *stop is set by STOP. */
static gboolean step(Reader *r, gboolean *stop, GError **error)
{
    guint64 n = 0;
    const guint8 *p;
    TdmPv *v;
    switch (r->op) {
    case 0x80: /* PROTO */
        if (!take_uint(r, 1, &n, error)) {
            return FALSE;
        }
        return n >= 2 && n <= 5 ? TRUE : fail(r, error, "protocol %" G_GUINT64_FORMAT
                                              " (2 to 5 are read)", n);
    case 0x95: /* FRAME: a length hint only */
        return take_uint(r, 8, &n, error);
    case '.': /* STOP */
        if (!need_stack(r, 1, error)) {
            return FALSE;
        }
        r->out->root = pop(r);
        *stop = TRUE;
        return TRUE;
    case '(':
        g_array_append_val(r->marks, r->stack->len);
        return TRUE;
    case 'N':
    case 0x88:
    case 0x89:
        v = value_new(r, r->op == 'N' ? TDM_PV_NONE : TDM_PV_BOOL);
        v->i = r->op == 0x88;
        push(r, v);
        return TRUE;
    case 'J':
        return take_uint(r, 4, &n, error) && push_int(r, (gint64)(gint32)(guint32)n);
    case 'K':
        return take_uint(r, 1, &n, error) && push_int(r, (gint64)n);
    case 'M':
        return take_uint(r, 2, &n, error) && push_int(r, (gint64)n);
    case 0x8a:
        return op_long1(r, error);
    case 'G': /* BINFLOAT: big-endian IEEE double */
        if ((p = take(r, 8, error)) == NULL) {
            return FALSE;
        }
        for (int i = 0; i < 8; i++) {
            n = (n << 8) | p[i];
        }
        v = value_new(r, TDM_PV_FLOAT);
        memcpy(&v->f, &n, sizeof v->f);
        push(r, v);
        return TRUE;
    case 'X':
        return op_string(r, TDM_PV_STR, 4, error);
    case 0x8c:
        return op_string(r, TDM_PV_STR, 1, error);
    case 0x8d:
        return op_string(r, TDM_PV_STR, 8, error);
    case 'U':
    case 'C':
        return op_string(r, TDM_PV_BYTES, 1, error);
    case 'T':
    case 'B':
        return op_string(r, TDM_PV_BYTES, 4, error);
    case ')':
        return op_tuple_n(r, 0, error);
    case 0x85:
    case 0x86:
    case 0x87:
        return op_tuple_n(r, (guint)(r->op - 0x84), error);
    case 't':
        return op_from_mark(r, TDM_PV_TUPLE, error);
    case 'l':
        return op_from_mark(r, TDM_PV_LIST, error);
    case 'd':
        return op_from_mark(r, TDM_PV_DICT, error);
    case ']':
    case '}':
        push(r, value_new(r, r->op == ']' ? TDM_PV_LIST : TDM_PV_DICT));
        return TRUE;
    case 'a':
        return op_add_one(r, FALSE, error);
    case 'e':
        return op_add_mark(r, FALSE, error);
    case 's':
        return op_add_one(r, TRUE, error);
    case 'u':
        return op_add_mark(r, TRUE, error);
    case 'q':
        return take_uint(r, 1, &n, error) && op_put(r, n, error);
    case 'r':
        return take_uint(r, 4, &n, error) && op_put(r, n, error);
    case 0x94: /* MEMOIZE: the next free index */
        return op_put(r, g_hash_table_size(r->memo), error);
    case 'h':
        return take_uint(r, 1, &n, error) && op_get(r, n, error);
    case 'j':
        return take_uint(r, 4, &n, error) && op_get(r, n, error);
    case 'c':
        return op_global(r, error);
    case 0x93:
        return op_stack_global(r, error);
    case 'R':
        return op_reduce(r, error);
    case 'b':
        return op_build(r, error);
    case 'Q':
        return op_persid(r, error);
    default:
        return fail(r, error, "this opcode is not accepted in a state dict");
    }
}

TdmPickle *tdm_pickle_parse(const char *what, const guint8 *data, size_t len, GError **error)
{
    g_return_val_if_fail(what != NULL && (data != NULL || len == 0), NULL);
    TdmPickle *out = g_new0(TdmPickle, 1);
    out->values = g_ptr_array_new_with_free_func(value_free);
    Reader r = {
        .what = what,
        .data = data,
        .len = len,
        .out = out,
        .stack = g_ptr_array_new(),
        .marks = g_array_new(FALSE, FALSE, sizeof(guint)),
        .memo = g_hash_table_new(g_direct_hash, g_direct_equal),
    };
    gboolean stop = FALSE, ok = TRUE;
    while (ok && !stop) {
        if (r.pos >= r.len) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                        "%s: byte %zu: the pickle ends without STOP", what, r.len);
            ok = FALSE;
            break;
        }
        r.op_at = r.pos;
        r.op = r.data[r.pos++];
        ok = step(&r, &stop, error);
    }
    g_ptr_array_free(r.stack, TRUE);
    g_array_free(r.marks, TRUE);
    g_hash_table_destroy(r.memo);
    if (!ok) {
        tdm_pickle_free(out);
        return NULL;
    }
    return out;
}
