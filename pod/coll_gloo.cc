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
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <gloo/allgather.h>
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
constexpr size_t kTokenLen = 16;
struct RecordHeader {
    char magic[8];
    uint32_t rank, size, addrlen, eplen;
    unsigned char token[kTokenLen]; /* random; a peer proves it read this record by sending it */
};
/* Slots of the rank-order all-reduce and of the probe, apart from gloo's prefixes 1..8. */
constexpr uint64_t kSlotBase = (uint64_t)0x50 << 56;
constexpr uint64_t kProbeSlot = (uint64_t)0x51 << 56;
constexpr uint64_t kTokenSlot = (uint64_t)0x52 << 56;
/* The longest a failed rank waits for a peer's abort record (3 or more ranks; diagnose). */
constexpr int kRecordGraceMs = 1000;

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

/* What a call is, exchanged before it (agree): every rank must make the same call. */
struct Desc {
    uint32_t op;    /* 1 all-reduce, 2 broadcast, 3 barrier, 4 all-reduce of several buffers */
    uint32_t order; /* the sum order (all-reduce) */
    uint64_t n;     /* elements (all-reduce) or bytes (broadcast) */
    int64_t root;   /* broadcast */
    uint64_t seq;   /* the call's number on this communicator */
    int64_t nin;    /* buffers (op 4; may differ between ranks) */
};
static_assert(sizeof(Desc) == 40, "Desc is sent as bytes");

} // namespace

