/*
 * coll_gloo.cc — pod/coll.h over gloo (Debian's libgloo-dev, TCP transport). The only C++
 * in ipuofd: every entry point is extern "C" and catches everything gloo or the standard
 * library can throw, turning it into an error sentence; nothing unwinds into C.
 *
 * Rendezvous: each rank creates one gloo pair per peer (each listening on bind_addr, port
 * chosen by the kernel), publishes a record of their addresses under "<prefix>/addr/<rank>",
 * reads the others' and connects (gloo's connectFullMesh, done here so that every store wait
 * has the deadline of the open, records are checked before gloo reads them, and each
 * rank's printable address is known for error messages).
 */
#include "coll.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

/* An error whose text is already the sentence to report. */
struct CollError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

constexpr char kMagic[8] = {'I', 'P', 'U', 'O', 'F', 'G', 'L', '1'};
constexpr size_t kEpLen = 64; /* printable "ip:port" of one pair, NUL padded */
struct RecordHeader {
    char magic[8];
    uint32_t rank, size, addrlen, eplen;
};
/* Slots of the rank-order all-reduce and of the probe, apart from gloo's prefixes 1..8. */
constexpr uint64_t kSlotBase = (uint64_t)0x50 << 56;
constexpr uint64_t kProbeSlot = (uint64_t)0x51 << 56;

/* Blocks SIGPIPE in this thread for the guard's life; a SIGPIPE raised meanwhile by a write
 * to a closed socket is taken off the thread's pending set before the old mask returns. */
