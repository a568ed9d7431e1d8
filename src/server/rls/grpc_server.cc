// Envoy's rate limit service over gRPC and the gRPC health service: transport only.

#include "server/rls/grpc_server.h"

#include <fmt/format.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "common/strings.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace floodgate::server::rls {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode both number google.rpc.Code; absl's codes
  // beyond it (none today) would read as UNKNOWN.
  const int code = static_cast<int>(status.code());
  const auto grpc_code = code >= 0 && code <= static_cast<int>(grpc::StatusCode::UNAUTHENTICATED)
                             ? static_cast<grpc::StatusCode>(code)
                             : grpc::StatusCode::UNKNOWN;
  return {grpc_code, std::string(status.message())};
}

namespace {

namespace health = ::grpc::health::v1;

// What a completion queue hands back: the call slot whose step gRPC completed.
class Tag {
 public:
  virtual ~Tag() = default;
  // Asks gRPC for the slot's next call.
  virtual void Await() = 0;
  // `ok` false: the step failed (the server is shutting down, or the client went away).
  virtual void Step(bool ok) = 0;
  // Returns once no answer is owed: whoever was handed the slot's call has answered.
  virtual void AwaitAnswered() const = 0;
  // Whether a call was handed over and its answer is not out yet: owed, or written but
  // not yet reported sent by gRPC. A shutdown that cancelled such a call would cancel a
  // decision already made (and counted by the store).
  virtual bool InFlight() const = 0;
};

// A call slot's life: Await, the call arrives (Step), the slot answers it (then, or
// later from any thread: Finish), the answer is out (Step), Await again; until the server
// stops. `Method` supplies the request (Ask), the call's types and what to do (Answer).
template <class Method>
class Slot final : public Tag {
 public:
  using Request = typename Method::Request;
  using Response = typename Method::Response;
  using Writer = typename Method::Writer;

  Slot(Method method, grpc::ServerCompletionQueue& queue, const std::atomic<bool>& stopping)
      : method_(std::move(method)), queue_(queue), stopping_(stopping) {}

  void Await() override {
    answering_ = false;
    call_.emplace();  // a ServerContext serves one call: a new one for each
    method_.Ask(&call_->context, &call_->request, &call_->writer, &queue_, this);
  }

  void Step(bool ok) override {
    if (answering_) {
      // The answer is out (or the client went away): the next call, unless stopping.
      // gRPC may hand the step back before Finish has returned on the engine's thread;
      // the slot is reused only once it has (a few instructions at most to wait).
      AwaitAnswered();
      in_flight_.store(false, std::memory_order_release);
      if (!stopping_.load(std::memory_order_acquire)) Await();
      return;
    }
    if (!ok) return;  // shutting down: no call came
    answering_ = true;
    in_flight_.store(true, std::memory_order_relaxed);
    owed_.store(true, std::memory_order_relaxed);
    method_.Answer(*this);
  }

  void AwaitAnswered() const override {
    while (owed_.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  bool InFlight() const override { return in_flight_.load(std::memory_order_acquire); }

  const Request& request() const { return call_->request; }
  Response* response() { return &call_->response; }
  // Writes the answer: once per call, from any thread.
  void Finish(const grpc::Status& status) {
    Method::Finish(call_->writer, call_->response, status, this);
    owed_.store(false, std::memory_order_release);
  }

 private:
  struct Call {
    grpc::ServerContext context;
    Request request;
    Response response;
    Writer writer{&context};
  };
  Method method_;
  grpc::ServerCompletionQueue& queue_;
  const std::atomic<bool>& stopping_;
  std::optional<Call> call_;
  // The call was handed over: the next step is its answer written.
  bool answering_ = false;
  std::atomic<bool> owed_{false};       // handed to Answer, and Finish has not returned yet
  std::atomic<bool> in_flight_{false};  // the call arrived, and its answer is not out yet
};

// A unary method's types and writer.
template <class RequestType, class ResponseType>
struct Unary {
  using Request = RequestType;
  using Response = ResponseType;
  using Writer = grpc::ServerAsyncResponseWriter<Response>;
  static void Finish(Writer& writer, const Response& response, const grpc::Status& status,
                     void* tag) {
    if (status.ok()) {
      writer.Finish(response, status, tag);
    } else {
      writer.FinishWithError(status, tag);
    }
  }
};

}  // namespace

// gRPC's completion-queue API: `threads` threads each drain a completion queue of their
// own, and a call's engine work starts on the thread that received it (memory:// decides
// there, inline). A call holds no thread while the engine waits for the store: the
// engine's `done` (inline, or on the store's I/O thread) writes the answer, which gRPC
// allows from any thread. Each queue has a fixed set of call slots (kCallsPerThread),
// each taking one call at a time: memory stays bounded, and calls beyond the slots wait
// in gRPC until one frees.
//
// Why not gRPC's callback API, nor its default health service (callback-based too): any
// callback service makes gRPC poll on threads of its own beside ours and hand calls
// between them. Measured on memory:// (bench/rls_bench.py's load): 24-25 us of server
// CPU per call that way, 17-19 us this way; /v1/check takes 9-11 us.
class GrpcServer::Service final {
 public:
  explicit Service(Engine& engine) : engine_(engine) {}