struct pod_coll {
    struct pod_store st;
    std::string prefix;
    int rank = 0, size = 1, timeout_ms = 0;
    int grace_ms = 0; /* given to peers' abort records after a failure (diagnose) */
    int wait_ms = 0;  /* each wait of a collective: timeout_ms - grace_ms */
    enum pod_coll_sum_order order = POD_COLL_SUM_RING;
    std::shared_ptr<gloo::transport::Device> dev;
    std::shared_ptr<Comm> ctx;
    std::vector<std::string> addr; /* per rank: its address as this rank connects to it */
    std::string broken;            /* the first failure; empty while usable */
    int failed = -1;               /* the rank that went away (diagnose), -1 when unknown */
    uint64_t slot_seq = 0;
    uint64_t calls = 0;        /* calls made: every rank's count must agree */
    std::vector<Desc> descs;   /* every rank's Desc of the current call */
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

/* bind_addr resolved to a numeric address (the first getaddrinfo gives), or throws. gloo
 * resolves it again but reads past a failed getaddrinfo (it checks for -1, while getaddrinfo
 * returns EAI_* codes), so a name that does not resolve must not reach it. */
std::string numeric_host(const char *bind_addr)
{
    struct addrinfo hints, *res = nullptr;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    int rv = getaddrinfo(bind_addr, nullptr, &hints, &res);
    if (rv != 0 || !res)
        throw CollError(std::string("cannot listen on '") + bind_addr + "': " +
                        (rv ? gai_strerror(rv) : "no address") + " (an IP address or host name of this machine)");
    char host[NI_MAXHOST];
    rv = getnameinfo(res->ai_addr, res->ai_addrlen, host, sizeof(host), nullptr, 0, NI_NUMERICHOST);
    /* gloo leaks its getaddrinfo list when bind fails: try the bind here first */
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int bind_errno = fd < 0 ? errno : (bind(fd, res->ai_addr, res->ai_addrlen) == 0 ? 0 : errno);
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    if (rv != 0)
        throw CollError(std::string("cannot listen on '") + bind_addr + "': " + gai_strerror(rv));
    if (bind_errno)
        throw CollError(std::string("cannot listen on '") + bind_addr + "' (" + host + "): " + strerror(bind_errno) +
                        " (an IP address of this machine)");
    return host;
}

/* Every rank sends each peer the token that peer published and checks the one it gets
 * against its own: a connection that gloo accepted from someone who has not read the store
 * (gloo's TCP transport authenticates nobody) is refused here, naming the rank it claimed
 * to be. tokens[j] is rank j's published token; proofs is room for what comes in. */
void check_tokens(pod_coll *c, gloo::transport::Context *tctx, const unsigned char *mine,
                  std::vector<unsigned char> &tokens, std::vector<unsigned char> &proofs,
                  Clock::time_point deadline)
{
    if (c->size == 1)
        return;
    auto out = tctx->createUnboundBuffer(tokens.data(), tokens.size());
    auto in = tctx->createUnboundBuffer(proofs.data(), proofs.size());
    for (int j = 0; j < c->size; j++) {
        if (j == c->rank)
            continue;
        in->recv(j, kTokenSlot, (size_t)j * kTokenLen, kTokenLen);
        out->send(j, kTokenSlot, (size_t)j * kTokenLen, kTokenLen);
    }
    std::vector<char> got(c->size, 0);
    for (int k = 0; k < c->size - 1; k++) {
        int from = -1;
        try {
            in->waitRecv(&from, Ms(std::max(1, remaining_ms(deadline))));
        } catch (const std::exception &e) {
            int j = 0;
            while (j < c->size && (j == c->rank || got[j]))
                j++;
            throw CollError("rendezvous '" + c->prefix + "': rank " + std::to_string(j) + " (" + c->addr[j] +
                            ") did not send its token: " + e.what());
        }
        if (from < 0 || from >= c->size || from == c->rank)
            throw CollError("rendezvous '" + c->prefix + "': a token came from no rank");
        got[from] = 1;
        if (memcmp(&proofs[(size_t)from * kTokenLen], mine, kTokenLen) != 0)
            throw CollError("rendezvous '" + c->prefix + "': the connection of rank " + std::to_string(from) +
                            " (" + c->addr[from] + ") did not send the token this rank published: it is not"
                            " from that rank (a process outside the communicator connected first?)");
    }
    for (int k = 0; k < c->size - 1; k++)
        out->waitSend(Ms(std::max(1, remaining_ms(deadline))));
}

/* Forms c's gloo context through the store (see the top of the file). Throws. */
void rendezvous(pod_coll *c, const char *bind_addr)
{
    const auto deadline = Clock::now() + Ms(c->timeout_ms);
    gloo::transport::tcp::attr attr;
    attr.hostname = numeric_host(bind_addr);
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
        /* gloo sends its whole sockaddr_storage (its first member): zero what the address
         * family leaves unwritten rather than publish uninitialised memory */
        const size_t used = ta.getSockaddr().ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                   : offsetof(struct sockaddr_in, sin_zero);
        if (bytes.size() >= sizeof(struct sockaddr_storage))
            memset(bytes.data() + used, 0, sizeof(struct sockaddr_storage) - used);
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
    if (getrandom(h.token, sizeof(h.token), 0) != (ssize_t)sizeof(h.token))
        throw CollError(std::string("cannot draw the rendezvous token: ") + strerror(errno));
    memcpy(rec.data(), &h, sizeof(h));
    const std::string mykey = c->prefix + "/addr/" + std::to_string(c->rank);
    char e[512] = "";
    if (c->st.set(c->st.ctx, mykey.c_str(), rec.data(), rec.size(), e, sizeof(e)) != 0)
        throw CollError("rendezvous '" + c->prefix + "': cannot publish this rank's addresses under '" +
                        mykey + "': " + e);
    const size_t entry = addrlen + kEpLen;
    std::vector<unsigned char> tokens((size_t)c->size * kTokenLen), proofs((size_t)c->size * kTokenLen);
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
        memcpy(&tokens[(size_t)i * kTokenLen], ph.token, kTokenLen);
        std::vector<char> peer(p, p + addrlen);
        try {
            tctx->getPair(i)->connect(peer);
        } catch (const std::exception &ex) {
            throw CollError("rendezvous '" + c->prefix + "': cannot connect to rank " + std::to_string(i) +
                            " (" + c->addr[i] + "): " + ex.what());
        }
    }
    check_tokens(c, tctx.get(), h.token, tokens, proofs, deadline);
    c->ctx = std::make_shared<Comm>(c->rank, c->size);
    c->ctx->setTimeout(Ms(c->wait_ms));
    c->ctx->attach(c->dev, tctx);
}

