// distributed::Context: the c10d TCPStore + ProcessGroupGloo of a torchrun-style
// job, collectives with errors that name the failed rank (heartbeats in the store).
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <c10/util/Logging.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "qfx/error.h"
#include "qfx/quant/distributed.h"

namespace qfx::quant::distributed {

struct Context::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store, beat_store;  // the group's client; the heartbeat thread's own
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::vector<c10::intrusive_ptr<c10d::Work>> pending;  // all_reduce_start
  std::thread beat;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  ~Impl() {
    {
      std::lock_guard<std::mutex> l(mu);
      stop = true;
    }
    cv.notify_all();
    if (beat.joinable()) beat.join();
  }
};

namespace {

int env_int(const char* name, int fallback, int lo) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end || x < lo || x > 1 << 20) throw ConfigError(std::string("environment variable ") + name + "='" + v + "': expected an integer >= " + std::to_string(lo));
  return static_cast<int>(x);
}

std::string heartbeat_key(int r) { return "qfx/heartbeat/" + std::to_string(r); }

// Waits until something accepts TCP connections at addr:port (rank 0's store) or
// `deadline` passes; false then. Checked here so that c10d's client does not
// retry (and log a stack trace per retry) while rank 0 is not up yet.
bool wait_for_server(const std::string& addr, int port, std::chrono::steady_clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  for (;;) {
    addrinfo* res = nullptr;
    if (getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res) == 0) {
      for (addrinfo* a = res; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        const bool up = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        ::close(fd);
        if (up) {
          freeaddrinfo(res);
          return true;
        }
      }
      freeaddrinfo(res);
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Checks this rank in at the store and waits until all `world` ranks have, or
// until `deadline`: then a DistributedError names the ranks that never joined. A
// line on stderr says who is awaited when the wait is long.
void wait_for_ranks(c10d::Store& store, int rank, int world, std::chrono::steady_clock::time_point deadline,
                    const std::string& where, std::chrono::seconds timeout) {
  auto joined_key = [](int r) { return "qfx/joined/" + std::to_string(r); };
  store.add(joined_key(rank), 1);
  const auto start = std::chrono::steady_clock::now();
  auto next_note = start + std::chrono::seconds(5);
  for (;;) {
    std::vector<int> missing;
    for (int r = 0; r < world; ++r)
      if (!store.check({joined_key(r)})) missing.push_back(r);
    if (missing.empty()) return;
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 16; ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
    if (missing.size() > 16) list += ", ... (" + std::to_string(missing.size()) + " in all)";
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      throw DistributedError(where + (missing.size() == 1 ? "rank " : "ranks ") + list + " never joined within the timeout (" +
                             std::to_string(timeout.count()) + " s, QFX_DIST_TIMEOUT)");
    if (now >= next_note) {
      const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - now).count();
      std::fprintf(stderr, "qfx: %swaiting for %s %s to join (%lld s left)\n", where.c_str(), missing.size() == 1 ? "rank" : "ranks",
                   list.c_str(), static_cast<long long>(left));
      next_note = now + std::chrono::seconds(30);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Where this rank of a multi-process job meets the others (the torchrun environment).
struct Rendezvous {
  int rank = 0, world = 1, port = 0;
  std::string addr;
  std::chrono::seconds timeout{0};
  std::chrono::milliseconds timeout_ms{0};  // `timeout`, as the collectives take it
  std::string where;  // "rank R of W: ", the start of every error
  std::string at;     // "addr:port" of rank 0's store
};

// Reads RANK, MASTER_PORT, MASTER_ADDR and QFX_DIST_TIMEOUT (default `timeout`) for a job of
// `world` ranks; throws ConfigError for an unset RANK or a value out of range.
Rendezvous rendezvous_from_env(int world, std::chrono::seconds timeout) {
  Rendezvous rv;
  rv.world = world;
  rv.rank = env_int("RANK", -1, 0);
  if (rv.rank < 0) throw ConfigError("environment: WORLD_SIZE is " + std::to_string(world) + " but RANK is not set");
  if (rv.rank >= world) throw ConfigError("environment: RANK " + std::to_string(rv.rank) + " is not below WORLD_SIZE " + std::to_string(world));
  rv.port = env_int("MASTER_PORT", 29500, 1);
  if (rv.port > 65535) throw ConfigError("environment: MASTER_PORT " + std::to_string(rv.port) + " is not a TCP port");
  const char* addr_env = std::getenv("MASTER_ADDR");
  rv.addr = addr_env && *addr_env ? addr_env : "127.0.0.1";
  rv.timeout = std::chrono::seconds(env_int("QFX_DIST_TIMEOUT", static_cast<int>(timeout.count()), 1));
  rv.timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(rv.timeout);
  rv.where = "rank " + std::to_string(rv.rank) + " of " + std::to_string(world) + ": ";
  rv.at = rv.addr + ":" + std::to_string(rv.port);
  return rv;
}

// The first line of an exception's message.
std::string first_line(const std::exception& e) {
  std::string m = e.what();
  return m.substr(0, m.find('\n'));
}

// Step 1, the store: rank 0 serves it and does not wait; the others connect by `deadline`.
// Sets the group's client and the heartbeat thread's own; throws DistributedError.
void connect_stores(const Rendezvous& rv, std::chrono::steady_clock::time_point deadline,
                    c10::intrusive_ptr<c10d::TCPStore>& store, c10::intrusive_ptr<c10d::TCPStore>& beat_store) {
  if (rv.rank != 0 && !wait_for_server(rv.addr, rv.port, deadline))
    throw DistributedError(rv.where + "rank 0 (it hosts the rendezvous store at " + rv.at + ") never came within " +
                           std::to_string(rv.timeout.count()) + " s (QFX_DIST_TIMEOUT)");
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(rv.port);
    so.isServer = rv.rank == 0;
    so.numWorkers = c10::nullopt;
    so.waitWorkers = false;
    so.timeout = rv.timeout_ms;
    store = c10::make_intrusive<c10d::TCPStore>(rv.addr, so);
    so.isServer = false;
    beat_store = c10::make_intrusive<c10d::TCPStore>(rv.addr, so);
  } catch (const std::exception& e) {
    throw DistributedError(rv.where + (rv.rank == 0 ? "cannot serve the rendezvous store at " + rv.at
                                                    : "rank 0 (it hosts the rendezvous store at " + rv.at + ") never came") +
                           " within " + std::to_string(rv.timeout.count()) + " s (" + first_line(e) + ")");
  }
}

// Step 2: every rank checks in; all wait for the others within what is left of the
// same timeout, and the error names the ranks that never joined (DistributedError).
void join_ranks(c10d::Store& store, const Rendezvous& rv, std::chrono::steady_clock::time_point deadline) {
  try {
    wait_for_ranks(store, rv.rank, rv.world, deadline, rv.where, rv.timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DistributedError(rv.where + (rv.rank == 0 ? "the rendezvous store failed" : "rank 0 (it hosts the rendezvous store) stopped") +
                           " while the ranks joined (" + first_line(e) + ")");
  }
}

// Step 3: the Gloo process group over `store` (all ranks are there: it is quick), on
// GLOO_SOCKET_IFNAME, the loopback for a local job, or the default device; throws DistributedError.
c10::intrusive_ptr<c10d::ProcessGroupGloo> make_process_group(const c10::intrusive_ptr<c10d::TCPStore>& store,
                                                              const Rendezvous& rv) {
  try {
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->timeout = rv.timeout_ms;
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname && *ifname)
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (rv.addr == "127.0.0.1" || rv.addr == "localhost")
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rv.rank, rv.world, opts);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DistributedError(rv.where + "cannot join the process group at " + rv.at + " within " + std::to_string(rv.timeout.count()) +
                           " s (" + first_line(e) + ")");
  }
}

}  // namespace

Context::Context() = default;
Context::~Context() = default;

c10d::ProcessGroupGloo& Context::process_group() {
  if (!impl_) throw ArgumentError("distributed::Context: a single-process context has no process group");
  return *impl_->pg;
}

void Context::fail(const std::string& what, const std::exception& e) {
  const std::string first = first_line(e);
  // Which rank stopped: one whose heartbeat counter no longer moves (or the store's host, rank 0, if the store is gone).
  std::string culprit;
  try {
    std::vector<int64_t> before(static_cast<size_t>(world_));
    for (int r = 0; r < world_; ++r) before[static_cast<size_t>(r)] = impl_->store->add(heartbeat_key(r), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    for (int r = 0; r < world_ && culprit.empty(); ++r)
      if (r != rank_ && impl_->store->add(heartbeat_key(r), 0) == before[static_cast<size_t>(r)]) culprit = "rank " + std::to_string(r) + " stopped";
    if (culprit.empty()) culprit = "every rank is alive: one did not join within the timeout (" + std::to_string(timeout_.count() / 1000) + " s)";
  } catch (const std::exception&) {
    culprit = rank_ == 0 ? "a rank stopped" : "rank 0 stopped (it hosts the store)";
  }
  throw DistributedError("rank " + std::to_string(rank_) + " of " + std::to_string(world_) + ": " + what + " failed: " + culprit +
                         " (" + first + ")");
}

void Context::all_reduce(std::vector<at::Tensor>& tensors, Op op, const std::string& what) {
  if (!active() || tensors.empty()) return;
  c10d::AllreduceOptions o;
  o.reduceOp = op == Op::kSum ? c10d::ReduceOp::SUM : op == Op::kMin ? c10d::ReduceOp::MIN : c10d::ReduceOp::MAX;
  o.timeout = timeout_;
  try {  // every collective launched, then all waited: Gloo works on them while the next is queued
    std::vector<c10::intrusive_ptr<c10d::Work>> work;
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      work.push_back(impl_->pg->allreduce(one, o));
    }
    for (auto& w : work) w->wait();
  } catch (const std::exception& e) {
    fail(what, e);
  }
}

void Context::all_reduce_start(const at::Tensor& t, Op op) {
  if (!active()) return;
  c10d::AllreduceOptions o;
  o.reduceOp = op == Op::kSum ? c10d::ReduceOp::SUM : op == Op::kMin ? c10d::ReduceOp::MIN : c10d::ReduceOp::MAX;
  o.timeout = timeout_;
  std::vector<at::Tensor> one{t};
  impl_->pending.push_back(impl_->pg->allreduce(one, o));
}

void Context::wait_pending(const std::string& what) {
  if (!active()) return;
  auto work = std::move(impl_->pending);
  impl_->pending.clear();
  try {
    for (auto& w : work) w->wait();
  } catch (const std::exception& e) {
    fail(what, e);
  }
}

void Context::broadcast(std::vector<at::Tensor>& tensors, int root, const std::string& what) {
  if (!active() || tensors.empty()) return;
  c10d::BroadcastOptions o;
  o.rootRank = root;
  o.timeout = timeout_;
  try {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      impl_->pg->broadcast(one, o)->wait();
    }
  } catch (const std::exception& e) {
    fail(what, e);
  }
}