class SigpipeGuard {
  public:
    SigpipeGuard()
    {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
        sigset_t p;
        sigpending(&p);
        was_pending_ = sigismember(&p, SIGPIPE) == 1;
    }
    ~SigpipeGuard()
    {
        sigset_t p;
        sigpending(&p);
        if (!was_pending_ && sigismember(&p, SIGPIPE) == 1) {
            struct timespec zero = {0, 0};
            sigtimedwait(&pipe_, nullptr, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    SigpipeGuard(const SigpipeGuard &) = delete;
    SigpipeGuard &operator=(const SigpipeGuard &) = delete;

  private:
    sigset_t pipe_, old_;
    bool was_pending_;
};

/* "ip:port" (IPv4) or "[ip]:port" (IPv6) of a socket address, port in host order. */
std::string format_sockaddr(const struct sockaddr_storage &ss)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    char out[INET6_ADDRSTRLEN + 16];
    if (ss.ss_family == AF_INET) {
        const auto *in = reinterpret_cast<const struct sockaddr_in *>(&ss);
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
        snprintf(out, sizeof(out), "%s:%u", ip, (unsigned)ntohs(in->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const auto *in6 = reinterpret_cast<const struct sockaddr_in6 *>(&ss);
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
        snprintf(out, sizeof(out), "[%s]:%u", ip, (unsigned)ntohs(in6->sin6_port));
    } else {
        snprintf(out, sizeof(out), "(address family %d)", (int)ss.ss_family);
    }
    return out;
}

/* gloo::Context with the device and transport context set from outside (the members are
 * protected; gloo's own rendezvous::Context sets them the same way). */
class Comm : public gloo::Context {
  public:
    Comm(int r, int n) : gloo::Context(r, n) {}
    void attach(std::shared_ptr<gloo::transport::Device> dev,
                std::shared_ptr<gloo::transport::Context> tctx)
    {
        device_ = std::move(dev);
        transportContext_ = std::move(tctx);
    }
};

void copy_err(char *err, size_t errlen, const std::string &msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg.c_str());
}

/* out = a + b elementwise (gloo's reduce function signature; a may be out). */
void sum_f32(void *out, const void *a, const void *b, size_t n)
{
    float *o = static_cast<float *>(out);
    const float *x = static_cast<const float *>(a), *y = static_cast<const float *>(b);
    for (size_t i = 0; i < n; i++)
        o[i] = x[i] + y[i];
}

} // namespace

struct pod_coll {
    struct pod_store st;
    std::string prefix;
    int rank = 0, size = 1, timeout_ms = 0;
    enum pod_coll_sum_order order = POD_COLL_SUM_RING;
    std::shared_ptr<gloo::transport::Device> dev;
    std::shared_ptr<Comm> ctx;
    std::vector<std::string> addr; /* per rank: its address as this rank connects to it */
    std::string broken;            /* the first failure; empty while usable */
    uint64_t slot_seq = 0;
    int hint = -1;      /* the rank the current receive waits for, when known */
    int hint_send = -1; /* the rank the current send waits for, when known */
};

namespace {

/* The store's get with the rank's key: the value, or throws CollError naming who is late. */
std::vector<char> store_get(pod_coll *c, const std::string &key, int timeout_ms, const char *what)
{
    void *v = nullptr;
    size_t n = 0;
    char e[512] = "";
    int rc = c->st.get(c->st.ctx, key.c_str(), &v, &n, timeout_ms < 0 ? 0 : timeout_ms, e, sizeof(e));
    if (rc != 0) {
        free(v);
        throw CollError(std::string(what) + (rc == 1 ? " (store: " : " (the store failed: ") + e + ")");
    }
    if (n > POD_STORE_VALUE_MAX) {
        free(v);
        throw CollError(std::string("the store returned ") + std::to_string(n) + " bytes for key '" +
                        key + "', more than POD_STORE_VALUE_MAX");
    }
    std::vector<char> out(static_cast<char *>(v), static_cast<char *>(v) + n);
    free(v);
    return out;
}

int remaining_ms(Clock::time_point deadline)
{
    auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
}

/* Forms c's gloo context through the store (see the top of the file). Throws. */
void rendezvous(pod_coll *c, const char *bind_addr)
{
    const auto deadline = Clock::now() + Ms(c->timeout_ms);
    gloo::transport::tcp::attr attr;
    attr.hostname = bind_addr;
    try {
        c->dev = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception &e) {
        throw CollError(std::string("cannot listen on '") + bind_addr + "': " + e.what());
    }
    auto tctx = c->dev->createContext(c->rank, c->size);
    tctx->setTimeout(Ms(c->timeout_ms));
    std::vector<char> rec(sizeof(RecordHeader));
    size_t addrlen = 0;
    for (int i = 0; i < c->size; i++) {
        if (i == c->rank)
            continue;
        auto &pair = tctx->createPair(i);
        auto bytes = pair->address().bytes();
        addrlen = bytes.size();
        const auto &ta = dynamic_cast<const gloo::transport::tcp::Address &>(pair->address());
        char ep[kEpLen] = {0};
        snprintf(ep, sizeof(ep), "%s", format_sockaddr(ta.getSockaddr()).c_str());
        rec.insert(rec.end(), bytes.begin(), bytes.end());
        rec.insert(rec.end(), ep, ep + kEpLen);
    }
    RecordHeader h;
    memcpy(h.magic, kMagic, sizeof(kMagic));
    h.rank = (uint32_t)c->rank;
    h.size = (uint32_t)c->size;
    h.addrlen = (uint32_t)addrlen;
    h.eplen = (uint32_t)kEpLen;
    memcpy(rec.data(), &h, sizeof(h));
    const std::string mykey = c->prefix + "/addr/" + std::to_string(c->rank);
    char e[512] = "";
    if (c->st.set(c->st.ctx, mykey.c_str(), rec.data(), rec.size(), e, sizeof(e)) != 0)
        throw CollError("rendezvous '" + c->prefix + "': cannot publish this rank's addresses under '" +
                        mykey + "': " + e);
    const size_t entry = addrlen + kEpLen;
    for (int i = 0; i < c->size; i++) {
        if (i == c->rank)
            continue;
        const std::string key = c->prefix + "/addr/" + std::to_string(i);
        const std::string who = "rendezvous '" + c->prefix + "': rank " + std::to_string(i);
        auto v = store_get(c, key, remaining_ms(deadline),
                           (who + " did not join within " + std::to_string(c->timeout_ms) + " ms").c_str());
        RecordHeader ph;
        if (v.size() < sizeof(ph))
            throw CollError(who + "'s record '" + key + "' is " + std::to_string(v.size()) +
                            " bytes, shorter than its header: not written by pod_coll_open");
        memcpy(&ph, v.data(), sizeof(ph));
        if (memcmp(ph.magic, kMagic, sizeof(kMagic)) != 0 || ph.eplen != kEpLen)
            throw CollError(who + "'s record '" + key + "' was not written by this version of pod_coll_open");
        if (ph.rank != (uint32_t)i)
            throw CollError(who + "'s record '" + key + "' says rank " + std::to_string(ph.rank));
        if (ph.size != (uint32_t)c->size)
            throw CollError(who + " joined with size " + std::to_string(ph.size) + ", this rank (" +
                            std::to_string(c->rank) + ") with size " + std::to_string(c->size) +
                            ": every rank must open with the same size");
        if (ph.addrlen != addrlen || v.size() != sizeof(ph) + (size_t)(c->size - 1) * entry)
            throw CollError(who + "'s record '" + key + "' has " + std::to_string(v.size()) +
                            " bytes, not the " + std::to_string(sizeof(ph) + (size_t)(c->size - 1) * entry) +
                            " its header implies");
        const size_t idx = (size_t)(c->rank > i ? c->rank - 1 : c->rank);
        const char *p = v.data() + sizeof(ph) + idx * entry;
        c->addr[i] = std::string(p + addrlen, strnlen(p + addrlen, kEpLen));
        std::vector<char> peer(p, p + addrlen);
        try {
            tctx->getPair(i)->connect(peer);
        } catch (const std::exception &ex) {
            throw CollError("rendezvous '" + c->prefix + "': cannot connect to rank " + std::to_string(i) +
                            " (" + c->addr[i] + "): " + ex.what());
        }
    }
    c->ctx = std::make_shared<Comm>(c->rank, c->size);
    c->ctx->setTimeout(Ms(c->timeout_ms));
    c->ctx->attach(c->dev, tctx);
}

std::string rank_name(const pod_coll *c, int r)
{
    return "rank " + std::to_string(r) + " (" + (c->addr[r].empty() ? "address unknown" : c->addr[r]) + ")";
}

/* After op failed with gloo's message gmsg: the sentence naming the rank that went away.
 * Asks every pair for its own error (a send on a broken pair rethrows it), then the store
 * for the abort record of a rank that closed on us (its reason names the real culprit). */
std::string diagnose(pod_coll *c, const char *op, const std::string &gmsg)
{
    std::vector<std::string> state(c->size);
    char dummy = 0;
    try {
        auto probe = c->ctx->createUnboundBuffer(&dummy, 0);
        for (int j = 0; j < c->size; j++) {
            if (j == c->rank)
                continue;
            try {
                c->ctx->getPair(j)->send(probe.get(), kProbeSlot, 0, 0);
            } catch (const std::exception &e) {
                state[j] = e.what();
            }
        }
    } catch (const std::exception &) {
    }
    std::string seen;
    for (int j = 0; j < c->size; j++) {
        const std::string &s = state[j];
        if (j == c->rank || s.empty() || s.find("Application timeout") != std::string::npos)
            continue;
        const bool closed = s.find("closed by peer") != std::string::npos ||
                            s.find("Socket closed") != std::string::npos ||
                            s.find("Connection reset") != std::string::npos;
        std::vector<char> why;
        try {
            why = store_get(c, c->prefix + "/abort/" + std::to_string(j), 0, "no abort record");
        } catch (const std::exception &) {
        }
        if (why.empty())
            return rank_name(c, j) + (closed ? " closed the connection during " : " broke the connection during ") +
                   op + (closed ? "" : " (" + s + ")");
        if (seen.empty())
            seen = std::string(why.begin(), why.end()) + " (seen by rank " + std::to_string(j) + ")";
    }
    if (!seen.empty())
        return seen;
    if (gmsg.find("Timed out") != std::string::npos) {
        const int h = gmsg.find("for send") != std::string::npos && c->hint_send >= 0 ? c->hint_send : c->hint;
        if (h >= 0)
            return rank_name(c, h) + " did not answer within " + std::to_string(c->timeout_ms) +
                   " ms during " + op;
        return std::string("no answer from the other ranks within ") + std::to_string(c->timeout_ms) +
               " ms during " + op;
    }
    return std::string(op) + " failed: " + gmsg;
}

/* Marks c broken with msg: records it for the peers, closes every connection (they fail at
 * once instead of at their timeout). */
void fail(pod_coll *c, const std::string &msg)
{
    c->broken = msg;
    char e[256];
    const std::string key = c->prefix + "/abort/" + std::to_string(c->rank);
    c->st.set(c->st.ctx, key.c_str(), msg.data(), msg.size(), e, sizeof(e));
    try {
        c->ctx->closeConnections();
    } catch (const std::exception &) {
    }
}

/* Runs fn on c, turning whatever it throws into -1 with err; 0 when it returns. */
template <typename F>
int run(pod_coll *c, const char *op, char *err, size_t errlen, F fn)
{
    if (!c) {
        copy_err(err, errlen, std::string(op) + ": no communicator (NULL)");
        return -1;
    }
    if (!c->broken.empty()) {
        copy_err(err, errlen, std::string(op) + ": the communicator broke earlier (" + c->broken +
                                  "); close it and open a new one under a new prefix");
        return -1;
    }
    SigpipeGuard guard;
    std::string msg;
    try {
        c->hint = c->hint_send = -1;
        fn();
        return 0;
    } catch (const CollError &e) {
        msg = e.what();
    } catch (const gloo::IoException &e) {
        try {
            msg = diagnose(c, op, e.what());
        } catch (const std::exception &) {
            msg = std::string(op) + " failed: " + e.what();
        }
    } catch (const std::bad_alloc &) {
        msg = std::string(op) + ": out of memory";
    } catch (const std::exception &e) {
        msg = std::string(op) + " failed: " + e.what();
    } catch (...) {
        msg = std::string(op) + " failed: unknown C++ exception";
    }
    try {
        fail(c, msg);
    } catch (...) {
    }
    copy_err(err, errlen, msg);
    return -1;
}

/* Rank-order all-reduce of buf[0..n) (see coll.h): per window, every rank's slice k goes to
 * rank k, which sums the slices in rank order and sends the sum back to every rank. */
void allreduce_rank_order(pod_coll *c, float *buf, size_t n)
{
    const int R = c->size, me = c->rank;
    const size_t W = std::min(n, (size_t)POD_COLL_WINDOW_FLOATS);
    const size_t maxlen = W / (size_t)R + 1;
    std::vector<float> scratch(maxlen * (size_t)R);
    const Ms to(c->timeout_ms);
    for (size_t off = 0; off < n; off += W) {
        const size_t w = std::min(W, n - off), base = w / (size_t)R, rem = w % (size_t)R;
        auto start = [&](int k) { return (size_t)k * base + std::min((size_t)k, rem); };
        auto len = [&](int k) { return base + ((size_t)k < rem ? 1 : 0); };
        float *win = buf + off;
        auto ub = c->ctx->createUnboundBuffer(win, w * sizeof(float));
        auto us = c->ctx->createUnboundBuffer(scratch.data(), scratch.size() * sizeof(float));
        const uint64_t slot1 = kSlotBase + c->slot_seq++, slot2 = kSlotBase + c->slot_seq++;
        std::vector<char> got(R, 0);
        auto wait_all = [&](gloo::transport::UnboundBuffer *b, bool recv, int count) {
            std::fill(got.begin(), got.end(), 0);
            for (int k = 0; k < count; k++) {
                int h = -1;
                for (int j = 0; j < R && h < 0; j++)
                    if (j != me && !got[j])
                        h = j;
                (recv ? c->hint : c->hint_send) = h;
                int from = -1;
                if (recv)
                    b->waitRecv(&from, to);
                else
                    b->waitSend(&from, to);
                if (from >= 0 && from < R)
                    got[from] = 1;
            }
        };
        /* 1: slice k of every rank to rank k. */
        int nrecv = 0, nsend = 0;
        for (int j = 0; j < R; j++) {
            if (j == me)
                continue;
            if (len(me)) {
                us->recv(j, slot1, (size_t)j * maxlen * sizeof(float), len(me) * sizeof(float));
                nrecv++;
            }
            if (len(j)) {
                ub->send(j, slot1, start(j) * sizeof(float), len(j) * sizeof(float));
                nsend++;
            }
        }
        wait_all(us.get(), true, nrecv);
        wait_all(ub.get(), false, nsend);
        /* the sum in rank order, in this rank's own (unused) scratch slot */
        float *acc = scratch.data() + (size_t)me * maxlen;
        auto src = [&](int k) { return k == me ? win + start(me) : scratch.data() + (size_t)k * maxlen; };
        const size_t L = len(me);
        if (me != 0)
            memcpy(acc, src(0), L * sizeof(float));
        else
            memcpy(acc, win + start(me), L * sizeof(float));
        for (int k = 1; k < R; k++)
            sum_f32(acc, acc, src(k), L);
        memcpy(win + start(me), acc, L * sizeof(float));
        /* 2: every rank's sum to every rank. */
        nrecv = nsend = 0;
        for (int j = 0; j < R; j++) {
            if (j == me)
                continue;
            if (len(j)) {
                ub->recv(j, slot2, start(j) * sizeof(float), len(j) * sizeof(float));
                nrecv++;
            }
            if (L) {
                ub->send(j, slot2, start(me) * sizeof(float), L * sizeof(float));
                nsend++;
            }
        }
        wait_all(ub.get(), true, nrecv);
        wait_all(ub.get(), false, nsend);
    }
}

bool prefix_ok(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n > POD_COLL_PREFIX_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] <= ' ' || p[i] > '~')
            return false;
    return true;
}

} // namespace