/* What one rank saw when its call failed: the rank it holds responsible (the one it was
 * waiting for, or the one that closed on it), whether that rank's connection broke, and the
 * address it knows that rank by. Written to the store as its abort record "w closed addr". */
struct View {
    int w = -1;
    bool closed = false;
    std::string addr;
};

/* This rank's view after gloo's error gmsg. Every pair is asked for its own error (a send
 * on a broken pair rethrows it; a pair that only saw this rank's own timeout says
 * "Application timeout"). A timeout blames the rank the wait was for; a broken connection
 * blames the rank being waited for if its connection broke, else the first that broke. */
View local_view(pod_coll *c, const std::string &gmsg)
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
    auto broke = [&](int j) {
        return j >= 0 && j != c->rank && !state[j].empty() &&
               state[j].find("Application timeout") == std::string::npos;
    };
    const bool timed_out = gmsg.find("Timed out") != std::string::npos;
    const int h = timed_out && gmsg.find("for send") != std::string::npos && c->hint_send >= 0 ? c->hint_send
                                                                                                 : c->hint;
    View v;
    if (timed_out || broke(h)) {
        v.w = h;
    } else {
        for (int j = 0; j < c->size && v.w < 0; j++)
            if (broke(j))
                v.w = j;
        if (v.w < 0)
            v.w = h;
    }
    if (v.w >= 0) {
        v.closed = broke(v.w);
        v.addr = c->addr[v.w].empty() ? "address unknown" : c->addr[v.w];
    }
    return v;
}

/* Rank j's abort record, waiting up to grace_ms for it; false when there is none. */
bool abort_record(pod_coll *c, int j, int grace_ms, View *out)
{
    const auto end = Clock::now() + Ms(grace_ms);
    for (;;) {
        try {
            auto v = store_get(c, c->prefix + "/abort/" + std::to_string(j), 0, "no abort record");
            std::string s(v.begin(), v.end());
            int w = -1, closed = 0, used = 0;
            if (sscanf(s.c_str(), "%d %d %n", &w, &closed, &used) < 2 || w < -1 || w >= c->size)
                return false;
            out->w = w;
            out->closed = closed != 0;
            out->addr = s.substr((size_t)used);
            return true;
        } catch (const std::exception &) {
        }
        if (Clock::now() >= end)
            return false;
        struct timespec nap = {0, 10 * 1000000L};
        nanosleep(&nap, nullptr);
    }
}

/* The sentence naming the rank that went away, from this rank's view: follows the chain of
 * "waiting for" through the abort records of ranks that failed too (each alive, it wrote a
 * record; kRecordGraceMs is given for one to appear) to a rank that wrote none: that one
 * closed the connection or did not answer, as seen by the last rank of the chain. The waits
 * of a collective are timeout_ms - grace_ms long, so the whole takes at most timeout_ms. */
std::string diagnose(pod_coll *c, const char *op, const View &mine, const std::string &gmsg)
{
    if (mine.w < 0)
        return gmsg.find("Timed out") != std::string::npos
                   ? "no answer from the other ranks within " + std::to_string(c->timeout_ms) + " ms during " + op
                   : std::string(op) + " failed: " + gmsg;
    const int grace = c->grace_ms;
    std::vector<char> seen(c->size, 0);
    seen[c->rank] = 1;
    View cur = mine;
    int observer = c->rank;
    View next;
    while (!seen[cur.w] && abort_record(c, cur.w, grace, &next) && next.w >= 0) {
        seen[cur.w] = 1;
        observer = cur.w;
        cur = next;
    }
    c->failed = cur.w;
    std::string msg = "rank " + std::to_string(cur.w) + " (" + cur.addr + ")" +
                      (cur.closed ? " closed the connection during " + std::string(op)
                                  : " did not answer within " + std::to_string(c->timeout_ms) + " ms during " + op);
    if (observer != c->rank)
        msg += " (seen by rank " + std::to_string(observer) + ")";
    return msg;
}

