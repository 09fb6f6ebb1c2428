/* SPDX-License-Identifier: MIT */
/* plugins/gloo/gloo-ops.cc - the gloo plugin's operations, run one at a
 * time on a communicator's worker thread (gloo-comm.cc), and the diagnosis of
 * their failures.
 *
 * Every operation starts with a small all-to-all exchange of what each rank
 * is about to run (op, dtype, count, root, sequence number): it is the
 * barrier, it stops ranks that disagree before Gloo sees buffers of different
 * sizes, and when it times out the headers that did arrive say which ranks
 * never did. Allreduce and reduce_scatter are rings of our own over Gloo's
 * unbound buffers (faster here than libgloo's allreduce at mid sizes);
 * broadcast and allgather are Gloo's. On a failure the rank names the peer
 * whose connection broke (Gloo's message gives its address, mapped to a rank
 * at setup) and whether its process is gone, posts that diagnosis to the
 * store for the others, then closes its connections so that they fail at
 * once instead of at their timeout; a rank that loses its connection to a
 * peer that failed first reports that peer's diagnosis.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include <algorithm>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>

#include "gloo.h"

/* Slots of our own messages; Gloo's collectives put small prefixes in the
 * top byte, so these never meet theirs. */
static const uint64_t kHeaderSlot = 0xA5ull << 56;
static const uint64_t kReduceScatterSlot = 0xA6ull << 56;
static const uint64_t kAllgatherSlot = 0xA7ull << 56;
static const uint64_t kSlotSeqMask = (1ull << 48) - 1;
static const uint32_t kHeaderMagic = 0x474d4454u; /* "TDMG" */
/* How long to look for a peer's process to disappear after its connection
 * dropped (the kernel closes the sockets a moment before the pid goes). */
static const double kDeadPollSeconds = 2.0;

/* ---- failures ---- */

/* Gloo prefixes messages with "[file.cc:123] "; users need only the rest. */
std::string gloo_strip_location(const char *what)
{
    std::string s = what != nullptr ? what : "";
    if (!s.empty() && s[0] == '[') {
        size_t end = s.find("] ");
        if (end != std::string::npos) {
            s = s.substr(end + 2);
        }
    }
    return s;
}

std::string gloo_seconds_text(double s)
{
    char buf[32];
    g_snprintf(buf, sizeof buf, "%.1f", s);
    return buf;
}

char *gloo_tensor_ptr(TdmTensor *t)
{
    return t != nullptr && tdm_tensor_nbytes(t) > 0 ? static_cast<char *>(tdm_tensor_data(t))
                                                    : nullptr;
}

static int64_t tensor_count(TdmTensor *t)
{
    return t != nullptr ? (int64_t)(tdm_tensor_nbytes(t) / tdm_dtype_size(t->dtype)) : 0;
}

/* ---- reductions ---- */

template <typename T>
static void reduce_into(TdmReduceOp op, T *c, const T *a, const T *b, size_t n)
{
    switch (op) {
    case TDM_REDUCE_SUM:
    case TDM_REDUCE_AVG:
        for (size_t i = 0; i < n; i++) {
            c[i] = a[i] + b[i];
        }
        break;
    case TDM_REDUCE_MAX: /* NaN wins, as in PyTorch and the shm plugin */
        for (size_t i = 0; i < n; i++) {
            c[i] = (a[i] != a[i] || a[i] > b[i]) ? a[i] : b[i];
        }
        break;
    case TDM_REDUCE_MIN:
        for (size_t i = 0; i < n; i++) {
            c[i] = (a[i] != a[i] || a[i] < b[i]) ? a[i] : b[i];
        }
        break;
    }
}

bool gloo_dtype_reduces(TdmDType dtype)
{
    return dtype == TDM_DTYPE_F32 || dtype == TDM_DTYPE_I32 || dtype == TDM_DTYPE_I64;
}

static void reduce_any(TdmDType dtype, TdmReduceOp op, void *c, const void *a, const void *b,
                       size_t n)
{
    switch (dtype) {
    case TDM_DTYPE_I32:
        reduce_into(op, (int32_t *)c, (const int32_t *)a, (const int32_t *)b, n);
        break;
    case TDM_DTYPE_I64:
        reduce_into(op, (int64_t *)c, (const int64_t *)a, (const int64_t *)b, n);
        break;
    default:
        reduce_into(op, (float *)c, (const float *)a, (const float *)b, n);
        break;
    }
}

