/* SPDX-License-Identifier: MIT */
/* plugins/gloo/gloo-comm.cc - libtdm-gloo: collectives between hosts over
 * Gloo's TCP transport (Debian's libgloo, BSD-3-Clause), behind the C ABI.
 *
 * Gloo has no store of its own here, so its rendezvous goes through the
 * core's TCP store (a gloo::rendezvous::Store over tdm_store_*, under a key
 * prefix per communicator); every rank also posts its pid and host there, and
 * the address of each of its connections, so that a peer that dies can be
 * named. Each communicator runs its operations in FIFO order on one worker
 * thread (gloo-ops.cc has the operations); a work handle is a completion flag
 * with an error. Gloo's own timeout is the communicator's, counted from the
 * start of each operation, so a dead or silent peer ends in an error, never a
 * hang. C++ exceptions never cross into C: every entry point from C, and the
 * worker, catch everything and turn it into a GError that names the op and
 * its sequence number.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <stdexcept>

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "gloo.h"

/* ---- the rendezvous store over the core's store ---- */

struct StoreError : std::runtime_error {
    explicit StoreError(const std::string &m) : std::runtime_error(m)
    {
    }
};

class TdmGlooStore : public gloo::rendezvous::Store
{
  public:
    TdmGlooStore(TdmStore *store, std::string prefix, Millis timeout)
        : store_(store), prefix_(std::move(prefix)), timeout_(timeout)
    {
    }

    void set(const std::string &key, const std::vector<char> &data) override
    {
        std::string k = prefix_ + key;
        GError *error = nullptr;
        if (!tdm_store_set(store_, k.c_str(), data.data(), data.size(), &error)) {
            throw_error("setting " + k, error);
        }
    }

    std::vector<char> get(const std::string &key) override
    {
        wait({key}, timeout_);
        std::string k = prefix_ + key;
        GError *error = nullptr;
        GBytes *value = tdm_store_get(store_, k.c_str(), &error);
        if (value == nullptr) {
            throw_error("reading " + k, error);
        }
        gsize len = 0;
        const char *data = static_cast<const char *>(g_bytes_get_data(value, &len));
        std::vector<char> out(data, data + len);
        g_bytes_unref(value);
        return out;
    }

    void wait(const std::vector<std::string> &keys) override
    {
        wait(keys, timeout_);
    }

    /* Polls rather than tdm_store_wait(): that one uses the store's own
     * timeout, which belongs to whoever else shares the store. */
    void wait(const std::vector<std::string> &keys, const Millis &timeout) override
    {
        auto deadline = Clock::now() + (timeout.count() > 0 ? timeout : timeout_);
        int sleep_us = RDZV_POLL_FIRST_US;
        for (;;) {
            std::vector<std::string> absent;
            for (const auto &key : keys) {
                std::string k = prefix_ + key;
                gboolean exists = FALSE;
                GError *error = nullptr;
                if (!tdm_store_check(store_, k.c_str(), &exists, &error)) {
                    throw_error("checking " + k, error);
                }
                if (!exists) {
                    absent.push_back(k);
                }
            }
            if (absent.empty()) {
                return;
            }
            if (Clock::now() >= deadline) {
                std::string list;
                for (const auto &k : absent) {
                    list += (list.empty() ? "" : ", ") + k;
                }
                throw StoreError(
                    "rendezvous timed out after " + gloo_seconds_text(timeout.count() / 1000.0) +
                    " s waiting for store keys " + list + " (ranks that never joined)");
            }
            g_usleep(sleep_us);
            sleep_us = std::min(sleep_us * 2, RDZV_POLL_MAX_US);
        }
    }

  private:
    [[noreturn]] static void throw_error(const std::string &what, GError *error)
    {
        std::string msg = "store: " + what + ": " + (error != nullptr ? error->message : "?");
        g_clear_error(&error);
        throw StoreError(msg);
    }

    TdmStore *store_;
    std::string prefix_;
    Millis timeout_;
};

static void work_unref(TdmWork *w)
{
    if (w->refs.fetch_sub(1) != 1) {
        return;
    }
    if (w->a != nullptr) {
        tdm_tensor_unref(w->a);
    }
    if (w->b != nullptr) {
        tdm_tensor_unref(w->b);
    }
    g_clear_error(&w->error);
    delete w;
}