std::string describe(const Desc &d)
{
    const std::string order = d.order == POD_COLL_SUM_RANK_ORDER ? "rank order" : "ring";
    switch (d.op) {
    case 1: return "an all-reduce of " + std::to_string(d.n) + " floats (" + order + ")";
    case 2: return "a broadcast of " + std::to_string(d.n) + " bytes from rank " + std::to_string(d.root);
    case 3: return "a barrier";
    case 4: return "an all-reduce of " + std::to_string(d.n) + " floats from several buffers";
    default: return "call kind " + std::to_string(d.op);
    }
}

/* Every rank's Desc of this call, gathered into c->descs; throws CollError naming the first
 * rank whose call differs from this one. gloo's I/O thread ends the process on a message
 * longer than the receive posted for it, which calls of different sizes would send: this
 * exchange, of the same size whatever the call, comes first. */
void agree(pod_coll *c, const Desc &mine)
{
    c->descs.assign((size_t)c->size, Desc{});
    gloo::AllgatherOptions opts(c->ctx);
    opts.setInput(reinterpret_cast<uint8_t *>(const_cast<Desc *>(&mine)), sizeof(Desc));
    opts.setOutput(reinterpret_cast<uint8_t *>(c->descs.data()), sizeof(Desc) * c->descs.size());
    opts.setTimeout(Ms(c->wait_ms));
    c->hint = (c->rank + c->size - 1) % c->size; /* gloo's allgather: a ring the other way */
    c->hint_send = (c->rank + 1) % c->size;
    gloo::allgather(opts);
    for (int r = 0; r < c->size; r++) {
        const Desc &d = c->descs[(size_t)r];
        const std::string who = "rank " + std::to_string(r) + " (" + c->addr[(size_t)r] + ")";
        if (d.seq != mine.seq)
            throw CollError(who + " is at its call " + std::to_string(d.seq + 1) + ", this rank at its call " +
                            std::to_string(mine.seq + 1) + ": every rank must make the same calls");
        if (d.op != mine.op || d.n != mine.n || (d.op == 1 && d.order != mine.order) ||
            (d.op == 2 && d.root != mine.root))
            throw CollError(who + " made " + describe(d) + " as its call " + std::to_string(d.seq + 1) +
                            ", this rank " + describe(mine) + ": every rank must make the same calls");
        if (d.op == 4 && (d.nin < 1 || d.nin > POD_COLL_MAX_INPUTS))
            throw CollError("all-reduce: rank " + std::to_string(r) + " brings " + std::to_string(d.nin) + " buffers");
    }
}

/* Runs fn on c, turning whatever it throws into -1 with err; 0 when it returns. After an
 * I/O failure: this rank's view goes to the store as its abort record, every connection is
 * closed (the peers fail at once instead of at their timeout), then the culprit is named. */