/* avg = sum / world (integers truncate, as in the shm plugin). */
static void scale_avg(TdmDType dtype, void *p, size_t n, int world)
{
    for (size_t i = 0; i < n; i++) {
        if (dtype == TDM_DTYPE_F32) {
            ((float *)p)[i] /= (float)world;
        } else if (dtype == TDM_DTYPE_I32) {
            ((int32_t *)p)[i] /= world;
        } else {
            ((int64_t *)p)[i] /= world;
        }
    }
}

/* ---- failure diagnosis ---- */

static bool pid_gone(int pid)
{
    if (pid <= 0) {
        return false;
    }
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        return true;
    }
    /* Exited but not reaped yet: a zombie holds the pid a little longer. */
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
    gchar *text = nullptr;
    bool zombie = false;
    if (g_file_get_contents(path, &text, nullptr, nullptr)) {
        const char *paren = strrchr(text, ')');
        zombie = paren != nullptr && (paren[1] == ' ') && (paren[2] == 'Z' || paren[2] == 'X');
        g_free(text);
    }
    return zombie;
}

/* The ranks among `candidates` whose process is gone, looking for up to
 * `poll_s` seconds; only ranks on this host can be checked. */
static std::vector<int> find_dead(const GlooComm *g, const std::vector<int> &candidates,
                                  double poll_s)
{
    std::vector<int> dead;
    double until = tdm_time_now() + poll_s;
    for (;;) {
        for (int r : candidates) {
            if (g->peers[r].same_host && pid_gone(g->peers[r].pid)) {
                dead.push_back(r);
            }
        }
        if (!dead.empty() || tdm_time_now() >= until) {
            return dead;
        }
        g_usleep(PEER_POLL_US);
    }
}

std::string gloo_op_label(const TdmWork *w)
{
    return std::string(tdm_coll_op_name(w->op)) + " #" + std::to_string(w->seq);
}

static bool looks_like_timeout(const std::string &what)
{
    return what.find("Timed out") != std::string::npos || what.find("timeout") != std::string::npos;
}

/* A Gloo error during `w`: name the peer that died when one did. */
/* "[127.0.0.1]:45711" out of a Gloo message or address string. */
std::string gloo_address_in(const std::string &text)
{
    size_t open = text.find('[');
    while (open != std::string::npos) {
        size_t close = text.find("]:", open);
        if (close == std::string::npos) {
            break;
        }
        size_t end = close + 2;
        while (end < text.size() && g_ascii_isdigit(text[end])) {
            end++;
        }
        if (end > close + 2) {
            return text.substr(open, end - open);
        }
        open = text.find('[', open + 1);
    }
    return "";
}

static std::string failure_key(const GlooComm *g, int rank)
{
    return g->prefix + "failed/" + std::to_string(rank);
}

/* What `rank` said when it failed, if it did (it posts before it closes its
 * connections, so a peer that sees them close finds the record). */
static std::string failure_record(const GlooComm *g, int rank)
{
    std::string key = failure_key(g, rank);
    gboolean exists = FALSE;
    if (g->store == nullptr || !tdm_store_check(g->store, key.c_str(), &exists, nullptr) ||
        !exists) {
        return "";
    }
    GBytes *value = tdm_store_get(g->store, key.c_str(), nullptr);
    if (value == nullptr) {
        return "";
    }
    gsize len = 0;
    const char *data = static_cast<const char *>(g_bytes_get_data(value, &len));
    std::string out(data, len);
    g_bytes_unref(value);
    return out;
}

static std::string rank_pid(const GlooComm *g, int r)
{
    return "rank " + std::to_string(r) + " (pid " + std::to_string(g->peers[r].pid) + ")";
}

/* A Gloo error during `w`. `peer` is the rank whose connection failed when
 * known (else read from the address in Gloo's message); `absent` the ranks
 * whose header never came (header phase only). A peer that failed first has
 * left a record in the store: its diagnosis is the one worth reporting. */