  void Register(grpc::ServerBuilder& builder) {
    builder.RegisterService(&rls_);
    builder.RegisterService(&health_);
  }

  // Adds one queue's call slots, each awaiting a call.
  void AddSlots(grpc::ServerCompletionQueue& queue, int rls_calls) {
    for (int i = 0; i < rls_calls; ++i) Add<Slot<RateLimit>>(RateLimit{{}, this}, queue);
    for (int i = 0; i < kHealthChecks; ++i) Add<Slot<Check>>(Check{{}, this}, queue);
    Add<Slot<Watch>>(Watch{this}, queue);
  }

  // Drains `queue` until it is shut down and empty.
  static void Drain(grpc::ServerCompletionQueue& queue) {
    void* tag = nullptr;
    bool ok = false;
    while (queue.Next(&tag, &ok)) static_cast<Tag*>(tag)->Step(ok);
  }

  void SetServing(bool serving) { serving_.store(serving, std::memory_order_release); }
  // From here on, a slot whose answer is out takes no new call, and health answers
  // NOT_SERVING.
  void Stop() {
    stopping_.store(true, std::memory_order_release);
    SetServing(false);
  }
  // Returns once every call handed to the engine has its answer written: the engine
  // answers within the store's timeout (serve closes the store beside the shutdown).
  void AwaitAnswers() const {
    for (const auto& slot : slots_) slot->AwaitAnswered();
  }
  // Returns once every call handed to the engine has its answer out (sent, or its client
  // gone), giving up at `deadline`; whether none is left in flight. Polled: answers are
  // written on the engine's threads and sent by gRPC's, and the bound is the point.
  bool AwaitAnswersOut(std::chrono::steady_clock::time_point deadline) const {
    const auto in_flight = [&] {
      return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->InFlight(); });
    };
    while (in_flight()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  // Once the queues are drained: nothing refers to the slots any more.
  void ClearSlots() { slots_.clear(); }

 private:
  static constexpr int kHealthChecks = 2;  // per queue: probes are rare and answered inline

  // envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, answered by the engine.
  struct RateLimit : Unary<pb::RateLimitRequest, pb::RateLimitResponse> {
    Service* service;
    void Ask(grpc::ServerContext* context, Request* request, Writer* writer,
             grpc::ServerCompletionQueue* queue, void* tag) {
      service->rls_.RequestShouldRateLimit(context, request, writer, queue, queue, tag);
    }
    void Answer(Slot<RateLimit>& slot) {
      // The engine keeps to `request` and `response` until it calls `done`.
      service->engine_.ShouldRateLimit(
          slot.request(), slot.response(),
          [&slot](absl::Status status) { slot.Finish(ToGrpcStatus(status)); });
    }
  };

  // grpc.health.v1.Health/Check: "" (the whole server) and "ratelimit" follow readiness
  // (SetServing); any other name is NOT_FOUND, as gRPC's own health service answers.
  struct Check : Unary<health::HealthCheckRequest, health::HealthCheckResponse> {
    Service* service;
    void Ask(grpc::ServerContext* context, Request* request, Writer* writer,
             grpc::ServerCompletionQueue* queue, void* tag) {
      service->health_.RequestCheck(context, request, writer, queue, queue, tag);
    }
    void Answer(Slot<Check>& slot) {
      const std::string& name = slot.request().service();
      if (!name.empty() && name != kHealthName) {
        slot.Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
        return;
      }
      slot.response()->set_status(service->serving_.load(std::memory_order_acquire)
                                      ? Response::SERVING
                                      : Response::NOT_SERVING);
      slot.Finish(grpc::Status::OK);
    }
  };

  // grpc.health.v1.Health/Watch (a stream of status changes): answered UNIMPLEMENTED, as
  // gRPC's own health service answers when it cannot stream; Envoy's, Kubernetes' and
  // grpc-health-probe's checks call Check.
  struct Watch {
    using Request = health::HealthCheckRequest;
    using Response = health::HealthCheckResponse;
    using Writer = grpc::ServerAsyncWriter<Response>;
    Service* service;
    void Ask(grpc::ServerContext* context, Request* request, Writer* writer,
             grpc::ServerCompletionQueue* queue, void* tag) {
      service->health_.RequestWatch(context, request, writer, queue, queue, tag);
    }
    void Answer(Slot<Watch>& slot) {
      slot.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                               "floodgate answers grpc.health.v1.Health/Check, not Watch"));
    }
    static void Finish(Writer& writer, const Response&, const grpc::Status& status, void* tag) {
      writer.Finish(status, tag);
    }
  };