/* Runs `w` on the worker; never throws. */
static void run_work(GlooComm *g, TdmWork *w)
{
    OpFailure f{0, "", {}};
    bool failed = false;
    if (!g->broken.empty()) {
        f = {TDM_ERROR_FAILED,
             "gloo communicator unusable after an earlier failure: " + g->broken,
             {}};
        failed = true;
    } else {
        try {
            gloo_run_op(g, w);
        } catch (const OpFailure &e) {
            f = e;
            failed = true;
        } catch (const std::exception &e) {
            f = {TDM_ERROR_FAILED,
                 "gloo " + gloo_op_label(w) + ": " + gloo_strip_location(e.what()),
                 {}};
            failed = true;
        } catch (...) {
            f = {TDM_ERROR_FAILED, "gloo " + gloo_op_label(w) + ": unknown C++ exception", {}};
            failed = true;
        }
        if (failed) {
            g->broken = gloo_op_label(w) + ": " + f.message;
        }
    }
    std::lock_guard<std::mutex> guard(g->lock);
    if (failed) {
        w->error = g_error_new_literal(TDM_ERROR, f.code, f.message.c_str());
        w->missing = f.missing;
    }
    w->done = true;
    g->cond.notify_all();
}

static void worker_main(GlooComm *g)
{
    /* A write to a peer that died raises SIGPIPE in the writing thread;
     * blocked here, it becomes an EPIPE that Gloo reports. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);

    std::unique_lock<std::mutex> lk(g->lock);
    for (;;) {
        g->cond.wait(lk, [g] { return g->quit || !g->queue.empty(); });
        if (g->queue.empty()) {
            break;
        }
        TdmWork *w = g->queue.front();
        g->queue.pop_front();
        if (g->quit || g->abandoned) {
            const char *why = g->quit ? "the communicator was freed first"
                                      : "an earlier wait on this rank gave up";
            w->error = g_error_new(TDM_ERROR, TDM_ERROR_FAILED, "gloo %s never ran: %s",
                                   gloo_op_label(w).c_str(), why);
            w->done = true;
            g->cond.notify_all();
            work_unref(w);
            continue;
        }
        w->started = true;
        w->deadline = Clock::now() + Millis((int64_t)(g->timeout_s * 1000));
        lk.unlock();
        run_work(g, w);
        work_unref(w);
        lk.lock();
    }
}

/* ---- setup ---- */

static std::string read_first_line(const char *path)
{
    gchar *text = nullptr;
    if (!g_file_get_contents(path, &text, nullptr, nullptr)) {
        return "?";
    }
    std::string s = g_strchomp(text);
    g_free(text);
    return s;
}

/* Same kernel and pid namespace: the peer's pid can be checked from here. */
static std::string pid_scope(void)
{
    gchar *ns = g_file_read_link("/proc/self/ns/pid", nullptr);
    std::string s =
        read_first_line("/proc/sys/kernel/random/boot_id") + " " + (ns != nullptr ? ns : "?");
    g_free(ns);
    return s;
}

/* The local address that reaches `host` (no packet is sent: connecting a
 * UDP socket only picks the route); empty when that fails. */
static std::string address_towards(const char *host)
{
    struct addrinfo hints, *res = nullptr;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_DGRAM;
    if (host == nullptr || getaddrinfo(host, "9", &hints, &res) != 0 || res == nullptr) {
        return "";
    }
    std::string out;
    int fd = socket(res->ai_family, SOCK_DGRAM, 0);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        char name[NI_MAXHOST];
        if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
            getnameinfo((struct sockaddr *)&ss, len, name, sizeof name, nullptr, 0,
                        NI_NUMERICHOST) == 0) {
            out = name;
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    freeaddrinfo(res);
    return out;
}

/* Where this rank listens: TDM_GLOO_IFNAME (an interface), else
 * TDM_GLOO_HOSTNAME, else the address that reaches the store's host (the
 * loopback address when the job runs on one host), else the host name. */
static gloo::transport::tcp::attr device_attr(void)
{
    gloo::transport::tcp::attr attr;
    const char *ifname = g_getenv("TDM_GLOO_IFNAME");
    const char *hostname = g_getenv("TDM_GLOO_HOSTNAME");
    if (ifname != nullptr && ifname[0] != '\0') {
        attr.iface = ifname;
        return attr;
    }
    if (hostname != nullptr && hostname[0] != '\0') {
        attr.hostname = hostname;
        return attr;
    }
    TdmDistEnv env;
    memset(&env, 0, sizeof env);
    std::string addr;
    if (tdm_dist_env_read(&env, nullptr)) {
        addr = address_towards(env.master_addr != nullptr ? env.master_addr : "127.0.0.1");
    }
    tdm_dist_env_clear(&env);
    attr.hostname = !addr.empty() ? addr : std::string(g_get_host_name());
    return attr;
}

static const char *restart_generation(void)
{
    const char *gen = g_getenv("TDM_RESTART_COUNT");
    if (gen == nullptr) {
        gen = g_getenv("TORCHELASTIC_RESTART_COUNT");
    }
    return gen != nullptr ? gen : "0";
}

/* Every rank posts "pid host pid-scope"; all read everyone's. */
static void exchange_peers(GlooComm *g, TdmGlooStore &store)
{
    std::string scope = pid_scope();
    std::string mine = std::to_string((int)getpid()) + "\n" + g_get_host_name() + "\n" + scope;
    store.set("peer/" + std::to_string(g->rank), std::vector<char>(mine.begin(), mine.end()));
    g->peers.resize(g->world);
    for (int r = 0; r < g->world; r++) {
        std::vector<char> v = store.get("peer/" + std::to_string(r));
        std::string s(v.begin(), v.end());
        size_t a = s.find('\n'), b = a == std::string::npos ? a : s.find('\n', a + 1);
        if (b == std::string::npos) {
            throw StoreError("malformed peer record of rank " + std::to_string(r));
        }
        g->peers[r].pid = atoi(s.substr(0, a).c_str());
        g->peers[r].host = s.substr(a + 1, b - a - 1);
        g->peers[r].same_host = s.substr(b + 1) == scope;
    }
}

/* Gloo names a failed connection by its far end's address: every rank
 * posts the local end of each of its pairs, so each far end maps to a rank. */
static void map_addresses(GlooComm *g, TdmGlooStore &store)
{
    for (int p = 0; p < g->world; p++) {
        if (p != g->rank) {
            std::string mine = gloo_address_in(g->ctx->getPair(p)->address().str());
            store.set("addr/" + std::to_string(g->rank) + "/" + std::to_string(p),
                      std::vector<char>(mine.begin(), mine.end()));
        }
    }
    for (int p = 0; p < g->world; p++) {
        if (p != g->rank) {
            std::vector<char> v =
                store.get("addr/" + std::to_string(p) + "/" + std::to_string(g->rank));
            std::string theirs(v.begin(), v.end());
            if (!theirs.empty()) {
                g->rank_of_address[theirs] = p;
            }
        }
    }
    if (g_getenv("TDM_GLOO_DEBUG") != nullptr) {
        for (const auto &kv : g->rank_of_address) {
            g_printerr("gloo rank %d: peer %s is rank %d\n", g->rank, kv.first.c_str(), kv.second);
        }
    }
}

/* Threads started while SIGPIPE is blocked (Gloo's event loop) keep it
 * blocked; a SIGPIPE raised meanwhile in this thread is swallowed. */
class SigpipeBlock
{
  public:
    SigpipeBlock()
    {
        sigemptyset(&set_);
        sigaddset(&set_, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &set_, &old_);
    }
    ~SigpipeBlock()
    {
        sigset_t pending;
        struct timespec zero = {0, 0};
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) &&
            !sigismember(&old_, SIGPIPE)) {
            sigtimedwait(&set_, nullptr, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }

  private:
    sigset_t set_, old_;
};

static void gloo_connect(TdmComm *comm, GlooComm *g)
{
    static std::atomic<int> comm_counter{0};
    int n = comm_counter.fetch_add(1);
    std::string prefix =
        std::string("tdm/gloo/") + restart_generation() + "/" + std::to_string(n) + "/";
    Millis timeout((int64_t)(g->timeout_s * 1000));
    TdmGlooStore store(comm->store, prefix, timeout);
    exchange_peers(g, store);

    SigpipeBlock block;
    auto attr = device_attr();
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(g->rank, g->world);
    ctx->setTimeout(timeout);
    TdmGlooStore mesh(comm->store, prefix + "mesh/", timeout);
    ctx->connectFullMesh(mesh, dev);
    g->ctx = ctx;
    g->store = comm->store;
    g->prefix = prefix;
    map_addresses(g, store);
    g->thread = std::thread(worker_main, g);
}

/* ---- the class ---- */

extern "C" {

/* Host memory only; the core stages the tensors of other devices
 * (TDM_COMM_FLAG_HOST_STAGING). */
static gboolean gloo_supports_device(const TdmDevice *dev)
{
    return tdm_device_host_accessible(dev);
}

static void gloo_finalize(TdmComm *comm);

static gboolean gloo_init(TdmComm *comm, GError **error)
{
    GlooComm *g = nullptr;
    try {
        g = new GlooComm();
        comm->priv = g;
        g->rank = comm->rank;
        g->world = comm->world;
        g->timeout_s = comm->opts.timeout_s > 0 ? comm->opts.timeout_s : TDM_COMM_DEFAULT_TIMEOUT;
        if (comm->world > 1) {
            if (comm->store == nullptr) {
                throw StoreError("no store to rendezvous through");
            }
            gloo_connect(comm, g);
        }
        return TRUE;
    } catch (const std::exception &e) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "gloo rendezvous of rank %d of %d: %s",
                    comm->rank, comm->world, gloo_strip_location(e.what()).c_str());
    } catch (...) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                    "gloo rendezvous of rank %d of %d: unknown C++ exception", comm->rank,
                    comm->world);
    }
    gloo_finalize(comm);
    return FALSE;
}

