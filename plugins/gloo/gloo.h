/* SPDX-License-Identifier: MIT */
/* plugins/gloo/gloo.h - what the gloo plugin's two files share: the
 * communicator and work structures, the failure type that operations throw
 * (gloo-ops.cc) and the worker turns into a GError (gloo-comm.cc), and the
 * helpers both use. C++ only, never seen from C.
 */
#ifndef TDM_GLOO_H
#define TDM_GLOO_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/context.h>

#include <tandem/tandem.h>

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

/* The rendezvous polls the store for the other ranks' keys from this
 * interval, doubled up to the cap. */
constexpr int RDZV_POLL_FIRST_US = 500;
constexpr int RDZV_POLL_MAX_US = 50000;
/* Looking for a dead peer's process, or for the failure record a live
 * peer may be writing (that one FAILURE_RECORD_TRIES times). */
constexpr gulong PEER_POLL_US = 20000;
constexpr int FAILURE_RECORD_TRIES = 10;

/* What an operation failed with: becomes the work's GError. */
struct OpFailure {
    int code;
    std::string message;
    std::vector<int> missing;
};

struct Peer {
    int pid = 0;
    bool same_host = false; /* its pid can be checked from here */
    std::string host;
};

struct OpHeader {
    uint32_t magic;
    int32_t rank;
    uint64_t seq;
    int32_t op, dtype;
    int64_t count;
    int32_t root, rop;
};

struct GlooComm {
    int rank = 0, world = 1;
    double timeout_s = TDM_COMM_DEFAULT_TIMEOUT;
    std::shared_ptr<gloo::rendezvous::Context> ctx;
    std::vector<Peer> peers;
    std::map<std::string, int> rank_of_address; /* "[ip]:port" of our pairs' far ends */
    TdmStore *store = nullptr;                  /* for failure records; transfer none */
    std::string prefix;                         /* this communicator's store keys */
    std::thread thread;
    std::mutex lock;              /* queue, quit and every work's state */
    std::condition_variable cond; /* notified on any change of those */
    std::deque<TdmWork *> queue;
    bool quit = false;
    bool abandoned = false; /* a wait gave up on queued work: fail the rest */
    std::string broken;     /* worker only: why later operations fail */
    int waiting_on = -1;    /* worker only: the rank a ring step waits for */
};

struct _TdmWork {
    std::atomic<int> refs{1};
    TdmCollOp op = TDM_COLL_BARRIER;
    guint64 seq = 0;
    TdmTensor *a = nullptr, *b = nullptr;
    TdmReduceOp rop = TDM_REDUCE_SUM;
    int root = 0;
    bool started = false, done = false;
    Clock::time_point deadline;
    GError *error = nullptr;
    std::vector<int> missing;
};

/* gloo-ops.cc */
/* Runs one operation on the worker; throws OpFailure (or anything else,
 * which the worker reports as is). */
void gloo_run_op(GlooComm *g, TdmWork *w);
bool gloo_dtype_reduces(TdmDType dtype);
char *gloo_tensor_ptr(TdmTensor *t);
std::string gloo_op_label(const TdmWork *w);
std::string gloo_strip_location(const char *what);
std::string gloo_seconds_text(double s);
std::string gloo_address_in(const std::string &text);

#endif /* TDM_GLOO_H */