  template <class S, class Method>
  void Add(Method method, grpc::ServerCompletionQueue& queue) {
    slots_.push_back(std::make_unique<S>(std::move(method), queue, stopping_));
    slots_.back()->Await();
  }

  Engine& engine_;
  pb::RateLimitService::AsyncService rls_;
  health::Health::AsyncService health_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> serving_{true};  // from the first call on, until told otherwise
  std::vector<std::unique_ptr<Tag>> slots_;
};

GrpcServer::GrpcServer(Engine& engine, GrpcOptions options)
    : options_(std::move(options)), service_(std::make_unique<Service>(engine)) {}

GrpcServer::~GrpcServer() { Shutdown(); }

absl::Status GrpcServer::Start() {
  // The health service is ours (Service): gRPC's default one is callback-based (see
  // Service). The setting is process-wide in gRPC.
  grpc::EnableDefaultHealthCheckService(false);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  // No SO_REUSEPORT: a second floodgate on the same port must fail to start, not share
  // the calls unannounced.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Go's MaxConnectionAge(Grace): 0 is "never", as gRPC core's INT_MAX; a longer age than
  // INT_MAX ms (24.8 days) is never too, in effect.
  const auto age_ms = [](std::optional<std::chrono::milliseconds> age) {
    if (!age || age->count() <= 0) return std::numeric_limits<int>::max();
    return static_cast<int>(std::min<std::int64_t>(age->count(), std::numeric_limits<int>::max()));
  };
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, age_ms(options_.max_connection_age));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             age_ms(options_.max_connection_age_grace));
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options_.tls) {
    auto tls = GrpcServerCredentials(*options_.tls);
    if (!tls.ok()) return tls.status();
    credentials = *std::move(tls);
  }
  builder.AddListeningPort(address(), credentials, &bound_port);
  service_->Register(builder);
  const int threads = options_.threads > 0
                          ? options_.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < threads; ++i) queues_.push_back(builder.AddCompletionQueue());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound_port == 0) {
    server_.reset();
    queues_.clear();  // nothing was asked of them: they go as they are
    return absl::UnavailableError(
        fmt::format("cannot listen for gRPC on {} (address in use or not local?)", address()));
  }
  // gRPC reports 1 for a unix socket.
  port_ = options_.unix_socket.empty() ? static_cast<std::uint16_t>(bound_port) : 0;
  for (auto& queue : queues_) {
    service_->AddSlots(*queue, kCallsPerThread);
    threads_.emplace_back([&queue = *queue] { Service::Drain(queue); });
  }
  return absl::OkStatus();
}

std::string GrpcServer::address() const {
  if (!options_.unix_socket.empty()) return "unix:" + options_.unix_socket;
  return HostPort(options_.host, port_ != 0 ? port_ : options_.port);
}

void GrpcServer::SetServing(bool serving) { service_->SetServing(serving); }

void GrpcServer::Shutdown(std::chrono::milliseconds grace) {
  std::lock_guard lock(shutdown_mutex_);
  if (server_ == nullptr || stopped_) return;
  stopped_ = true;
  service_->Stop();
  // The calls handed to the engine are answered, and their answers sent, first, within
  // the grace; then gRPC's shutdown is told the grace is over, and it cancels what is left
  // (an answer written but not yet sent was cancelled so, seen once in the ASan tree).
  // Given the grace itself, gRPC also waits, up to it, for every idle connection to close
  // after its GOAWAY, which an idle C++ client does only when its backup poller next runs
  // (every 5 s by default): SIGTERM took 4-5 s after a load tool had left a channel open.
  // Nothing is lost by not waiting: a call not yet handed to the engine would not be
  // taken after Stop() anyway.
  service_->AwaitAnswersOut(std::chrono::steady_clock::now() + grace);
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  // Calls gRPC cancelled past the grace may still be with the engine: their answers go
  // to queues still drained, before the slots go.
  service_->AwaitAnswers();
  // The queues go after the server (gRPC's order): the threads drain what is left.
  for (auto& queue : queues_) queue->Shutdown();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  service_->ClearSlots();
  queues_.clear();
}

}  // namespace floodgate::server::rls