extern "C" {

int pod_coll_open(struct pod_coll **out, const struct pod_store *st, const char *prefix, int rank,
                  int size, const char *bind_addr, int timeout_ms, char *err, size_t errlen)
{
    if (out)
        *out = nullptr;
    if (!out || !st || !st->set || !st->get) {
        copy_err(err, errlen, "pod_coll_open: out, the store and its set and get callbacks must not be NULL");
        return -1;
    }
    if (size < 1 || size > POD_COLL_MAX_RANKS || rank < 0 || rank >= size) {
        copy_err(err, errlen, "pod_coll_open: rank " + std::to_string(rank) + " of size " + std::to_string(size) +
                                  ": the size must be 1.." + std::to_string(POD_COLL_MAX_RANKS) +
                                  " and the rank 0..size-1");
        return -1;
    }
    if (timeout_ms < 1 || timeout_ms > 86400000) {
        copy_err(err, errlen, "pod_coll_open: timeout " + std::to_string(timeout_ms) +
                                  " ms: it must be 1..86400000 ms");
        return -1;
    }
    if (!prefix || !prefix_ok(prefix)) {
        copy_err(err, errlen, std::string("pod_coll_open: prefix '") + (prefix ? prefix : "(NULL)") +
                                  "' must be 1.." + std::to_string(POD_COLL_PREFIX_MAX) +
                                  " printable ASCII characters without spaces");
        return -1;
    }
    pod_coll *c = nullptr;
    SigpipeGuard guard; /* gloo's I/O thread, started here, inherits the blocked SIGPIPE */
    try {
        c = new pod_coll;
        c->st = *st;
        c->prefix = prefix;
        c->rank = rank;
        c->size = size;
        c->timeout_ms = timeout_ms;
        c->addr.resize(size);
        rendezvous(c, bind_addr ? bind_addr : "127.0.0.1");
        *out = c;
        return 0;
    } catch (const std::bad_alloc &) {
        copy_err(err, errlen, "pod_coll_open: out of memory");
    } catch (const std::exception &e) {
        copy_err(err, errlen, e.what());
    } catch (...) {
        copy_err(err, errlen, "pod_coll_open: unknown C++ exception");
    }
    pod_coll_close(c);
    return -1;
}

int pod_coll_set_sum_order(struct pod_coll *c, enum pod_coll_sum_order order, char *err, size_t errlen)
{
    if (!c || (order != POD_COLL_SUM_RING && order != POD_COLL_SUM_RANK_ORDER)) {
        copy_err(err, errlen, "pod_coll_set_sum_order: " + std::string(c ? "" : "no communicator; ") +
                                  "the order must be POD_COLL_SUM_RING (0) or POD_COLL_SUM_RANK_ORDER (1), not " +
                                  std::to_string((int)order));
        return -1;
    }
    c->order = order;
    return 0;
}

int pod_coll_allreduce_f32(struct pod_coll *c, float *buf, size_t n, char *err, size_t errlen)
{
    return run(c, "all-reduce", err, errlen, [&] {
        if (n > SIZE_MAX / sizeof(float) / 2)
            throw CollError("all-reduce: " + std::to_string(n) + " elements are more than memory can hold");
        if (n && !buf)
            throw CollError("all-reduce: the buffer is NULL for " + std::to_string(n) + " elements");
        if (n == 0 || c->size == 1)
            return;
        if (c->order == POD_COLL_SUM_RANK_ORDER) {
            allreduce_rank_order(c, buf, n);
            return;
        }
        gloo::AllreduceOptions opts(c->ctx);
        opts.setOutput(buf, n);
        opts.setReduceFunction(sum_f32);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setTimeout(Ms(c->timeout_ms));
        /* the ring waits on the next rank's segments and the previous rank's reads */
        c->hint = (c->rank + 1) % c->size;
        c->hint_send = (c->rank + c->size - 1) % c->size;
        gloo::allreduce(opts);
    });
}

int pod_coll_broadcast(struct pod_coll *c, void *buf, size_t bytes, int root, char *err, size_t errlen)
{
    if (c && (root < 0 || root >= c->size)) {
        copy_err(err, errlen, "broadcast: root " + std::to_string(root) + " is not a rank (0.." +
                                  std::to_string(c->size - 1) + ")");
        return -1;
    }
    return run(c, "broadcast", err, errlen, [&] {
        if (bytes && !buf)
            throw CollError("broadcast: the buffer is NULL for " + std::to_string(bytes) + " bytes");
        if (bytes == 0 || c->size == 1)
            return;
        gloo::BroadcastOptions opts(c->ctx);
        opts.setOutput(static_cast<uint8_t *>(buf), bytes);
        opts.setRoot(root);
        opts.setTimeout(Ms(c->timeout_ms));
        c->hint = c->rank == root ? -1 : root;
        gloo::broadcast(opts);
    });
}

int pod_coll_barrier(struct pod_coll *c, char *err, size_t errlen)
{
    return run(c, "barrier", err, errlen, [&] {
        if (c->size == 1)
            return;
        gloo::BarrierOptions opts(c->ctx);
        opts.setTimeout(Ms(c->timeout_ms));
        gloo::barrier(opts);
    });
}

int pod_coll_rank(const struct pod_coll *c)
{
    return c ? c->rank : -1;
}

int pod_coll_size(const struct pod_coll *c)
{
    return c ? c->size : -1;
}

int pod_coll_broken(const struct pod_coll *c)
{
    return !c || !c->broken.empty();
}

void pod_coll_close(struct pod_coll *c)
{
    if (!c)
        return;
    SigpipeGuard guard;
    try {
        c->ctx.reset(); /* the pairs close (their sockets), then the device's I/O thread stops */
        c->dev.reset();
    } catch (...) {
    }
    delete c;
}

} // extern "C"