static void gloo_finalize(TdmComm *comm)
{
    GlooComm *g = static_cast<GlooComm *>(comm->priv);
    if (g == nullptr) {
        return;
    }
    try {
        if (g->thread.joinable()) {
            {
                std::lock_guard<std::mutex> guard(g->lock);
                g->quit = true;
                g->cond.notify_all();
            }
            g->thread.join();
        }
        g->ctx.reset();
    } catch (...) {
        /* Nothing to report from here; the process goes on without it. */
    }
    delete g;
    comm->priv = nullptr;
}

/* One rank: every op is a local copy or nothing. */
static void run_alone(TdmWork *w)
{
    if ((w->op == TDM_COLL_ALLGATHER || w->op == TDM_COLL_REDUCE_SCATTER) &&
        tdm_tensor_nbytes(w->b) > 0 && gloo_tensor_ptr(w->a) != gloo_tensor_ptr(w->b)) {
        memmove(gloo_tensor_ptr(w->b), gloo_tensor_ptr(w->a), tdm_tensor_nbytes(w->b));
    }
    w->done = true;
}

static TdmWork *submit(TdmComm *comm, TdmCollOp op, guint64 seq, TdmTensor *a, TdmTensor *b,
                       TdmReduceOp rop, int root, GError **error)
{
    GlooComm *g = static_cast<GlooComm *>(comm->priv);
    try {
        TdmWork *w = new TdmWork();
        w->op = op;
        w->seq = seq;
        w->a = a != nullptr ? tdm_tensor_ref(a) : nullptr;
        w->b = b != nullptr ? tdm_tensor_ref(b) : nullptr;
        w->rop = rop;
        w->root = root;
        if (!g->thread.joinable()) {
            run_alone(w);
            return w;
        }
        w->refs.fetch_add(1); /* the queue's */
        std::lock_guard<std::mutex> guard(g->lock);
        g->queue.push_back(w);
        g->cond.notify_all();
        return w;
    } catch (const std::exception &e) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "gloo %s #%" G_GUINT64_FORMAT ": %s",
                    tdm_coll_op_name(op), seq, e.what());
    } catch (...) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                    "gloo %s #%" G_GUINT64_FORMAT ": unknown C++ exception", tdm_coll_op_name(op),
                    seq);
    }
    return nullptr;
}