static OpFailure diagnose(GlooComm *g, const TdmWork *w, const std::string &what, int peer,
                          bool timed_out, bool header_phase, const std::vector<int> &absent)
{
    const std::string here = "rank " + std::to_string(g->rank);
    if (peer < 0) {
        auto it = g->rank_of_address.find(gloo_address_in(what));
        peer = it != g->rank_of_address.end() ? it->second : -1;
    }
    if (timed_out && header_phase && !absent.empty()) {
        std::string list;
        for (int r : absent) {
            list += (list.empty() ? "" : ", ") + std::to_string(r);
        }
        return {TDM_ERROR_TIMEOUT,
                "gloo " + gloo_op_label(w) + ": ranks " + list + " never arrived within " +
                    gloo_seconds_text(g->timeout_s) + " s",
                absent};
    }
    if (peer >= 0 && peer != g->rank) {
        std::string record = failure_record(g, peer);
        if (!record.empty()) {
            return {TDM_ERROR_FAILED,
                    record + "; " + here + " then lost its connection to rank " +
                        std::to_string(peer),
                    {}};
        }
    }
    if (timed_out) {
        return {TDM_ERROR_FAILED,
                "gloo " + gloo_op_label(w) + " timed out after every rank arrived: no data moved" +
                    (peer >= 0 ? " between " + here + " and " + rank_pid(g, peer) : "") + " for " +
                    gloo_seconds_text(g->timeout_s) + " s (" + what + ")",
                {}};
    }
    std::vector<int> suspects;
    if (peer >= 0) {
        suspects.push_back(peer);
    } else {
        for (int r = 0; r < g->world; r++) {
            if (r != g->rank) {
                suspects.push_back(r);
            }
        }
    }
    std::vector<int> dead = find_dead(g, suspects, kDeadPollSeconds);
    if (!dead.empty()) {
        std::string who;
        for (size_t i = 0; i < dead.size(); i++) {
            who += (i > 0 ? ", " : "") + rank_pid(g, dead[i]);
        }
        return {TDM_ERROR_FAILED,
                who + " exited while " + here + " waited for it in gloo " + gloo_op_label(w) +
                    " (" + what + ")",
                {}};
    }
    if (peer >= 0) {
        /* Alive: it may be writing its record right now. */
        for (int i = 0; i < FAILURE_RECORD_TRIES; i++) {
            std::string record = failure_record(g, peer);
            if (!record.empty()) {
                return {TDM_ERROR_FAILED,
                        record + "; " + here + " then lost its connection to rank " +
                            std::to_string(peer),
                        {}};
            }
            g_usleep(PEER_POLL_US);
        }
        return {TDM_ERROR_FAILED,
                "rank " + std::to_string(peer) + " (pid " + std::to_string(g->peers[peer].pid) +
                    " on " + g->peers[peer].host + ") dropped its connection to " + here +
                    " during gloo " + gloo_op_label(w) + " (" + what + ")",
                {}};
    }
    return {TDM_ERROR_FAILED, "gloo " + gloo_op_label(w) + ": " + what, {}};
}

/* Leave the diagnosis where peers look for it, then close every connection
 * so that they fail now rather than at their timeout. */
static void fail_and_close(GlooComm *g, const OpFailure &f)
{
    if (g->store != nullptr) {
        std::string key = failure_key(g, g->rank);
        tdm_store_set(g->store, key.c_str(), f.message.data(), f.message.size(), nullptr);
    }
    try {
        g->ctx->closeConnections();
    } catch (...) {
    }
}

/* ---- one operation ---- */

static Millis remaining(const TdmWork *w)
{
    auto left = std::chrono::duration_cast<Millis>(w->deadline - Clock::now());
    return std::max(left, Millis(1)); /* Gloo reads 0 as "no timeout" */
}

