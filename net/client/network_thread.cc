// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/network_thread.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <future>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cairn/net/limits.h"
#include "kj/async-unix.h"
#include "kj/debug.h"
#include "net/event_loop.h"
#include "net/read_ahead_stream.h"

namespace cairn::net {

// Deadlines on one timerfd, armed for the earliest: wakes the event loop to within the
// kernel's timer slack, where kj::Timer's waits end on whole milliseconds. Network thread only.
class PreciseTimer {
 public:
  using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC, as the timerfd

  explicit PreciseTimer(kj::UnixEventPort& port)
      : fd_(Create()), observer_(port, fd_, kj::UnixEventPort::FdObserver::OBSERVE_READ) {}
  PreciseTimer(const PreciseTimer&) = delete;
  PreciseTimer& operator=(const PreciseTimer&) = delete;

  kj::Promise<void> At(Clock::time_point when) {
    auto paf = kj::newPromiseAndFulfiller<void>();
    const bool earliest = waiting_.empty() || when < waiting_.begin()->first;
    waiting_.emplace(when, kj::mv(paf.fulfiller));
    if (earliest) Arm(when);
    if (!watching_) {
      watching_ = true;
      watch_ = Watch().eagerlyEvaluate(nullptr);
    }
    return kj::mv(paf.promise);
  }

 private:
  static int Create() {
    int fd;
    KJ_SYSCALL(fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    return fd;
  }

  void Arm(Clock::time_point when) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch());
    itimerspec spec = {};
    spec.it_value.tv_sec = static_cast<time_t>(ns.count() / 1000000000);
    spec.it_value.tv_nsec = static_cast<long>(ns.count() % 1000000000);
    // A time already past (or 0) would disarm the timer: fire at the next nanosecond instead.
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
    KJ_SYSCALL(timerfd_settime(fd_, TFD_TIMER_ABSTIME, &spec, nullptr));
  }

  kj::Promise<void> Watch() {
    return observer_.whenBecomesReadable().then([this] {
      uint64_t expirations;
      while (read(fd_, &expirations, sizeof(expirations)) > 0) {
      }
      const Clock::time_point now = Clock::now();
      while (!waiting_.empty() && waiting_.begin()->first <= now) {
        kj::Own<kj::PromiseFulfiller<void>> due = kj::mv(waiting_.begin()->second);
        waiting_.erase(waiting_.begin());
        due->fulfill();
      }
      if (!waiting_.empty()) Arm(waiting_.begin()->first);
      return Watch();
    });
  }

  const kj::AutoCloseFd fd_;  // closed after observer_ stops watching it
  kj::UnixEventPort::FdObserver observer_;
  // A waiter whose promise was dropped is fulfilled in vain when its time comes.
  std::multimap<Clock::time_point, kj::Own<kj::PromiseFulfiller<void>>> waiting_;
  bool watching_ = false;
  kj::Promise<void> watch_ = nullptr;
};

NetworkThread::NetworkThread(std::string what, LogFunction log)
    : what_(std::move(what)), log_(std::move(log)) {}

kj::Promise<void> NetworkThread::AfterDelay(std::chrono::microseconds delay) {
  return precise_timer_->At(PreciseTimer::Clock::now() + delay);
}

absl::StatusOr<std::unique_ptr<NetworkThread>> NetworkThread::Start(std::string what,
                                                                     LogFunction log) {
  auto thread = std::unique_ptr<NetworkThread>(new NetworkThread(std::move(what), std::move(log)));
  std::promise<void> ready;
  std::future<void> started = ready.get_future();
  thread->thread_ = std::thread([&self = *thread, &ready] {
    pthread_setname_np(pthread_self(), "cairn-net");
    self.Main(ready);
  });
  started.get();
  if (thread->executor_.get() == nullptr) {
    thread->thread_.join();
    return absl::InternalError(absl::StrCat(thread->what_, ": the network thread did not start"));
  }
  return thread;
}

NetworkThread::~NetworkThread() {
  if (!stopped_) Stop();
}

void NetworkThread::Stop(const std::function<void()>& release) {
  stopped_ = true;
  if (executor_.get() != nullptr) {
    kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
      executor_->executeSync([&] {
        // Continuations first (they may hold answers of the connection), then what the owner
        // keeps, then the loop.
        tasks_ = nullptr;
        if (release) release();
        stop_->fulfill();
      });
    });
    (void)failure;  // the loop has stopped already: nothing left to stop
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status NetworkThread::CalledFromCallback() const {
  return absl::FailedPreconditionError(absl::StrCat(
      "a blocking call of ", what_, " from its own network thread (a callback) would deadlock"));
}

void NetworkThread::Post(std::function<void()> func) {
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> ring;
  {
    cairn::internal::MutexLock lock(posted_mu_);
    if (loop_done_) return;
    posted_.push_back(std::move(func));
    ring = kj::mv(doorbell_);
  }
  if (ring.get() != nullptr) ring->fulfill();
}

void NetworkThread::PostAndWait(std::function<void()> func) {
  std::promise<void> ran;
  std::future<void> done = ran.get_future();
  {
    cairn::internal::MutexLock lock(posted_mu_);
    if (loop_done_) return;
  }
  Post([&] {
    func();
    ran.set_value();
  });
  done.wait();
}