template <typename F>
int run(pod_coll *c, const char *op, Desc desc, char *err, size_t errlen, F fn)
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
    bool io = false;
    std::string gmsg;
    try {
        desc.seq = c->calls++;
        if (c->size > 1)
            agree(c, desc);
        c->hint = c->hint_send = -1;
        fn();
        return 0;
    } catch (const CollError &e) {
        msg = e.what();
    } catch (const gloo::IoException &e) {
        io = true;
        gmsg = e.what();
    } catch (const std::bad_alloc &) {
        msg = std::string(op) + ": out of memory";
    } catch (const std::exception &e) {
        msg = std::string(op) + " failed: " + e.what();
    } catch (...) {
        msg = std::string(op) + " failed: unknown C++ exception";
    }
    try {
        View mine;
        if (io) {
            mine = local_view(c, gmsg);
            const std::string rec = std::to_string(mine.w) + " " + (mine.closed ? "1 " : "0 ") + mine.addr;
            const std::string key = c->prefix + "/abort/" + std::to_string(c->rank);
            char e[256];
            c->st.set(c->st.ctx, key.c_str(), rec.data(), rec.size(), e, sizeof(e));
        }
        c->ctx->closeConnections();
        if (io)
            msg = diagnose(c, op, mine, gmsg);
    } catch (const std::exception &) {
        if (msg.empty())
            msg = std::string(op) + " failed: " + gmsg;
    } catch (...) {
        if (msg.empty())
            msg = std::string(op) + " failed: " + gmsg;
    }
    c->broken = msg;
    copy_err(err, errlen, msg);
    return -1;
}

/* Rank-order sum (see coll.h) of the nin buffers in[0..nin) of this rank and those of every
 * other rank (counts[r] of rank r), into out[0..n) on every rank: per window, slice k of
 * every buffer goes to rank k, which sums all of them in (rank, index) order and sends the
 * sum back to every rank. out may be one of the in[]: a window's slices are all sent, and
 * this rank's own slices copied aside, before a sum lands in it. */