static OpHeader header_of(const GlooComm *g, const TdmWork *w)
{
    OpHeader h;
    memset(&h, 0, sizeof h);
    h.magic = kHeaderMagic;
    h.rank = g->rank;
    h.seq = w->seq;
    h.op = (int32_t)w->op;
    switch (w->op) {
    case TDM_COLL_ALLREDUCE:
        h.dtype = (int32_t)w->a->dtype;
        h.count = tensor_count(w->a);
        h.rop = (int32_t)w->rop;
        break;
    case TDM_COLL_BROADCAST:
        h.dtype = (int32_t)w->a->dtype;
        h.count = tensor_count(w->a);
        h.root = w->root;
        break;
    case TDM_COLL_ALLGATHER:
        h.dtype = (int32_t)w->a->dtype;
        h.count = tensor_count(w->a);
        break;
    case TDM_COLL_REDUCE_SCATTER:
        h.dtype = (int32_t)w->b->dtype;
        h.count = tensor_count(w->b);
        h.rop = (int32_t)w->rop;
        break;
    case TDM_COLL_BARRIER:
        break;
    }
    return h;
}

/* The call as the front end words it: "allreduce(1024 x f32, sum)". */
static std::string describe(const OpHeader &h)
{
    TdmCollOp op = (TdmCollOp)h.op;
    std::string count = std::to_string(h.count) + " x " + tdm_dtype_name((TdmDType)h.dtype);
    switch (op) {
    case TDM_COLL_BARRIER:
        return "barrier()";
    case TDM_COLL_BROADCAST:
        return "broadcast(" + count + ", root " + std::to_string(h.root) + ")";
    case TDM_COLL_ALLGATHER:
        return "allgather(" + count + ")";
    default:
        return std::string(tdm_coll_op_name(op)) + "(" + count + ", " +
               tdm_reduce_op_name((TdmReduceOp)h.rop) + ")";
    }
}

static bool same_call(const OpHeader &x, const OpHeader &y)
{
    return x.op == y.op && x.dtype == y.dtype && x.count == y.count && x.root == y.root &&
           x.rop == y.rop;
}

/* Every rank sends what it runs to every other; on return all ranks are in
 * this operation and agree on it. */
static void exchange_headers(GlooComm *g, TdmWork *w)
{
    const int world = g->world;
    std::vector<OpHeader> hdr(world);
    memset(hdr.data(), 0, sizeof(OpHeader) * world);
    hdr[g->rank] = header_of(g, w);
    const size_t hs = sizeof(OpHeader);
    const uint64_t slot = kHeaderSlot | (w->seq & kSlotSeqMask);
    auto buf = g->ctx->createUnboundBuffer(hdr.data(), hs * world);
    try {
        for (int p = 0; p < world; p++) {
            if (p != g->rank) {
                buf->recv(p, slot, hs * p, hs);
            }
        }
        for (int p = 0; p < world; p++) {
            if (p != g->rank) {
                buf->send(p, slot, hs * g->rank, hs);
            }
        }
        for (int i = 0; i < world - 1; i++) {
            buf->waitRecv(remaining(w));
        }
        for (int i = 0; i < world - 1; i++) {
            buf->waitSend(remaining(w));
        }
    } catch (const gloo::Exception &e) {
        std::string what = gloo_strip_location(e.what());
        bool timed_out = looks_like_timeout(what) || Clock::now() >= w->deadline;
        /* A timeout has closed every pair already (Gloo does that), so the
         * headers are no longer written to and say who came. */
        std::vector<int> absent;
        for (int p = 0; timed_out && p < world; p++) {
            if (p != g->rank && (hdr[p].magic != kHeaderMagic || hdr[p].seq != w->seq)) {
                absent.push_back(p);
            }
        }
        OpFailure f = diagnose(g, w, what, -1, timed_out, true, absent);
        fail_and_close(g, f);
        throw f;
    }
    /* The reference is what most ranks run (the lowest rank's on a tie), so
     * the rank named is the odd one out, worded as the front end does. */
    int ref = 0, ref_votes = 0;
    for (int r = 0; r < world; r++) {
        int votes = 0;
        for (int q = 0; q < world; q++) {
            votes += same_call(hdr[q], hdr[r]);
        }
        if (votes > ref_votes) {
            ref = r;
            ref_votes = votes;
        }
    }
    for (int r = 0; r < world; r++) {
        if (!same_call(hdr[r], hdr[ref])) {
            throw OpFailure{TDM_ERROR_FAILED,
                            "collective mismatch at #" + std::to_string(w->seq) + ": rank " +
                                std::to_string(ref) + " called " + describe(hdr[ref]) + ", rank " +
                                std::to_string(r) + " called " + describe(hdr[r]),
                            {}};
        }
    }
}