static gboolean check_reducible(const char *op, guint64 seq, TdmTensor *t, GError **error)
{
    if (!gloo_dtype_reduces(t->dtype)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "gloo %s #%" G_GUINT64_FORMAT ": dtype %s cannot be reduced (f32, i32 and "
                    "i64 can)",
                    op, seq, tdm_dtype_name(t->dtype));
        return FALSE;
    }
    return TRUE;
}

static TdmWork *gloo_allreduce(TdmComm *comm, guint64 seq, TdmTensor *t, TdmReduceOp op,
                               GError **error)
{
    if (!check_reducible("allreduce", seq, t, error)) {
        return nullptr;
    }
    return submit(comm, TDM_COLL_ALLREDUCE, seq, t, nullptr, op, 0, error);
}

static TdmWork *gloo_broadcast(TdmComm *comm, guint64 seq, TdmTensor *t, int root, GError **error)
{
    return submit(comm, TDM_COLL_BROADCAST, seq, t, nullptr, TDM_REDUCE_SUM, root, error);
}

static TdmWork *gloo_allgather(TdmComm *comm, guint64 seq, TdmTensor *in, TdmTensor *out,
                               GError **error)
{
    return submit(comm, TDM_COLL_ALLGATHER, seq, in, out, TDM_REDUCE_SUM, 0, error);
}