kj::Promise<void> NetworkThread::RunPosted() {
  auto paf = kj::newPromiseAndCrossThreadFulfiller<void>();
  std::vector<std::function<void()>> run;
  {
    cairn::internal::MutexLock lock(posted_mu_);
    run.swap(posted_);
    if (run.empty()) doorbell_ = kj::mv(paf.fulfiller);
  }
  if (!run.empty()) {
    for (std::function<void()>& func : run) func();
    // More may have been posted meanwhile; look again after other events had their turn.
    return kj::evalLater([this] { return RunPosted(); });
  }
  return paf.promise.then([this] { return RunPosted(); });
}

void NetworkThread::taskFailed(kj::Exception&& exception) {
  log_(LogLevel::kWarning, absl::StrCat(what_, ": ", ExceptionToStatus(exception).ToString()));
}

void NetworkThread::Main(std::promise<void>& ready) {
  bool signalled = false;
  kj::Maybe<kj::Exception> failed = kj::runCatchingExceptions([&] {
    loop_thread_id_ = std::this_thread::get_id();
    kj::AsyncIoContext io = SetUpEventLoop();
    auto stop = kj::newPromiseAndFulfiller<void>();
    io_ = io.provider.get();
    precise_timer_ = std::make_unique<PreciseTimer>(io.unixEventPort);
    tasks_ = kj::heap<kj::TaskSet>(*this);
    stop_ = kj::mv(stop.fulfiller);
    kj::Promise<void> posted = RunPosted().eagerlyEvaluate(nullptr);
    executor_ = kj::getCurrentThreadExecutor().addRef();
    signalled = true;
    ready.set_value();

    stop.promise.wait(io.waitScope);
    {
      cairn::internal::MutexLock lock(posted_mu_);
      loop_done_ = true;
      posted_.clear();
      doorbell_ = nullptr;
    }
    posted = nullptr;
    tasks_ = nullptr;
    precise_timer_ = nullptr;
    io_ = nullptr;
  });
  KJ_IF_MAYBE (exception, failed) {
    log_(LogLevel::kError,
         absl::StrCat(what_, ": network thread: ", ExceptionToStatus(*exception).ToString()));
  }
  if (!signalled) ready.set_value();
}

RpcConnection::RpcConnection(kj::Own<kj::AsyncIoStream> stream, kj::Maybe<int> fd)
    : stream_(kj::heap<internal::ReadAheadStream>(kj::mv(stream))), fd_(fd) {
  capnp::ReaderOptions limits;
  limits.traversalLimitInWords = kMaxMessageBytes / sizeof(capnp::word);
  network_ =
      kj::heap<capnp::TwoPartyVatNetwork>(*stream_, capnp::rpc::twoparty::Side::CLIENT, limits);
  rpc_system_ = kj::heap(capnp::makeRpcClient(*network_));
}

RpcConnection::~RpcConnection() {
  rpc_system_ = nullptr;
  network_ = nullptr;
  stream_ = nullptr;
}

void RpcConnection::Abort() {
  KJ_IF_MAYBE (fd, fd_) {
    // Wakes the RPC system's pending read with the end of the stream.
    ::shutdown(*fd, SHUT_RDWR);
  }
}

uint64_t RpcConnection::bytes_received() const {
  // The constructor made stream_ a ReadAheadStream.
  return static_cast<const internal::ReadAheadStream&>(*stream_).bytes_read();
}

capnp::Capability::Client RpcConnection::BootstrapCap() {
  capnp::MallocMessageBuilder message(8);
  auto server = message.initRoot<capnp::rpc::twoparty::VatId>();
  server.setSide(capnp::rpc::twoparty::Side::SERVER);
  return rpc_system_->bootstrap(server);
}

kj::Promise<kj::Own<RpcConnection>> RpcConnection::Connect(kj::AsyncIoProvider& io,
                                                           const std::string& address,
                                                           std::chrono::milliseconds timeout,
                                                           std::shared_ptr<internal::Tls> tls) {
  struct Connected {
    kj::Own<kj::AsyncIoStream> stream;
    kj::Maybe<int> fd;
  };
  kj::Promise<Connected> connected =
      io.getNetwork()
          .parseAddress(kj::StringPtr(address.c_str()))
          .then([](kj::Own<kj::NetworkAddress> parsed) {
            return parsed->connect().attach(kj::mv(parsed));
          })
          .then([address, tls = std::move(tls)](
                    kj::Own<kj::AsyncIoStream> stream) -> kj::Promise<Connected> {
            kj::Maybe<int> fd = stream->getFd();
            if (tls == nullptr) return Connected{kj::mv(stream), fd};
            return tls->Connect(kj::mv(stream), address)
                .then([fd](kj::Own<kj::AsyncIoStream> secured) {
                  return Connected{kj::mv(secured), fd};
                })
                .attach(kj::cp(tls));
          });
  return io.getTimer()
      .timeoutAfter(timeout.count() * kj::MILLISECONDS, kj::mv(connected))
      .then(
          [](Connected connection) {
            return kj::heap<RpcConnection>(kj::mv(connection.stream), connection.fd);
          },
          [address](kj::Exception&& exception) -> kj::Own<RpcConnection> {
            kj::throwFatalException(
                StatusToException(ConnectError(address, ExceptionToStatus(exception))));
          });
}

absl::Status ConnectError(const std::string& address, const absl::Status& cause) {
  const std::string message = absl::StrCat("cannot connect to ", address, ": ", cause.message());
  // A refused token is not a network problem: trying again will not help.
  if (absl::IsUnauthenticated(cause) || absl::IsPermissionDenied(cause)) {
    return absl::Status(cause.code(), message);
  }
  return absl::UnavailableError(message);
}

}  // namespace cairn::net