template <typename T> static void gloo_allreduce_typed(GlooComm *g, TdmWork *w, T *data, size_t n)
{
    gloo::AllreduceOptions opts(g->ctx);
    opts.setOutput<T>(data, n);
    TdmReduceOp op = w->rop;
    opts.setReduceFunction([op](void *c, const void *a, const void *b, size_t k) {
        reduce_into<T>(op, (T *)c, (const T *)a, (const T *)b, k);
    });
    opts.setTag((uint32_t)w->seq);
    opts.setTimeout(remaining(w));
    gloo::allreduce(opts);
}

/* Ring allreduce in place: a reduce-scatter (at step s rank r passes part
 * r - s - 1 to the right and adds the left neighbour's part r - s - 2 into
 * its own copy, so that after world - 1 steps part r is complete), then an
 * allgather of the parts around the same ring. Parts differ by at most one
 * element, so any count works. */
static void ring_allreduce(GlooComm *g, TdmWork *w, char *data, size_t n)
{
    const int world = g->world, r = g->rank;
    const TdmDType dtype = w->a->dtype;
    const size_t es = tdm_dtype_size(dtype);
    auto off = [n, world](int part) { return n * (size_t)part / (size_t)world; };
    auto len = [&off](int part) { return off(part + 1) - off(part); };
    auto mod = [world](int x) { return ((x % world) + world) % world; };
    std::vector<char> tmp((len(0) + 1) * es);
    auto data_buf = g->ctx->createUnboundBuffer(data, n * es);
    auto tmp_buf = g->ctx->createUnboundBuffer(tmp.data(), tmp.size());
    const int right = mod(r + 1), left = mod(r - 1);
    const uint64_t rs_slot = kReduceScatterSlot | (w->seq & kSlotSeqMask);
    for (int s = 0; s < world - 1; s++) {
        int send_part = mod(r - s - 1), recv_part = mod(r - s - 2);
        data_buf->send(right, rs_slot, off(send_part) * es, len(send_part) * es);
        tmp_buf->recv(left, rs_slot, 0, len(recv_part) * es);
        g->waiting_on = left;
        tmp_buf->waitRecv(remaining(w));
        g->waiting_on = right;
        data_buf->waitSend(remaining(w));
        char *dst = data + off(recv_part) * es;
        reduce_any(dtype, w->rop, dst, dst, tmp.data(), len(recv_part));
    }
    if (w->rop == TDM_REDUCE_AVG) {
        scale_avg(dtype, data + off(r) * es, len(r), world);
    }
    const uint64_t ag_slot = kAllgatherSlot | (w->seq & kSlotSeqMask);
    for (int s = 0; s < world - 1; s++) {
        int send_part = mod(r - s), recv_part = mod(r - s - 1);
        data_buf->send(right, ag_slot, off(send_part) * es, len(send_part) * es);
        data_buf->recv(left, ag_slot, off(recv_part) * es, len(recv_part) * es);
        g->waiting_on = left;
        data_buf->waitRecv(remaining(w));
        g->waiting_on = right;
        data_buf->waitSend(remaining(w));
    }
}

static void run_allreduce(GlooComm *g, TdmWork *w)
{
    size_t n = (size_t)tensor_count(w->a);
    char *p = gloo_tensor_ptr(w->a);
    if (n == 0) {
        return;
    }
    /* Gloo's own ring, for comparison (TDM_GLOO_ALLREDUCE=gloo). */
    const char *algo = g_getenv("TDM_GLOO_ALLREDUCE");
    if (algo == nullptr || strcmp(algo, "gloo") != 0 || n < (size_t)g->world) {
        ring_allreduce(g, w, p, n);
        return;
    }
    switch (w->a->dtype) {
    case TDM_DTYPE_I32:
        gloo_allreduce_typed(g, w, (int32_t *)p, n);
        break;
    case TDM_DTYPE_I64:
        gloo_allreduce_typed(g, w, (int64_t *)p, n);
        break;
    default:
        gloo_allreduce_typed(g, w, (float *)p, n);
        break;
    }
    if (w->rop == TDM_REDUCE_AVG) {
        scale_avg(w->a->dtype, p, n, g->world);
    }
}