static TdmWork *gloo_reduce_scatter(TdmComm *comm, guint64 seq, TdmTensor *in, TdmTensor *out,
                                    TdmReduceOp op, GError **error)
{
    if (!check_reducible("reduce_scatter", seq, in, error)) {
        return nullptr;
    }
    return submit(comm, TDM_COLL_REDUCE_SCATTER, seq, in, out, op, 0, error);
}

static TdmWork *gloo_barrier(TdmComm *comm, guint64 seq, GError **error)
{
    return submit(comm, TDM_COLL_BARRIER, seq, nullptr, nullptr, TDM_REDUCE_SUM, 0, error);
}

static gboolean gloo_wait(TdmComm *comm, TdmWork *w, double timeout_s, int **missing,
                          GError **error)
{
    GlooComm *g = static_cast<GlooComm *>(comm->priv);
    try {
        std::unique_lock<std::mutex> lk(g->lock);
        auto done = [w] { return w->done; };
        auto deadline = Clock::now() + Millis((int64_t)(timeout_s * 1000));
        if (!g->cond.wait_until(lk, deadline, done)) {
            auto it = std::find(g->queue.begin(), g->queue.end(), w);
            if (it != g->queue.end()) {
                /* Never started: the ranks are out of step from here on. */
                g->queue.erase(it);
                g->abandoned = true;
                work_unref(w);
                g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                            "gloo %s never started within %.1f s: the operations before it "
                            "did not finish",
                            gloo_op_label(w).c_str(), timeout_s);
                return FALSE;
            }
            /* Running: Gloo's own timeout, counted from its start, ends it. */
            g->cond.wait_until(lk, w->deadline + std::chrono::seconds(5), done);
            if (!w->done) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                            "gloo %s still running after %.1f s", gloo_op_label(w).c_str(),
                            timeout_s);
                return FALSE;
            }
        }
        if (w->error != nullptr) {
            if (w->error->code == TDM_ERROR_TIMEOUT && missing != nullptr && !w->missing.empty()) {
                *missing = g_new(int, w->missing.size() + 1);
                std::copy(w->missing.begin(), w->missing.end(), *missing);
                (*missing)[w->missing.size()] = -1;
            }
            g_propagate_error(error, g_error_copy(w->error));
            return FALSE;
        }
        return TRUE;
    } catch (const std::exception &e) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "gloo wait: %s", e.what());
    } catch (...) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "gloo wait: unknown C++ exception");
    }
    return FALSE;
}

static void gloo_work_free(TdmComm *comm, TdmWork *w)
{
    if (w != nullptr) {
        work_unref(w);
    }
}

static const TdmCommClass gloo_class = {
    TDM_COMM_IFACE_VERSION,
    sizeof(TdmCommClass),
    gloo_supports_device,
    nullptr, /* supports_job: any job, on any hosts */
    gloo_init,
    gloo_finalize,
    gloo_allreduce,
    gloo_broadcast,
    gloo_allgather,
    gloo_reduce_scatter,
    gloo_barrier,
    gloo_wait,
    gloo_work_free,
    TDM_COMM_FLAG_HOST_STAGING,
    {nullptr},
};

TDM_PLUGIN_INIT_FEATURE(gloo_plugin_init, TDM_FEATURE_COLLECTIVE, "gloo", 40, &gloo_class,
                        "collectives across hosts over Gloo's TCP transport "
                        "(libgloo, BSD-3-Clause)",
                        NULL, NULL)

TDM_PLUGIN_DEFINE(gloo, "MIT",
                  "Collectives over Gloo's TCP transport (uses libgloo, BSD-3-Clause)", "tandem",
                  gloo_plugin_init)

} /* extern "C" */