void allreduce_rank_order(pod_coll *c, const float *const *in, int nin, const std::vector<int> &counts,
                          float *out, size_t n)
{
    const int R = c->size, me = c->rank;
    std::vector<size_t> first(R + 1, 0); /* the global index of rank r's first buffer */
    int maxcount = 0;
    for (int r = 0; r < R; r++) {
        first[r + 1] = first[r] + (size_t)counts[r];
        maxcount = std::max(maxcount, counts[r]);
    }
    const size_t total = first[R];
    const size_t W = std::min(n, (size_t)POD_COLL_WINDOW_FLOATS);
    const size_t maxlen = W / (size_t)R + 1;
    std::vector<float> scratch(maxlen * total); /* slice g of the sum's inputs at g * maxlen */
    const Ms to(c->wait_ms);
    /* waits for as many completions on b as owed[j] adds up to. Which rank a completion came
     * from is only a hint (gloo reports the last one when several completed before the
     * wait), used to name a rank still owing one. */
    auto wait_all = [&](gloo::transport::UnboundBuffer *b, bool recv, std::vector<int> owed) {
        int count = 0;
        for (int j = 0; j < R; j++)
            count += owed[j];
        for (int k = 0; k < count; k++) {
            int h = -1;
            for (int j = 0; j < R && h < 0; j++)
                if (owed[j] > 0)
                    h = j;
            (recv ? c->hint : c->hint_send) = h;
            int from = -1;
            if (recv)
                b->waitRecv(&from, to);
            else
                b->waitSend(&from, to);
            if (from >= 0 && from < R && owed[from] > 0)
                owed[from]--;
        }
    };
    using UB = std::unique_ptr<gloo::transport::UnboundBuffer>;
    /* one window: its slices, buffers, slots and the completions owed per rank */
    struct Win {
        size_t off = 0, w = 0, base = 0, rem = 0, L = 0;
        uint64_t slot1 = 0, slot2 = 0;
        std::vector<UB> ubin;
        UB ubout, us;
        std::vector<int> owed_in, owed_out, owed_sum;
        size_t start(int k) const { return (size_t)k * base + std::min((size_t)k, rem); }
        size_t len(int k) const { return base + ((size_t)k < rem ? 1 : 0); }
    };
    /* phase 1 posted: slice k of every buffer to rank k (buffer i on slot1 + i); this
     * rank's own slices copied aside into scratch (scratch is free: the last sum is done) */
    auto post1 = [&](Win &x, size_t off) {
        x.off = off;
        x.w = std::min(W, n - off);
        x.base = x.w / (size_t)R;
        x.rem = x.w % (size_t)R;
        x.L = x.len(me);
        for (int i = 0; i < nin; i++)
            x.ubin.push_back(c->ctx->createUnboundBuffer(const_cast<float *>(in[i]) + off, x.w * sizeof(float)));
        x.ubout = c->ctx->createUnboundBuffer(out + off, x.w * sizeof(float));
        x.us = c->ctx->createUnboundBuffer(scratch.data(), scratch.size() * sizeof(float));
        x.slot1 = kSlotBase + c->slot_seq;
        x.slot2 = x.slot1 + (uint64_t)maxcount;
        c->slot_seq += (uint64_t)maxcount + 1;
        x.owed_in.assign(R, 0);
        x.owed_out.assign(R, 0);
        x.owed_sum.assign(R, 0);
        for (int j = 0; j < R; j++) {
            if (j == me)
                continue;
            for (int i = 0; x.L && i < counts[j]; i++)
                x.us->recv(j, x.slot1 + (uint64_t)i, (first[j] + (size_t)i) * maxlen * sizeof(float),
                           x.L * sizeof(float));
            x.owed_in[j] = x.L ? counts[j] : 0;
            for (int i = 0; x.len(j) && i < nin; i++)
                x.ubin[i]->send(j, x.slot1 + (uint64_t)i, x.start(j) * sizeof(float), x.len(j) * sizeof(float));
            x.owed_out[j] = x.len(j) ? 1 : 0;
        }
        for (int i = 0; i < nin; i++)
            memcpy(scratch.data() + (first[me] + (size_t)i) * maxlen, in[i] + off + x.start(me),
                   x.L * sizeof(float));
    };
    /* phase 1 waited for, the sum in (rank, index) order left to right, phase 2 posted:
     * every rank's sum to every rank */
    auto sum_and_post2 = [&](Win &x) {
        wait_all(x.us.get(), true, x.owed_in);
        for (int i = 0; i < nin; i++)
            wait_all(x.ubin[i].get(), false, x.owed_out);
        float *acc = out + x.off + x.start(me);
        const float *s0 = scratch.data();
        if (total == 1)
            memcpy(acc, s0, x.L * sizeof(float));
        else
            sum_f32(acc, s0, s0 + maxlen, x.L);
        for (size_t g = 2; g < total; g++)
            sum_f32(acc, acc, s0 + g * maxlen, x.L);
        for (int j = 0; j < R; j++) {
            if (j == me)
                continue;
            if (x.len(j))
                x.ubout->recv(j, x.slot2, x.start(j) * sizeof(float), x.len(j) * sizeof(float));
            if (x.L)
                x.ubout->send(j, x.slot2, x.start(me) * sizeof(float), x.L * sizeof(float));
            x.owed_sum[j] = x.L ? 1 : 0;
        }
    };
    /* Pipelined: the next window's phase 1 travels while this one's phase 2 does (they
     * touch different windows of in[] and out, and scratch is free once a sum is done). */
    Win cur;
    post1(cur, 0);
    for (size_t off = 0; off < n; off += W) {
        sum_and_post2(cur);
        Win next;
        if (off + W < n)
            post1(next, off + W);
        wait_all(cur.ubout.get(), true, cur.owed_out);
        wait_all(cur.ubout.get(), false, cur.owed_sum);
        cur = std::move(next);
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
        /* a failure is named within timeout_ms: the waits leave time for the records */
        c->grace_ms = size >= 3 ? std::min(kRecordGraceMs, timeout_ms / 4) : 0;
        c->wait_ms = timeout_ms - c->grace_ms;
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
    /* a bad argument is refused without breaking the communicator */
    if (n > SIZE_MAX / sizeof(float) / 2 || (n && !buf)) {
        copy_err(err, errlen, "all-reduce: " + std::to_string(n) + " elements" +
                                  (buf ? " are more than memory can hold" : " with a NULL buffer"));
        return -1;
    }
    return run(c, "all-reduce", Desc{1, c ? (uint32_t)c->order : 0u, n, 0, 0, 1}, err, errlen, [&] {
        if (n == 0 || c->size == 1)
            return;
        if (c->order == POD_COLL_SUM_RANK_ORDER) {
            const float *in[1] = {buf};
            allreduce_rank_order(c, in, 1, std::vector<int>(c->size, 1), buf, n);
            return;
        }
        gloo::AllreduceOptions opts(c->ctx);
        opts.setOutput(buf, n);
        opts.setReduceFunction(sum_f32);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setTimeout(Ms(c->wait_ms));
        /* the ring waits on the next rank's segments and the previous rank's reads */
        c->hint = (c->rank + 1) % c->size;
        c->hint_send = (c->rank + c->size - 1) % c->size;
        gloo::allreduce(opts);
    });
}

int pod_coll_allreduce_f32_multi(struct pod_coll *c, const float *const *in, int nin, float *out, size_t n,
                                 char *err, size_t errlen)
{
    /* a bad argument is refused without breaking the communicator */
    bool null_in = !in;
    for (int i = 0; !null_in && i < nin; i++)
        null_in = n && !in[i];
    if (nin < 1 || nin > POD_COLL_MAX_INPUTS || null_in || (n && !out) || n > SIZE_MAX / sizeof(float) / 2) {
        copy_err(err, errlen, "all-reduce: " + std::to_string(nin) + " inputs of " + std::to_string(n) +
                                  " elements: the inputs must be 1.." + std::to_string(POD_COLL_MAX_INPUTS) +
                                  " buffers, none NULL, and out not NULL");
        return -1;
    }
    return run(c, "all-reduce", Desc{4, 0, n, 0, 0, nin}, err, errlen, [&] {
        std::vector<int> counts(c->size, nin); /* how many buffers each rank brings (agree) */
        for (int r = 0; c->size > 1 && r < c->size; r++)
            counts[r] = (int)c->descs[(size_t)r].nin;
        if (n == 0)
            return;
        allreduce_rank_order(c, in, nin, counts, out, n);
    });
}

int pod_coll_broadcast(struct pod_coll *c, void *buf, size_t bytes, int root, char *err, size_t errlen)
{
    /* a bad argument is refused without breaking the communicator */
    if (c && (root < 0 || root >= c->size)) {
        copy_err(err, errlen, "broadcast: root " + std::to_string(root) + " is not a rank (0.." +
                                  std::to_string(c->size - 1) + ")");
        return -1;
    }
    if (bytes && !buf) {
        copy_err(err, errlen, "broadcast: the buffer is NULL for " + std::to_string(bytes) + " bytes");
        return -1;
    }
    return run(c, "broadcast", Desc{2, 0, bytes, root, 0, 0}, err, errlen, [&] {
        if (bytes == 0 || c->size == 1)
            return;
        gloo::BroadcastOptions opts(c->ctx);
        opts.setOutput(static_cast<uint8_t *>(buf), bytes);
        opts.setRoot(root);
        opts.setTimeout(Ms(c->wait_ms));
        /* gloo's binomial tree: a rank receives from its virtual rank less its top bit */
        const int v = (c->rank - root + c->size) % c->size;
        int top = 0;
        while ((v >> (top + 1)) != 0)
            top++;
        c->hint = c->rank == root ? -1 : ((v ^ (1 << top)) + root) % c->size;
        gloo::broadcast(opts);
    });
}

int pod_coll_barrier(struct pod_coll *c, char *err, size_t errlen)
{
    /* the exchange of every rank's Desc that comes first (agree) is the barrier */
    return run(c, "barrier", Desc{3, 0, 0, 0, 0, 0}, err, errlen, [&] {});
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

int pod_coll_failed_rank(const struct pod_coll *c)
{
    return c ? c->failed : -1;
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