at::Tensor Context::all_gather(const at::Tensor& t, const std::string& what) { return all_gather_start(t)(what); }

std::function<at::Tensor(const std::string&)> Context::all_gather_start(const at::Tensor& t) {
  if (!active()) {
    at::Tensor one = t.unsqueeze(0).clone();
    return [one](const std::string&) { return one; };
  }
  at::Tensor in = t.contiguous();
  std::vector<at::Tensor> parts;
  for (int r = 0; r < world_; ++r) parts.push_back(at::empty_like(in));
  auto outs = std::make_shared<std::vector<std::vector<at::Tensor>>>(1, parts);
  std::vector<at::Tensor> ins{in};
  c10d::AllgatherOptions o;
  o.timeout = timeout_;
  c10::intrusive_ptr<c10d::Work> work;
  std::string launch_error;
  try {
    work = impl_->pg->allgather(*outs, ins, o);
  } catch (const std::exception& e) {
    launch_error = e.what();
  }
  return [this, work, outs, launch_error](const std::string& what) {
    try {
      if (!work) throw DistributedError(launch_error);
      work->wait();
    } catch (const std::exception& e) {
      fail(what, e);
    }
    return at::stack((*outs)[0]);
  };
}

void Context::barrier(const std::string& what) {
  if (!active()) return;
  // An all-reduce of one element: Gloo's barrier takes no per-call timeout.
  std::vector<at::Tensor> t{at::zeros({1})};
  all_reduce(t, Op::kSum, what);
}