static void run_broadcast(GlooComm *g, TdmWork *w)
{
    size_t nbytes = tdm_tensor_nbytes(w->a);
    if (nbytes == 0) {
        return;
    }
    gloo::BroadcastOptions opts(g->ctx);
    opts.setOutput<uint8_t>((uint8_t *)gloo_tensor_ptr(w->a), nbytes);
    opts.setRoot(w->root);
    opts.setTag((uint32_t)w->seq);
    opts.setTimeout(remaining(w));
    gloo::broadcast(opts);
}

static void run_allgather(GlooComm *g, TdmWork *w)
{
    size_t part = tdm_tensor_nbytes(w->a);
    if (part == 0) {
        return;
    }
    uint8_t *out = (uint8_t *)gloo_tensor_ptr(w->b);
    uint8_t *in = (uint8_t *)gloo_tensor_ptr(w->a);
    gloo::AllgatherOptions opts(g->ctx);
    opts.setOutput<uint8_t>(out, part * g->world);
    if (in != out + part * g->rank) { /* else in place: the input is already there */
        opts.setInput<uint8_t>(in, part);
    }
    opts.setTag((uint32_t)w->seq);
    opts.setTimeout(remaining(w));
    gloo::allgather(opts);
}

/* Ring reduce-scatter: at step s rank r passes its running sum of part
 * (r - s - 1) to the right and adds its own input to the left neighbour's
 * running sum of part (r - s - 2); after world - 1 steps that is part r. Each
 * rank sends and receives (world - 1) / world of the data, half of what an
 * allreduce followed by keeping a slice would move. */
static void run_reduce_scatter(GlooComm *g, TdmWork *w)
{
    const int world = g->world, r = g->rank;
    const TdmDType dtype = w->b->dtype;
    const size_t n = (size_t)tensor_count(w->b);
    const size_t bytes = n * tdm_dtype_size(dtype);
    if (bytes == 0) {
        return;
    }
    char *in = gloo_tensor_ptr(w->a);
    char *out = gloo_tensor_ptr(w->b);
    std::vector<char> tmp(bytes), cur(bytes);
    auto in_buf = g->ctx->createUnboundBuffer(in, bytes * world);
    auto cur_buf = g->ctx->createUnboundBuffer(cur.data(), bytes);
    auto tmp_buf = g->ctx->createUnboundBuffer(tmp.data(), bytes);
    const int right = (r + 1) % world, left = (r + world - 1) % world;
    const uint64_t slot = kReduceScatterSlot | (w->seq & kSlotSeqMask);
    for (int s = 0; s < world - 1; s++) {
        auto &send_buf = s == 0 ? in_buf : cur_buf;
        size_t send_off = s == 0 ? bytes * (size_t)((r + world - 1) % world) : 0;
        send_buf->send(right, slot, send_off, bytes);
        tmp_buf->recv(left, slot, 0, bytes);
        g->waiting_on = left;
        tmp_buf->waitRecv(remaining(w));
        g->waiting_on = right;
        send_buf->waitSend(remaining(w));
        int part = ((r - s - 2) % world + world) % world;
        char *dst = s == world - 2 ? out : cur.data();
        reduce_any(dtype, w->rop, dst, in + bytes * part, tmp.data(), n);
    }
    if (w->rop == TDM_REDUCE_AVG) {
        scale_avg(dtype, out, n, world);
    }
}

void gloo_run_op(GlooComm *g, TdmWork *w)
{
    g->waiting_on = -1;
    exchange_headers(g, w);
    try {
        switch (w->op) {
        case TDM_COLL_ALLREDUCE:
            run_allreduce(g, w);
            break;
        case TDM_COLL_BROADCAST:
            run_broadcast(g, w);
            break;
        case TDM_COLL_ALLGATHER:
            run_allgather(g, w);
            break;
        case TDM_COLL_REDUCE_SCATTER:
            run_reduce_scatter(g, w);
            break;
        case TDM_COLL_BARRIER:
            break; /* the header exchange is one */
        }
    } catch (const gloo::Exception &e) {
        std::string what = gloo_strip_location(e.what());
        bool timed_out = looks_like_timeout(what) || Clock::now() >= w->deadline;
        OpFailure f = diagnose(g, w, what, g->waiting_on, timed_out, false, {});
        fail_and_close(g, f);
        throw f;
    }
}