std::shared_ptr<Context> init_from_env(std::chrono::seconds timeout) {
  auto ctx = std::make_shared<Context>();
  const int world = env_int("WORLD_SIZE", 1, 1);
  if (world == 1) return ctx;
  const Rendezvous rv = rendezvous_from_env(world, timeout);
  // c10d logs a broken peer connection as a warning with a C++ stack trace (when a
  // rank that failed exits while the others still talk to it); qfx names the failed
  // rank itself (with context), so c10 logs only fatal messages unless TORCH_CPP_LOG_LEVEL says otherwise.
  if (!std::getenv("TORCH_CPP_LOG_LEVEL")) FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 3);
  ctx->rank_ = rv.rank;
  ctx->world_ = world;
  ctx->local_rank_ = env_int("LOCAL_RANK", rv.rank, 0);
  ctx->timeout_ = rv.timeout_ms;
  auto impl = std::make_unique<Context::Impl>();
  const auto deadline = std::chrono::steady_clock::now() + ctx->timeout_;
  connect_stores(rv, deadline, impl->store, impl->beat_store);
  join_ranks(*impl->store, rv, deadline);
  impl->pg = make_process_group(impl->store, rv);
  Context::Impl* raw = impl.get();
  const int rank = rv.rank;
  impl->beat = std::thread([raw, rank] {
    std::unique_lock<std::mutex> l(raw->mu);
    while (!raw->stop) {
      try {
        raw->beat_store->add(heartbeat_key(rank), 1);
      } catch (const std::exception&) {
        return;  // the store is gone: the job is ending
      }
      raw->cv.wait_for(l, std::chrono::milliseconds(500));
    }
  });
  ctx->impl_ = std::move(impl);
  return ctx;
}

}  // namespace qfx::quant::distributed
